"""Continuous batching in `vkformer serve` (issue 24):
  - a greedy request alone and the same request among 15 others give the same text;
  - 64 chat requests at concurrency 16 complete without error, each equal to the same request
    run one by one; a second such round gives the same again, and the server's resident memory
    after it is within 2% (plus 4 MiB) of after the first.
Usage: batching_test.py VKFORMER TINY_DIR"""
import concurrent.futures
import os
import sys
import threading

from serve_harness import Checks, Server, post_json

vkformer, tiny_dir = sys.argv[1:3]
gguf_path = os.path.join(tiny_dir, "tiny_llama_untied.gguf")
c = Checks()


def chat(base, i, max_tokens):
    body = {"model": "tiny", "temperature": 0, "max_tokens": max_tokens,
            "messages": [{"role": "user", "content": "Request %d: %s" % (i, "more " * (i % 4))}]}
    reply = post_json(base, "/v1/chat/completions", body, "request %d" % i)
    return reply["choices"][0]["message"]["content"], reply["usage"]["completion_tokens"], reply["choices"][0]["finish_reason"]


server = Server(vkformer, ["--model", gguf_path, "--ctx", "128", "--parallel", "16", "--model-name", "tiny"],
                steady_memory=True)
try:
    base = server.base
    max_tokens = [8 + (i * 7) % 32 for i in range(64)]
    alone = [chat(base, i, max_tokens[i]) for i in range(64)]  # one at a time
    c.check(all(n > 0 for _, n, _ in alone), "every request generated tokens")
    c.check(len(set(t for t, _, _ in alone)) > 8, "the prompts give different texts")

    # The peak of sequences generating together, watched from /metrics while a round runs.
    peak = [0]
    stop = threading.Event()

    def watch():
        while not stop.is_set():
            for line in server.metrics().splitlines():
                if line.startswith("vkformer_active_slots "):
                    peak[0] = max(peak[0], int(float(line.split()[1])))
            stop.wait(0.02)

    def round_at(concurrency, indices):
        stop.clear()
        t = threading.Thread(target=watch)
        t.start()
        with concurrent.futures.ThreadPoolExecutor(concurrency) as pool:
            out = list(pool.map(lambda i: chat(base, i, max_tokens[i]), indices, timeout=600))
        stop.set()
        t.join()
        return out

    together = round_at(16, range(16))  # each of the first 16 among 15 others
    for i in range(16):
        c.check(together[i] == alone[i], "request %d among 15 others: %r, alone %r" % (i, together[i], alone[i]))
    c.check(peak[0] >= 8, "at most %d sequences generated together" % peak[0])

    first = round_at(16, range(64))
    rss_first = server.rss_kib()
    second = round_at(16, range(64))
    rss_second = server.rss_kib()
    for i in range(64):
        c.check(first[i] == alone[i], "load round 1, request %d: %r vs alone %r" % (i, first[i], alone[i]))
        c.check(second[i] == alone[i], "load round 2, request %d: %r vs alone %r" % (i, second[i], alone[i]))
    print("resident memory after round 1: %d KiB, after round 2: %d KiB" % (rss_first, rss_second))
    c.check(rss_second <= rss_first * 1.02 + 4096, "memory grew from %d to %d KiB" % (rss_first, rss_second))
    c.check(server.health(), "health at the end")
    server.stop()
finally:
    server.kill()
c.finish()
