"""vkformer: transformer models on any Vulkan device, from Python.

Sentence embeddings (BERT family, as sentence-transformers computes them)::

    import vkformer
    model = vkformer.Embedder("~/.cache/vkformer/all-MiniLM-L6-v2/model")
    emb = model.encode(["A man is eating food.", "A man is riding a horse."])  # (2, 384) float32

Language models from GGUF files, as llama-cpp-python names things::

    llm = vkformer.LLM("~/.cache/vkformer/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf")
    llm.generate("The capital of France is", max_tokens=8)
    for piece in llm.stream("Once upon a time", max_tokens=32):
        print(piece, end="", flush=True)
    llm.chat([{"role": "user", "content": "What is the capital of France?"}])

PyTorch-shaped seq2seq and transformer models (``Model``) and the op-level ``Graph`` and
``Executor`` take and return numpy arrays. ``devices()`` lists the Vulkan devices.

Device work runs with the GIL released, so other Python threads go on meanwhile. Every failure
is a ``vkformer.Error`` (a RuntimeError) carrying the library's message and a ``code``.
"""
from ._core import (  # noqa: F401  (re-exported)
    DeviceLostError,
    DeviceNotFoundError,
    Error,
    FileError,
    FormatError,
    InternalError,
    InvalidArgumentError,
    OutOfMemoryError,
    ShapeMismatchError,
    UnsupportedError,
    VulkanError,
)
from ._devices import devices
from .embedder import Embedder
from .graph import Executor, Graph, Tensor
from .llm import LLM
from .model import Model

__version__ = "0.1.0"

__all__ = [
    "devices", "Embedder", "LLM", "Model", "Graph", "Executor", "Tensor",
    "Error", "InvalidArgumentError", "ShapeMismatchError", "DeviceNotFoundError", "UnsupportedError",
    "OutOfMemoryError", "DeviceLostError", "VulkanError", "FileError", "FormatError", "InternalError",
]
