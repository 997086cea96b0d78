"""GGUF language models: generation, streaming and chat, named as llama-cpp-python names them."""
from __future__ import annotations

import os
import queue
import threading
from typing import Any, Iterable, Iterator, Mapping, Optional, Sequence, Union

from . import _core
from ._devices import check_text, selector
from ._progress import Progress

Messages = Sequence[Mapping[str, str]]


class _StopText:
    """Cuts generated text before the first stop string, holding back what could still become
    one, so a streamed piece never shows part of a stop string."""

    def __init__(self, stop: Union[None, str, Sequence[str]]):
        self.stops = [stop] if isinstance(stop, str) else [s for s in (stop or []) if s]
        self.text = ""     # everything generated so far
        self.shown = 0     # how much of it was handed out
        self.stopped = False

    def push(self, piece: str) -> str:
        self.text += piece
        end = len(self.text)
        for s in self.stops:
            at = self.text.find(s)
            if at >= 0:
                self.stopped = True
                end = min(end, at)
        if not self.stopped:
            # Hold back a tail that is the start of a stop string.
            for s in self.stops:
                for k in range(min(len(s) - 1, len(self.text)), 0, -1):
                    if self.text.endswith(s[:k]):
                        end = min(end, len(self.text) - k)
                        break
        out = self.text[self.shown:end] if end > self.shown else ""
        self.shown = max(self.shown, end)
        return out

    def finish(self) -> str:
        if self.stopped:
            return ""
        out = self.text[self.shown:]
        self.shown = len(self.text)
        return out


