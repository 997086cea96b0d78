"""`vkformer serve` driven by the official openai package (issue 24):
  - /v1/models lists both models;
  - greedy next tokens equal the float64 reference's argmax (tests/golden_llama/tiny: tools/
    llama_reference.py), for 24 prefixes of a 101-token sequence sent at once;
  - chat and text completions, streamed and not: the streamed text equals the non-streamed text,
    usage counts add up, stop strings and max_tokens end a reply as OpenAI defines;
  - embeddings (float and base64) against sentence-transformers' golden vectors
    (tests/golden_embeddings) to 1e-5 in cosine.
Usage: openai_client_test.py VKFORMER TINY_DIR MINILM_DIR GOLDEN_EMBEDDINGS_DIR"""
import concurrent.futures
import json
import os
import sys

import numpy as np
import openai
from gguf import GGUFReader

from serve_harness import Checks, Server, byte_decoder

vkformer, tiny_dir, minilm_dir, golden_emb_dir = sys.argv[1:5]
gguf_path = os.path.join(tiny_dir, "tiny_llama_untied.gguf")
golden = json.load(open(os.path.join(tiny_dir, "golden.json")))
c = Checks()


reader = GGUFReader(gguf_path)
field = reader.fields["tokenizer.ggml.tokens"]
vocab = [bytes(field.parts[i]).decode() for i in field.data]
to_bytes = byte_decoder()


def token_text(tid):
    return bytes(to_bytes[ch] for ch in vocab[tid]).decode("utf-8", errors="strict")


server = Server(vkformer, ["--model", gguf_path, "--ctx", "128", "--parallel", "8",
                           "--embedding-model", minilm_dir, "--model-name", "tiny"])
