"""Prefix caching and the token-budget scheduler of `vkformer serve` (issue 36):
  - greedy next tokens after prefixes of the float64 reference's sequence (tests/golden_llama/
    tiny), sent one after another so that each reuses the slot the previous one left: the
    reference's argmax each time, and usage.prompt_tokens_details.cached_tokens exactly the
    tokens the slot held (longer prompts: the previous prompt; shorter ones: all but the last);
  - 20 greedy requests whose prompts share prefixes of different lengths give the same text
    with cache_prompt false one by one (0 cached tokens), with the cache one by one, and at
    concurrency 16 (prompts chunked across steps of 32 tokens beside decoding sequences);
  - /metrics' vkformer_prompt_tokens_cached_total equals the cached tokens the replies reported;
  - 500 requests with prefix reuse: the same texts, and resident memory after the second 250
    within 2% (plus 4 MiB) of after the first.
Usage: prefix_cache_test.py VKFORMER TINY_DIR"""
import concurrent.futures
import json
import os
import random
import sys
import urllib.error
import urllib.request

from gguf import GGUFReader

from serve_harness import Checks, Server, byte_decoder, end_load_test

vkformer, tiny_dir = sys.argv[1:3]
gguf_path = os.path.join(tiny_dir, "tiny_llama_untied.gguf")
golden = json.load(open(os.path.join(tiny_dir, "golden.json")))
seq = golden["models"]["untied"]["sequences"]["random_101"]
c = Checks()
reported_cached = [0]  # cached tokens over every reply


def complete(base, prompt, max_tokens, cache=True, stream=False):
    """(text, completion tokens, cached tokens) of a greedy /v1/completions request."""
    body = {"model": "tiny", "prompt": prompt, "max_tokens": max_tokens, "temperature": 0, "cache_prompt": cache}
    if stream:
        body.update(stream=True, stream_options={"include_usage": True})
    req = urllib.request.Request(base + "/v1/completions", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=300) as r:
            if not stream:
                reply = json.loads(r.read())
                text, usage = reply["choices"][0]["text"], reply["usage"]
            else:
                text, usage = "", None
                for raw in r:
                    line = raw.decode().strip()
                    if line.startswith("data: ") and line != "data: [DONE]":
                        ev = json.loads(line[6:])
                        if ev.get("usage"):
                            usage = ev["usage"]
                        for ch in ev.get("choices", []):
                            text += ch.get("text", "")
    except urllib.error.HTTPError as e:
        raise RuntimeError("%d %s" % (e.code, e.read()[:300])) from None
    cached = usage["prompt_tokens_details"]["cached_tokens"]
    reported_cached[0] += cached
    return text, usage["completion_tokens"], cached


field = GGUFReader(gguf_path).fields["tokenizer.ggml.tokens"]
vocab = [bytes(field.parts[i]).decode() for i in field.data]
to_bytes = byte_decoder()


def token_text(tid):
    return bytes(to_bytes[ch] for ch in vocab[tid]).decode("utf-8", errors="strict")


server = Server(vkformer, ["--model", gguf_path, "--ctx", "128", "--parallel", "4", "--batch-tokens", "32",
                           "--model-name", "tiny"], steady_memory=True)
