"""PyTorch-shaped transformer models (nn.TransformerEncoder, nn.TransformerDecoder,
nn.Transformer and the original paper's seq2seq model) with numpy arrays in and out."""
from __future__ import annotations

import json
import os
from typing import Any, Optional, Union

import numpy as np

from . import _core
from ._devices import selector

_MASKS = ("src_mask", "tgt_mask", "memory_mask", "src_key_padding_mask", "tgt_key_padding_mask",
          "memory_key_padding_mask")


def _masks(given: dict[str, Any]) -> dict[str, np.ndarray]:
    out = {}
    for name, value in given.items():
        if name not in _MASKS:
            raise TypeError(f"unexpected keyword argument '{name}' (masks: {', '.join(_MASKS)})")
        if value is not None:
            out[name] = np.ascontiguousarray(value)
    return out


class Model:
    """A model directory (``config.json`` and ``model.safetensors``, as ``tools/export_torch.py``
    writes it) on a Vulkan device, in ``batch_first`` layout ``[batch, seq, feature]``.

    Masks are PyTorch's keyword arguments with PyTorch's meanings: ``*_key_padding_mask`` are
    boolean ``[batch, seq]`` arrays (True = ignore), ``src_mask``/``tgt_mask``/``memory_mask``
    are ``[queries, keys]`` float (added) or boolean (True = masked) arrays; ``causal=True`` is
    ``generate_square_subsequent_mask``. Outputs are float32 arrays.

    ``dtype``: 'f32', or 'f16' to store weights and activations in float16 (math in float32).
    """

    def __init__(self, path: Union[str, os.PathLike], device: Optional[Union[int, str]] = None,
                 dtype: str = "f32"):
        self.path = os.fspath(os.path.expanduser(path))
        self._model = _core.Model(self.path, selector(device), dtype)
        #: config.json as the library read it (arch, d_model, nhead, layers, vocabularies, ...).
        self.config: dict[str, Any] = json.loads(self._model.config_json)

    def encode(self, src: np.ndarray, causal: bool = False, **masks: Optional[np.ndarray]) -> np.ndarray:
        """encoder: ``src [B, S, E] -> [B, S, E]``; transformer: its encoder stack; seq2seq:
        source ids ``[B, S]`` -> memory ``[B, S, E]``. Masks: ``src_mask``, ``src_key_padding_mask``."""
        return self._model.encode(np.ascontiguousarray(src), causal, _masks(masks))

    def decode(self, tgt: np.ndarray, memory: np.ndarray, causal: bool = False,
               **masks: Optional[np.ndarray]) -> np.ndarray:
        """decoder: ``tgt [B, T, E]`` and ``memory [B, S, E]`` -> ``[B, T, E]``. Masks:
        ``tgt_mask``, ``memory_mask``, ``tgt_key_padding_mask``, ``memory_key_padding_mask``."""
        return self._model.decode(np.ascontiguousarray(tgt), np.ascontiguousarray(memory), causal, _masks(masks))

    def forward(self, src: np.ndarray, tgt: np.ndarray, causal: bool = False,
                **masks: Optional[np.ndarray]) -> np.ndarray:
        """transformer: ``src [B, S, E]``, ``tgt [B, T, E]`` -> ``[B, T, E]`` (nn.Transformer's
        forward); seq2seq: source and target ids -> log-probabilities ``[B, T, tgt_vocab]``."""
        return self._model.forward(np.ascontiguousarray(src), np.ascontiguousarray(tgt), causal, _masks(masks))

    __call__ = forward

    def generate(self, src: Any, max_new_tokens: int = 32, bos: int = 1, eos: int = 2, beam: int = 1,
                 length_penalty: float = 0.6) -> list[int]:
        """seq2seq: greedy (``beam=1``) or beam search from one source sentence (a list of ids),
        with a KV cache. Returns the ids after ``bos``, ending with ``eos`` if it was produced
        (``eos=-1``: none, always ``max_new_tokens``)."""
        ids = [int(i) for i in np.asarray(src).reshape(-1)]
        return self._model.generate(ids, max_new_tokens, bos, eos, beam, length_penalty)

    @property
    def dtype(self) -> str:
        return self._model.dtype

    def __repr__(self) -> str:
        return f"Model({self.path!r}, arch={self.config.get('arch')!r}, dtype={self.dtype!r})"
