"""Continuous batching of the families whose attention takes masks (issue 24): `vkformer serve`
on the tiny Gemma 2 (soft-capped attention, sliding windows of 6 on alternate layers), Gemma 3
(5 sliding layers to 1 global) and Mistral (a window on every layer) of tests/golden_families.
Eight greedy completions, prompts of 2 to 40 token ids and up to 24 tokens each (so every
sequence runs past the window), give the same text and token count sent 8 at a time into 4
slots (the scheduler must have run the same work in fewer passes: some step carried more than
one sequence) as sent one by one.
Usage: batching_families_test.py VKFORMER FAMILIES_DIR"""
import concurrent.futures
import os
import sys

from serve_harness import Checks, Server, post_json

vkformer, families_dir = sys.argv[1:3]
c = Checks()


def prompt_ids(i):
    n = 2 + (i * 11) % 39
    return [1 + (i * 37 + j * 13) % 300 for j in range(n)]


def complete(base, i):
    body = {"model": "tiny", "temperature": 0, "max_tokens": 8 + (i * 5) % 17, "prompt": prompt_ids(i)}
    reply = post_json(base, "/v1/completions", body, "request %d" % i)
    return reply["choices"][0]["text"], reply["usage"]["completion_tokens"]


for family in ("gemma2", "gemma3", "mistral"):
    gguf_path = os.path.join(families_dir, family + ".f32.gguf")
    server = Server(vkformer, ["--model", gguf_path, "--ctx", "96", "--parallel", "4", "--model-name", "tiny"])
    try:
        steps = lambda: server.metric("vkformer_scheduler_steps_total")
        before_alone = steps()
        alone = [complete(server.base, i) for i in range(8)]
        steps_alone = steps() - before_alone
        c.check(sum(n for _, n in alone) >= 40, "%s: the requests generated %d tokens" % (family, sum(n for _, n in alone)))
        c.check(len(set(t for t, _ in alone)) > 4, "%s: the prompts give different texts" % family)
        # Batching shows in the scheduler's count of passes, not in a sample of the active-slots gauge:
        # a watcher polling /metrics on a loaded machine can miss every moment when two sequences
        # were active (it saw 1 for Gemma 3 at load 19). Alone, each request runs its own prompt
        # and decode passes; together the same rows need fewer passes exactly when a step carries
        # more than one sequence.
        before_together = steps()
        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            together = list(pool.map(lambda i: complete(server.base, i), range(8), timeout=600))
        steps_together = steps() - before_together
        print("%s: %d tokens alone in %d passes, together in %d" % (family, sum(n for _, n in alone), steps_alone, steps_together))
        c.check(steps_together < steps_alone, "%s: together in %d passes, alone in %d: no step carried two sequences"
                % (family, steps_together, steps_alone))
        for i in range(8):
            c.check(together[i] == alone[i], "%s: request %d among 7 others: %r, alone %r" % (family, i, together[i], alone[i]))
        c.check(server.health(), "%s: health at the end" % family)
        server.stop()
    finally:
        server.kill()
c.finish()