try:
    base = server.base
    # The reference's argmax after each prefix; the cached tokens each request reuses.
    ids = seq["ids"]
    lengths = list(range(4, 101, 6)) + list(range(99, 3, -9))  # longer each time, then shorter
    previous = None
    checked_argmax = 0
    for k in lengths:
        r = urllib.request.Request(base + "/v1/completions", headers={"Content-Type": "application/json"},
                                   data=json.dumps({"model": "tiny", "prompt": ids[:k], "max_tokens": 1,
                                                    "temperature": 0}).encode())
        with urllib.request.urlopen(r, timeout=120) as resp:
            reply = json.loads(resp.read())
        cached = reply["usage"]["prompt_tokens_details"]["cached_tokens"]
        reported_cached[0] += cached
        # The slot the previous request left holds exactly its prompt (a max_tokens 1 reply feeds
        # no token back); at least the last prompt token is computed.
        want_cached = 0 if previous is None else min(previous, k - 1)
        c.check(cached == want_cached, "prefix of %d after %s: %d cached tokens, expected %d" % (k, previous, cached, want_cached))
        previous = k
        want = seq["argmax"][k - 1]
        if seq["top2_margin"][k - 1] > 1e-2 and not vocab[want].startswith("<"):
            try:
                want_text = token_text(want)
            except UnicodeDecodeError:
                continue  # part of a character: its text is not whole
            got = reply["choices"][0]["text"]
            c.check(got == want_text, "greedy after %d tokens (%d cached): %r, reference %r" % (k, cached, got, want_text))
            checked_argmax += 1
    c.check(checked_argmax >= 8, "only %d prefixes had a clear argmax" % checked_argmax)

    # 20 prompts sharing prefixes of 40, 25 and 10 tokens of the sequence, with suffixes of 3 to
    # 30 tokens drawn from it; 6 to 25 tokens each.
    rng = random.Random(36)
    prompts, max_tokens = [], []
    for i in range(20):
        shared = [40, 25, 10, 0][i % 4]
        suffix = [ids[rng.randrange(1, len(ids))] for _ in range(3 + (i * 7) % 28)]
        prompts.append(ids[:shared] + suffix)
        max_tokens.append(6 + (i * 5) % 20)
    ref = [complete(base, p, m, cache=False) for p, m in zip(prompts, max_tokens)]
    c.check(all(r[2] == 0 for r in ref), "cache_prompt false reused cached tokens: %s" % [r[2] for r in ref])
    c.check(all(r[1] > 0 for r in ref), "every request generated tokens")
    c.check(len(set(r[0] for r in ref)) > 10, "the prompts give different texts")
    again = [complete(base, p, m) for p, m in zip(prompts, max_tokens)]
    for i in range(20):
        c.check(again[i][:2] == ref[i][:2], "request %d with the cache, one by one: %r, without %r" % (i, again[i], ref[i]))
    c.check(sum(a[2] for a in again) >= 100, "one by one, only %d tokens came from the cache" % sum(a[2] for a in again))

    def round_at(concurrency, indices, stream=False):
        with concurrent.futures.ThreadPoolExecutor(concurrency) as pool:
            return list(pool.map(lambda i: complete(base, prompts[i % 20], max_tokens[i % 20], stream=(stream and i % 3 == 0)),
                                 indices, timeout=900))

    together = round_at(16, range(20))
    for i in range(20):
        c.check(together[i][:2] == ref[i][:2], "request %d at concurrency 16: %r, alone %r" % (i, together[i], ref[i]))
    c.check(sum(t[2] for t in together) > 0, "no cached tokens at concurrency 16")
    c.check(int(server.metric_value("vkformer_prompt_tokens_cached_total")) == reported_cached[0],
            "metrics count %s cached tokens, the replies %d" % (server.metric_value("vkformer_prompt_tokens_cached_total"), reported_cached[0]))

    # 500 requests with prefix reuse, streamed and not: memory flat between the halves.
    first = round_at(16, range(250), stream=True)
    rss_first = server.rss_kib()
    second = round_at(16, range(250, 500), stream=True)
    rss_second = server.rss_kib()
    wrong = [i for i, r in enumerate(first + second) if r[:2] != ref[i % 20][:2]]
    c.check(not wrong, "%d of 500 requests differ from their reference, first %s" % (len(wrong), wrong[:5]))
    print("500 requests: %d prompt tokens from the cache; resident memory %d KiB after 250, %d KiB after 500"
          % (sum(r[2] for r in first + second), rss_first, rss_second))
    end_load_test(c, server, rss_first, rss_second)
finally:
    server.kill()
c.finish()
