"""Continuous batching in `vkformer serve` (issue 24):
  - a greedy request alone and the same request among 15 others give the same text, and the 16
    sent together take fewer scheduler passes than sent one at a time (batched);
  - 64 chat requests at concurrency 16 complete without error, each equal to the same request
    run one by one; a second such round gives the same again, and the server's resident memory
    after it is within 2% (plus 4 MiB) of after the first.
Usage: batching_test.py VKFORMER TINY_DIR"""
import concurrent.futures
import os
import sys

from serve_harness import Checks, Server, end_load_test, post_json

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
    steps = lambda: server.metric("vkformer_scheduler_steps_total")
    before = steps()
    alone = [chat(base, i, max_tokens[i]) for i in range(16)]  # one at a time
    steps_alone = steps() - before
    alone += [chat(base, i, max_tokens[i]) for i in range(16, 64)]
    c.check(all(n > 0 for _, n, _ in alone), "every request generated tokens")
    c.check(len(set(t for t, _, _ in alone)) > 8, "the prompts give different texts")

    def round_at(concurrency, indices):
        with concurrent.futures.ThreadPoolExecutor(concurrency) as pool:
            return list(pool.map(lambda i: chat(base, i, max_tokens[i]), indices, timeout=600))

    # Batching shows in the scheduler's count of passes, not in a sample of the active-slots gauge
    # (issue 40): a watcher polling /metrics every 20 ms on a loaded machine can miss the moments
    # when many sequences were active, as serve_batching_families' did. Alone, each request runs
    # its own prompt and decode passes; together the same rows take fewer passes exactly when steps
    # carry more than one sequence, whatever the machine's load does to the timing.
    before = steps()
    together = round_at(16, range(16))  # each of the first 16 among 15 others
    steps_together = steps() - before
    for i in range(16):
        c.check(together[i] == alone[i], "request %d among 15 others: %r, alone %r" % (i, together[i], alone[i]))
    print("the first 16 requests: %d scheduler passes one at a time, %d sent together" % (steps_alone, steps_together))
    c.check(steps_together < steps_alone, "together in %d passes, one at a time in %d: no step carried two sequences"
            % (steps_together, steps_alone))

    first = round_at(16, range(64))
    rss_first = server.rss_kib()
    second = round_at(16, range(64))
    rss_second = server.rss_kib()
    for i in range(64):
        c.check(first[i] == alone[i], "load round 1, request %d: %r vs alone %r" % (i, first[i], alone[i]))
        c.check(second[i] == alone[i], "load round 2, request %d: %r vs alone %r" % (i, second[i], alone[i]))
    print("resident memory after round 1: %d KiB, after round 2: %d KiB" % (rss_first, rss_second))
    end_load_test(c, server, rss_first, rss_second)
finally:
    server.kill()
c.finish()
