"""Sentence embeddings with BERT-family models, named as sentence-transformers names them."""
from __future__ import annotations

import os
from typing import Optional, Sequence, Union

import numpy as np

from . import _core
from ._devices import check_text, selector
from ._progress import Progress


class Embedder:
    """A BERT-family sentence embedder on a Vulkan device.

    ``path`` is a directory saved by sentence-transformers (``modules.json``, ``1_Pooling``, an
    optional Normalize module; e.g. ``scripts/fetch_minilm.sh``'s all-MiniLM-L6-v2) or a plain
    Hugging Face BERT directory (mean pooling, as sentence-transformers gives one).
    ``device``: None (VKFORMER_DEVICE, else the default order), an index or a name substring.
    ``dtype``: 'f32', or 'f16' to store weights and activations in float16 (math in float32).

    >>> model = Embedder("all-MiniLM-L6-v2")
    >>> model.encode(["A man is eating food."]).shape
    (1, 384)
    """

    def __init__(self, path: Union[str, os.PathLike], device: Optional[Union[int, str]] = None,
                 dtype: str = "f32"):
        self.path = os.fspath(os.path.expanduser(path))
        self._model = _core.Embedder(self.path, selector(device), dtype)

    def encode(self, sentences: Union[str, Sequence[str]], batch_size: int = 32,
               normalize_embeddings: bool = True, show_progress_bar: bool = False) -> np.ndarray:
        """Embeds the sentences: a float32 array ``(len(sentences), dimension)``, or
        ``(dimension,)`` for one string, as ``SentenceTransformer.encode`` returns.

        Sentences are sorted by length and run ``batch_size`` at a time, each batch padded to a
        shape bucket that is compiled once; longer than ``max_seq_length`` tokens is truncated.
        ``normalize_embeddings`` scales every row to unit length (all-MiniLM-L6-v2's own
        Normalize module already does). ``show_progress_bar`` draws the batches done on stderr.
        """
        single = isinstance(sentences, str)
        texts = [sentences] if single else list(sentences)
        for i, t in enumerate(texts):
            if not isinstance(t, str):
                raise TypeError(f"sentences[{i}] is {type(t).__name__}: expected a string or a sequence of strings")
            check_text(t, f"sentences[{i}]")
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, got {batch_size}")
        out = np.zeros((len(texts), self.dimension), dtype=np.float32)
        # Longest first, as sentence-transformers does: batches of similar lengths pad little.
        order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
        progress = Progress(len(texts), "Batches", show_progress_bar)
        for start in range(0, len(order), batch_size):
            rows = order[start:start + batch_size]
            out[rows] = self._model.embed([texts[i] for i in rows])
            progress.advance(len(rows))
        if normalize_embeddings:
            norms = np.linalg.norm(out, axis=1, keepdims=True)
            out /= np.maximum(norms, 1e-12)
        return out[0] if single else out

    def tokenize(self, text: str) -> tuple[list[int], list[str]]:
        """The WordPiece ids and tokens of one text, [CLS] and [SEP] included."""
        return self._model.tokenize(text)

    @property
    def dimension(self) -> int:
        """Length of one embedding (384 for all-MiniLM-L6-v2)."""
        return self._model.dimension

    def get_sentence_embedding_dimension(self) -> int:
        """``dimension``, under sentence-transformers' name."""
        return self.dimension

    @property
    def max_seq_length(self) -> int:
        """Tokens per text at most; longer texts are truncated."""
        return self._model.max_seq_length

    @property
    def pooling(self) -> str:
        """'mean', 'cls' or 'max'."""
        return self._model.pooling

    @property
    def device(self) -> str:
        """The name of the Vulkan device the model runs on."""
        return self._model.device_name

    def __repr__(self) -> str:
        return (f"Embedder({self.path!r}, dimension={self.dimension}, pooling={self.pooling!r}, "
                f"dtype={self._model.dtype!r}, device={self.device!r})")
