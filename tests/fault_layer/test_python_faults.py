"""The Python package when the device fails (ctest `python_faults`): the vkfault layer
(tests/fault_layer/README.md) is in the Vulkan chain through the test's environment, and this
reaches its controls with ctypes to fail chosen calls. Out of device memory while loading raises
vkformer.OutOfMemoryError saying what the model needs; a lost device raises
vkformer.DeviceLostError for that call and every later one; a model loaded afterwards gets a new
device and generates what it generated before the faults, and nothing of the lost device is left.
"""
from __future__ import annotations

import ctypes
import gc
import os

import pytest

import vkformer

TINY = os.path.join(os.environ["VKFORMER_REPO"], "tests", "golden_llama", "tiny", "tiny_llama_tied.gguf")


@pytest.fixture(scope="module")
def layer():
    lib = ctypes.CDLL(os.path.join(os.environ["VKFORMER_FAULT_LAYER_DIR"], "libVkLayer_vkformer_fault.so"))
    lib.vkfault_configure.argtypes = [ctypes.c_char_p]
    lib.vkfault_live_objects.restype = ctypes.c_int64
    lib.vkfault_injected.restype = ctypes.c_uint64
    lib.vkfault_calls.argtypes = [ctypes.c_char_p]
    lib.vkfault_calls.restype = ctypes.c_uint64

    def arm(spec: str) -> None:
        assert lib.vkfault_configure(spec.encode()) == 0, spec
    lib.arm = arm
    return lib


def test_faults_raise_the_right_errors_and_a_new_model_answers_as_before(layer):
    layer.arm("")
    assert layer.vkfault_live_objects() == 0
    llm = vkformer.LLM(TINY)
    assert layer.vkfault_calls(b"vkQueueSubmit") > 0, "the layer is not in the Vulkan chain"
    want = llm.generate("hello", max_tokens=4)
    assert want

    layer.arm("vkQueueSubmit:1")
    with pytest.raises(vkformer.DeviceLostError, match="vkQueueSubmit failed: VK_ERROR_DEVICE_LOST") as e:
        llm.generate("hello", max_tokens=4)
    assert e.value.code == "device_lost"
    with pytest.raises(vkformer.DeviceLostError, match="was lost earlier"):
        llm.generate("hello", max_tokens=4)
    assert layer.vkfault_injected() == 1
    del llm, e  # the exception's traceback holds the frame of generate(), and so the model
    gc.collect()
    # The package keeps its device (pipelines, memory blocks) for the next model; the lost one
    # until a model asks for a device, which then gets a new one.
    lost_device_objects = layer.vkfault_live_objects()

    layer.arm("vkAllocateMemory:1+")
    with pytest.raises(vkformer.OutOfMemoryError, match="out of device memory: the model needs") as e:
        vkformer.LLM(TINY)
    assert isinstance(e.value, MemoryError)
    del e
    gc.collect()

    layer.arm("")
    again = vkformer.LLM(TINY)
    assert again.generate("hello", max_tokens=4) == want
    del again
    gc.collect()
    # The new device holds what the lost one held, and nothing of the lost one is left.
    assert layer.vkfault_live_objects() == lost_device_objects
