"""Devices: what ``vkformer.devices()`` lists and how the other classes' ``device=`` is read."""
from __future__ import annotations

from typing import Any, Optional, Union

from . import _core


def selector(device: Optional[Union[int, str]]) -> str:
    """``device=`` as the library's selector: None (VKFORMER_DEVICE, else the default order: discrete,
    integrated, virtual, cpu), an index, a case-insensitive name substring or a UUID."""
    if device is None:
        return ""
    if isinstance(device, bool) or not isinstance(device, (int, str)):
        raise TypeError(f"device must be None, an index or a name substring, got {device!r}")
    text = str(device)
    if text == "":
        raise ValueError("device is empty: give an index, a name substring or a UUID, or None for the default")
    return text


def devices(device: Optional[Union[int, str]] = None) -> list[dict[str, Any]]:
    """The Vulkan devices, as ``vkformer devices`` lists them: one dict per device with ``index``,
    ``name``, ``type`` ('discrete', 'integrated', 'virtual', 'cpu'), ``vendor``, ``uuid``,
    ``driver``, ``api_version``, ``device_local_memory_bytes``, ``subgroup_size``,
    ``fp16_arithmetic``, ``cooperative_matrix``, ``tuning`` (whether ``vkformer tune`` measured
    the device: ``status`` 'tuned', 'not tuned', 'ignored' or 'static', the cache ``path``, the
    ``problem`` with an ignored file, the ``choices`` kept) and ``chosen`` (the one vkformer would
    use for ``device``; none when it matches nothing). Without a Vulkan loader it raises
    ``DeviceNotFoundError`` naming each library it looked for."""
    return _core._devices(selector(device))


def check_text(text: str, what: str) -> None:
    """Text must encode as UTF-8 (a lone surrogate such as '\\ud800' does not): a ValueError
    naming the argument and the position, as the command line names the byte."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as e:
        raise ValueError(f"{what} is not valid text at position {e.start} ({e.reason}): "
                         f"vkformer reads text as UTF-8") from None