class LLM:
    """A decoder-only language model from a GGUF file (the llama architecture: Llama 3, SmolLM2,
    ...) with its byte-level BPE tokenizer and ChatML chat template, on a Vulkan device.

    ``n_ctx``: tokens the KV cache holds (prompt and reply); 0 = the model's context length, at
    most 4096. ``device``: None (VKFORMER_DEVICE, else the default order), an index or a name
    substring. ``f16``: keep activations and the KV cache in float16. ``cache_type_k`` and
    ``cache_type_v``: the KV cache's types, ``"f32"``, ``"f16"``, ``"q8_0"`` or ``"q4_0"``
    (llama.cpp's ``--cache-type-k/v``: q8_0 takes 34 bytes per 32 values, about half of f16);
    None = the activations' type. ``kv_rotation``: quantized caches store q, k and v rotated by
    a Hadamard matrix, as llama.cpp does (its error on 4-bit keys is a fraction of the plain
    blocks'); False stores them unrotated (the CLI's ``--no-kv-rotation``). ``kv_cache`` says
    what the cache takes and the rotation's block sizes.

    Speculative decoding (llama.cpp's names): ``spec="ngram"`` (prompt lookup) or
    ``model_draft=PATH`` (a GGUF draft of the same vocabulary, loaded on the same device), with
    ``draft_max`` (1..63), ``draft_min`` and ``draft_p_min``. Greedy output is unchanged; with a
    temperature the speculative sampling rule keeps the distribution. ``last_stats`` then
    counts ``drafted_tokens``, ``accepted_tokens`` and ``passes``.

    Each ``generate``/``stream``/``chat`` call starts from an empty cache. One object may be
    shared by threads: calls that generate wait for each other, ``tokenize`` does not.

    >>> llm = LLM("SmolLM2-135M-Instruct.Q4_1.gguf")
    >>> llm.generate("The capital of France is", max_tokens=3)
    ' Paris.'
    """

    def __init__(self, path: Union[str, os.PathLike], n_ctx: int = 0, device: Optional[Union[int, str]] = None,
                 f16: bool = False, cache_type_k: Optional[str] = None, cache_type_v: Optional[str] = None,
                 kv_rotation: bool = True, spec: Optional[str] = None, model_draft: Optional[Union[str, os.PathLike]] = None,
                 draft_max: int = 16, draft_min: int = 0, draft_p_min: float = 0.8):
        self.path = os.fspath(os.path.expanduser(path))
        if n_ctx < 0:
            raise ValueError(f"n_ctx must be at least 1 (or 0 for the model's), got {n_ctx}")
        self._model = _core.LLM(self.path, n_ctx, selector(device), f16, cache_type_k or "", cache_type_v or "",
                                bool(kv_rotation))
        if spec is not None or model_draft is not None:
            draft = os.fspath(os.path.expanduser(model_draft)) if model_draft is not None else ""
            self._model.set_speculative(spec or "draft", draft, draft_max, draft_min, draft_p_min)
        #: Statistics of the last generation: prompt and generated tokens, seconds, tokens/s, stop.
        self.last_stats: dict[str, Any] = {}

    # Generation -------------------------------------------------------------------------------

    def generate(self, prompt: str, max_tokens: int = 128, temperature: float = 0.0, top_k: int = 0,
                 top_p: float = 1.0, min_p: float = 0.0, repeat_penalty: float = 1.0, seed: int = 0,
                 stop: Union[None, str, Sequence[str]] = None) -> str:
        """The text generated after ``prompt`` (which is tokenized with BOS as the file asks and
        special tokens such as ``<|im_start|>`` parsed).

        Sampling as llama.cpp's default chain: repetition penalty, top-k, top-p, min-p, then
        temperature; ``temperature=0`` is greedy. ``seed`` makes draws repeatable. Generation
        ends at the model's end-of-generation token, after ``max_tokens``, when the context is
        full, or at the first ``stop`` string (not included). Ctrl-C stops it and raises
        KeyboardInterrupt.
        """
        return "".join(self.stream(prompt, max_tokens, temperature, top_k, top_p, min_p, repeat_penalty,
                                   seed, stop, _inline=True))

    def stream(self, prompt: str, max_tokens: int = 128, temperature: float = 0.0, top_k: int = 0,
               top_p: float = 1.0, min_p: float = 0.0, repeat_penalty: float = 1.0, seed: int = 0,
               stop: Union[None, str, Sequence[str]] = None, *, _inline: bool = False) -> Iterator[str]:
        """Like ``generate``, yielding the text as it is generated: whole UTF-8 characters, one
        piece per token (a character split over tokens comes with the token that ends it).
        Closing the iterator early (``break``) stops generation."""
        ids = self._prompt_ids(prompt)
        sampling = self._sampling(max_tokens, temperature, top_k, top_p, min_p, repeat_penalty, seed)
        stops = _StopText(stop)
        if _inline:  # generate(): no thread, the pieces are collected in this one
            pieces: list[str] = []

            def collect(text: str, token: int) -> bool:
                pieces.append(stops.push(text))
                return not stops.stopped

            self._run(ids, max_tokens, sampling, collect)
            yield "".join(pieces) + stops.finish()
            return
        yield from self._stream_thread(ids, max_tokens, sampling, stops)

    def chat(self, messages: Messages, max_tokens: int = 128, temperature: float = 0.0, top_k: int = 0,
             top_p: float = 1.0, min_p: float = 0.0, repeat_penalty: float = 1.0, seed: int = 0,
             stop: Union[None, str, Sequence[str]] = None, stream: bool = False) -> Union[str, Iterator[str]]:
        """The assistant's reply to OpenAI-style messages (``[{"role": "user", "content": "..."},
        ...]``, roles 'system', 'user', 'assistant'), formatted with the model's chat template
        (its default system message first when the messages have none). With ``stream=True`` an
        iterator of pieces instead. Append ``{"role": "assistant", "content": reply}`` to go on."""
        prompt = self.apply_chat_template(messages)
        args = (prompt, max_tokens, temperature, top_k, top_p, min_p, repeat_penalty, seed, stop)
        return self.stream(*args) if stream else self.generate(*args)

    def apply_chat_template(self, messages: Messages, add_generation_prompt: bool = True) -> str:
        """The prompt text the chat template makes of ``messages``."""
        pairs = []
        for i, m in enumerate(messages):
            if not isinstance(m, Mapping) or "role" not in m or "content" not in m:
                raise ValueError(f"messages[{i}]: expected a dict with 'role' and 'content', got {m!r}")
            pairs.append((str(m["role"]), str(m["content"])))
            check_text(pairs[-1][1], f"messages[{i}]['content']")
        if not pairs:
            raise ValueError("messages is empty: give at least one {'role': 'user', 'content': ...}")
        return self._model.apply_chat_template(pairs, add_generation_prompt)

    # Quality ----------------------------------------------------------------------------------

    def perplexity(self, text: str, n_ctx: Optional[int] = None, chunks: int = 0,
                   progress: bool = False) -> dict[str, Any]:
        """The model's perplexity on ``text``, measured as llama.cpp's ``llama-perplexity -f FILE
        -c N`` measures it (the same number for the same model, text and context): the text is
        tokenized whole (BOS as the file asks, one trailing newline dropped), cut into chunks of
        ``n_ctx`` tokens, each run from an empty cache with BOS first and scored on its second
        half. ``n_ctx``: tokens per chunk, 16 to this LLM's ``n_ctx`` (its default;
        llama-perplexity's is 512); the text needs at least ``2 * n_ctx`` tokens. ``chunks``:
        score at most this many (0: all). ``progress``: a bar on stderr.

        Returns a dict: ``ppl`` and ``ppl_error`` (llama-perplexity's "Final estimate: PPL = ppl
        +/- ppl_error"), ``mean_nll`` and ``nll_error`` (nats per token), ``chunk_ppl`` and
        ``chunk_ppl_error`` (the running estimate after each chunk), ``text_tokens``, ``n_ctx``,
        ``chunks``, ``scored_tokens``, ``seconds``, ``stopped``. Ctrl-C stops it after the
        current pass and raises KeyboardInterrupt. Uses the KV cache: calls that generate wait.

        >>> LLM("SmolLM2-135M-Instruct.Q4_1.gguf", n_ctx=512).perplexity(open("wiki.test.raw").read())["ppl"]
        """
        if not isinstance(text, str):
            raise TypeError(f"text must be a string, got {type(text).__name__}")
        check_text(text, "text")
        n = self.n_ctx if n_ctx is None else n_ctx
        if not 16 <= n <= self.n_ctx:
            raise ValueError(f"n_ctx must be from 16 to {self.n_ctx} (this LLM's n_ctx), got {n}")
        if chunks < 0:
            raise ValueError(f"chunks must be >= 0 (0: all), got {chunks}")
        bar: Optional[Progress] = None

        def on_progress(done: int, total: int, chunk_done: bool, ppl: float, ppl_error: float) -> bool:
            nonlocal bar
            if bar is None:
                bar = Progress(total, "perplexity: tokens")
            bar.advance(done - bar.done)
            return True

        return self._model.perplexity(text, n, chunks, on_progress if progress else None)

    # Tokens -----------------------------------------------------------------------------------

    def tokenize(self, text: Union[str, bytes], add_bos: bool = True, special: bool = True) -> list[int]:
        """Token ids of ``text``: BOS/EOS where the file asks (``add_bos``), special-token text
        such as ``<|im_start|>`` parsed as those tokens (``special``), as llama-tokenize does."""
        if isinstance(text, bytes):
            text = text.decode("utf-8")
        check_text(text, "text")
        return self._model.tokenize(text, add_bos, special)

    def detokenize(self, ids: Iterable[int]) -> str:
        """The text of ``ids`` (bytes of an unfinished UTF-8 character as U+FFFD)."""
        return self._model.detokenize(list(ids))

    def token_piece(self, token: int) -> str:
        """The vocabulary's string for a token, byte-level as stored (``'Ġworld'`` for ' world')."""
        return self._model.token_piece(token)

    @property
    def n_ctx(self) -> int:
        """Tokens the KV cache holds."""
        return self._model.n_ctx

    @property
    def kv_cache(self) -> dict[str, Any]:
        """The KV cache: ``type_k``, ``type_v``, ``bytes`` (every layer, K and V),
        ``bytes_per_token`` and ``context_that_fits`` (the longest context the device's memory
        would hold in these types), from its allocations; ``rotation_k`` and ``rotation_v``: the
        Hadamard blocks of the attention rotation (0: none; see ``kv_rotation``)."""
        return self._model.kv_cache

    @property
    def n_vocab(self) -> int:
        return self._model.n_vocab

    @property
    def device(self) -> str:
        """The name of the Vulkan device the model runs on."""
        return self._model.device_name

    def __repr__(self) -> str:
        return (f"LLM({self.path!r}, n_ctx={self.n_ctx}, {self._model.architecture}, "
                f"{self._model.n_layers} layers, d_model {self._model.d_model}, device={self.device!r})")

    # Internals --------------------------------------------------------------------------------

    def _prompt_ids(self, prompt: str) -> list[int]:
        if not isinstance(prompt, str):
            raise TypeError(f"prompt must be a string, got {type(prompt).__name__}")
        check_text(prompt, "the prompt")
        ids = self._model.tokenize(prompt, True, True)
        if not ids:
            raise ValueError("the prompt gives no tokens: give some text")
        if len(ids) >= self.n_ctx:
            raise ValueError(f"the prompt has {len(ids)} tokens but the context holds {self.n_ctx}: no room to "
                             f"generate; give a shorter prompt or a larger n_ctx")
        return ids

    @staticmethod
    def _sampling(max_tokens: int, temperature: float, top_k: int, top_p: float, min_p: float,
                  repeat_penalty: float, seed: int) -> "_core.SamplingOptions":
        if max_tokens < 1:
            raise ValueError(f"max_tokens must be at least 1, got {max_tokens}")
        s = _core.SamplingOptions()
        s.temperature, s.top_k, s.top_p, s.min_p = temperature, top_k, top_p, min_p
        s.repeat_penalty, s.seed = repeat_penalty, seed
        s.validate()  # the library's ranges and messages
        return s

    def _run(self, ids: list[int], max_tokens: int, sampling: Any, on_text: Any) -> None:
        _tokens, _text, stats = self._model.generate_ids(ids, max_tokens, sampling, on_text)
        self.last_stats = stats

    def _stream_thread(self, ids: list[int], max_tokens: int, sampling: Any, stops: _StopText) -> Iterator[str]:
        # The model generates on a worker thread (the GIL released on the device), handing
        # pieces over a queue; closing this generator tells the worker to stop at the next token.
        pieces: "queue.Queue[tuple[str, Any]]" = queue.Queue()
        closed = threading.Event()

        def on_text(text: str, token: int) -> bool:
            piece = stops.push(text)
            if piece:
                pieces.put(("piece", piece))
            return not (closed.is_set() or stops.stopped)

        def work() -> None:
            try:
                self._run(ids, max_tokens, sampling, on_text)
                pieces.put(("end", stops.finish()))
            except BaseException as e:  # handed to the consumer, raised there
                pieces.put(("error", e))

        worker = threading.Thread(target=work, name="vkformer-generate", daemon=True)
        worker.start()
        try:
            while True:
                kind, value = pieces.get()
                if kind == "piece":
                    yield value
                elif kind == "end":
                    if value:
                        yield value
                    return
                else:
                    raise value
        finally:
            closed.set()
            worker.join()