try:
    client = openai.OpenAI(base_url=server.base + "/v1", api_key="unused", timeout=300, max_retries=0)

    ids = [m.id for m in client.models.list().data]
    c.check(ids == ["tiny", os.path.basename(os.path.normpath(minilm_dir))], "models: %s" % ids)

    # Greedy next token after each prefix vs the reference's argmax, all prefixes in flight at once.
    seq = golden["models"]["untied"]["sequences"]["random_101"]
    prefixes = []
    for k in range(4, 101, 4):
        want = seq["argmax"][k - 1]
        try:
            text = token_text(want)
        except UnicodeDecodeError:
            continue  # a token that is part of a character: its text is not whole
        if seq["top2_margin"][k - 1] > 1e-2 and not vocab[want].startswith("<"):
            prefixes.append((seq["ids"][:k], text))

    def first_token(p):
        r = client.completions.create(model="tiny", prompt=p[0], max_tokens=1, temperature=0)
        return r.choices[0].text, r.usage.prompt_tokens, r.choices[0].finish_reason

    with concurrent.futures.ThreadPoolExecutor(12) as pool:
        results = list(pool.map(first_token, prefixes, timeout=300))
    for (prompt, want), (got, n, reason) in zip(prefixes, results):
        c.check(got == want and n == len(prompt) and reason == "length",
                "greedy after %d tokens: got %r (%d prompt tokens, %s), reference %r" % (len(prompt), got, n, reason, want))
    c.check(len(prefixes) >= 12, "only %d prefixes were checkable" % len(prefixes))

    # Chat, streamed and not.
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "What is 2+2?"}]
    for max_tokens in (1, 7, 40):
        full = client.chat.completions.create(model="tiny", messages=messages, max_tokens=max_tokens, temperature=0)
        text = full.choices[0].message.content
        stream = client.chat.completions.create(model="tiny", messages=messages, max_tokens=max_tokens, temperature=0,
                                                stream=True, stream_options={"include_usage": True})
        pieces, reasons, usage, roles = [], [], None, []
        for chunk in stream:
            if chunk.usage is not None:
                usage = chunk.usage
            for ch in chunk.choices:
                if ch.delta.role:
                    roles.append(ch.delta.role)
                if ch.delta.content:
                    pieces.append(ch.delta.content)
                if ch.finish_reason:
                    reasons.append(ch.finish_reason)
        c.check("".join(pieces) == text, "chat max_tokens=%d: streamed %r != %r" % (max_tokens, "".join(pieces), text))
        c.check(reasons == [full.choices[0].finish_reason], "chat finish reasons %s vs %s" % (reasons, full.choices[0].finish_reason))
        c.check(roles == ["assistant"] and full.choices[0].message.role == "assistant", "roles %s" % roles)
        c.check(usage is not None and usage.completion_tokens == full.usage.completion_tokens and
                usage.prompt_tokens == full.usage.prompt_tokens and
                usage.total_tokens == usage.prompt_tokens + usage.completion_tokens, "chat usage %s vs %s" % (usage, full.usage))
        c.check(full.usage.completion_tokens <= max_tokens, "completion tokens %d > max_tokens %d" % (full.usage.completion_tokens, max_tokens))
        if full.choices[0].finish_reason == "length":
            c.check(full.usage.completion_tokens == max_tokens, "finish length after %d tokens" % full.usage.completion_tokens)
        c.check(full.object == "chat.completion" and full.id.startswith("chatcmpl-"), "chat object %s %s" % (full.object, full.id))

    # Text completions, streamed and not, and a stop string taken from the unstopped text.
    prompt = "The capital of France is"
    full = client.completions.create(model="tiny", prompt=prompt, max_tokens=30, temperature=0)
    text = full.choices[0].text
    streamed = "".join(ch.choices[0].text for ch in client.completions.create(
        model="tiny", prompt=prompt, max_tokens=30, temperature=0, stream=True) if ch.choices)
    c.check(streamed == text and len(text) > 0, "completion: streamed %r != %r" % (streamed, text))
    if len(text) >= 6:
        stop = text[3:6]
        cut = text[:text.find(stop)]
        for do_stream in (False, True):
            if do_stream:
                chunks = list(client.completions.create(model="tiny", prompt=prompt, max_tokens=30, temperature=0, stop=[stop], stream=True))
                got = "".join(ch.choices[0].text for ch in chunks if ch.choices)
                reason = [ch.choices[0].finish_reason for ch in chunks if ch.choices and ch.choices[0].finish_reason]
                reason = reason[0] if reason else None
            else:
                r = client.completions.create(model="tiny", prompt=prompt, max_tokens=30, temperature=0, stop=stop)
                got, reason = r.choices[0].text, r.choices[0].finish_reason
            c.check(got == cut and reason == "stop", "stop %r (stream %s): got %r/%s, want %r" % (stop, do_stream, got, reason, cut))

    # Seeded sampling is repeatable; the same seed streamed gives the same text.
    a = client.completions.create(model="tiny", prompt=prompt, max_tokens=20, temperature=0.9, seed=7).choices[0].text
    b = "".join(ch.choices[0].text for ch in client.completions.create(model="tiny", prompt=prompt, max_tokens=20,
                                                                       temperature=0.9, seed=7, stream=True) if ch.choices)
    c.check(a == b, "seeded sampling: %r vs %r" % (a, b))

    # Errors through the client: its exception types carry the status.
    for call, status in [
        (lambda: client.chat.completions.create(model="nope", messages=messages), 404),
        (lambda: client.chat.completions.create(model="tiny", messages=messages, n=2), 400),
        (lambda: client.completions.create(model="tiny", prompt=prompt, max_tokens=1000), 400),
        (lambda: client.chat.completions.create(model="tiny", messages=[]), 400),
    ]:
        try:
            call()
            c.check(False, "an error call succeeded (expected %d)" % status)
        except openai.APIStatusError as e:
            c.check(e.status_code == status, "status %d, expected %d: %s" % (e.status_code, status, e))

    # Embeddings against sentence-transformers' vectors.
    # The short texts (each length bucket compiles its executors on first use, slow under the
    # validation layer), the empty one among them.
    all_texts = json.load(open(os.path.join(golden_emb_dir, "texts.json")))["texts"]
    keep = [i for i, t in enumerate(all_texts) if len(t) <= 60][:12]
    texts = [all_texts[i] for i in keep]
    want = np.load(os.path.join(golden_emb_dir, "embeddings_f32.npy")).astype(np.float64)[keep]
    emb_model = os.path.basename(os.path.normpath(minilm_dir))
    for fmt in ("float", "base64", None):
        kwargs = {} if fmt is None else {"encoding_format": fmt}
        r = client.embeddings.create(model=emb_model, input=texts, **kwargs)
        if fmt == "base64":
            got = np.array([np.frombuffer(__import__("base64").b64decode(d.embedding), dtype="<f4") for d in r.data], dtype=np.float64)
        else:
            got = np.array([d.embedding for d in r.data], dtype=np.float64)
        c.check(got.shape == want.shape, "embeddings shape %s vs %s" % (got.shape, want.shape))
        if got.shape == want.shape:
            cos = (got * want).sum(1) / np.linalg.norm(got, axis=1) / np.linalg.norm(want, axis=1)
            c.check(float(np.max(1 - cos)) < 1e-5, "embeddings (%s): 1 - cosine up to %.3g" % (fmt, float(np.max(1 - cos))))
            print("embeddings (%s): %d texts, max 1 - cosine %.3g" % (fmt, len(texts), float(np.max(1 - cos))))
        c.check([d.index for d in r.data] == list(range(len(texts))) and r.usage.prompt_tokens > 0, "embedding indices/usage")
    one = client.embeddings.create(model=emb_model, input=texts[0], encoding_format="float")
    c.check(np.allclose(one.data[0].embedding, want[0], atol=1e-4), "single-string embedding")

    c.check(server.health(), "health at the end")
    metrics = server.metrics()
    c.check("vkformer_completion_tokens_total" in metrics and "vkformer_time_to_first_token_seconds_count" in metrics,
            "metrics text")
    server.stop()
finally:
    server.kill()
c.finish()
