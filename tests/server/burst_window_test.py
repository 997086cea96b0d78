"""The burst window of `vkformer serve` (--batch-window, issue 36): a request that finds no
sequence in a slot waits for more of its burst, so that their prompts share the first step.
Checked through /metrics' step and row counters, not by timing:
  - with a long window (10 s), a first request runs no step while the window is open; three more
    fill the 4 slots, which ends the window at once: the 4 prompts run as the rows of ONE step
    (steps +1, prompt rows +4 x 6, no decode row); (that batching leaves texts unchanged is
    serve_batching's check, whose bursts the default window gathers too);
  - a request arriving while another sequence decodes does not wait for the window: it is
    answered while the long stream still decodes (the window is 10 s, the stream ~1 s);
  - the window runs from the latest request: with a 4 s window, 4 requests 1.5 s apart share
    one step.
Usage: burst_window_test.py VKFORMER TINY_DIR"""
import concurrent.futures
import os
import sys
import threading
import time

from serve_harness import Checks, Server, post_json, stream_json, wait_until

vkformer, tiny_dir = sys.argv[1:3]
gguf_path = os.path.join(tiny_dir, "tiny_llama_untied.gguf")
c = Checks()


def complete(base, i, max_tokens=1):
    # Token ids, so that each prompt is exactly 6 rows; no cached prefix (each computes all 6).
    body = {"model": "tiny", "prompt": [3 + i, 17, 29 + i, 41, 53, 60 + i], "max_tokens": max_tokens,
            "temperature": 0, "cache_prompt": False}
    reply = post_json(base, "/v1/completions", body, "request %d" % i)
    return reply["choices"][0]["text"], reply["usage"]["completion_tokens"]


def counters(server):
    m = server.metrics()
    get = lambda name: float(next(l for l in m.splitlines() if l.startswith(name + " ")).split()[-1])
    return (get("vkformer_scheduler_steps_total"), get('vkformer_scheduler_rows_total{kind="decode"}'),
            get('vkformer_scheduler_rows_total{kind="prompt"}'))


server = Server(vkformer, ["--model", gguf_path, "--ctx", "128", "--parallel", "4", "--batch-tokens", "64",
                           "--batch-window", "10000", "--model-name", "tiny"])
try:
    base = server.base
    before = counters(server)
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        first = pool.submit(complete, base, 0)
        # The first request waits in the queue, and no step runs while the window is open, however
        # long this takes on a loaded machine (the window is 10 s).
        c.check(wait_until(lambda: server.metric_value("vkformer_queue_depth") >= 1, 60),
                "the first request reached the queue")
        time.sleep(1.0)
        c.check(counters(server)[0] == before[0],
                "a step ran while the window was open: steps %d -> %d" % (before[0], counters(server)[0]))
        sent = time.monotonic()
        rest = [pool.submit(complete, base, i) for i in range(1, 4)]
        together = [first.result(120)] + [f.result(120) for f in rest]
        waited = time.monotonic() - sent
    after = counters(server)
    steps, decode_rows, prompt_rows = (a - b for a, b in zip(after, before))
    print("a burst of 4 in the window: %d steps, %d decode rows, %d prompt rows, answered %.2f s after the last "
          "was sent" % (steps, decode_rows, prompt_rows, waited))
    c.check(all(n == 1 for _, n in together), "each request generated its one token: %r" % together)
    c.check(steps == 1, "the 4 prompts ran in %d steps, not one" % steps)
    c.check(prompt_rows == 24 and decode_rows == 0, "rows: %d prompt, %d decode (expected 24, 0)" % (prompt_rows, decode_rows))
    c.check(waited < 8, "the 4th request filled the slots, yet the step waited %.1f s (the window is 10 s)" % waited)

    # A request arriving while a sequence decodes joins the next step at once. The long stream
    # comes with 3 one-token requests, so that the 4 slots end its window at once.
    body = {"model": "tiny", "prompt": [5, 6, 7], "max_tokens": 100, "temperature": 0, "cache_prompt": False}
    long_done = threading.Event()
    long_result = {}

    def long_stream():
        try:
            long_result["r"] = stream_json(base, "/v1/completions", body)
        finally:
            long_done.set()

    steps_before = counters(server)[0]
    t = threading.Thread(target=long_stream)
    t.start()
    with concurrent.futures.ThreadPoolExecutor(3) as pool:
        list(pool.map(lambda i: complete(base, 4 + i), range(3), timeout=120))
    c.check(wait_until(lambda: counters(server)[0] >= steps_before + 3 or long_done.is_set(), 60),
            "the long stream decodes")
    late_sent = time.monotonic()
    late = complete(base, 7)
    late_wait = time.monotonic() - late_sent
    still_decoding = not long_done.is_set()
    t.join(600)
    print("a late request among a decoding stream: answered in %.2f s, the stream still decoding then: %s, "
          "the stream: %s tokens" % (late_wait, still_decoding, long_result.get("r", (None, None))[1]))
    c.check(still_decoding, "the long stream had ended before the late request was answered: no sequence decoded")
    c.check(late[1] == 1, "the late request generated its token")
    c.check(late_wait < 8, "the late request waited %.1f s: the window held a step while a sequence decoded" % late_wait)
    server.stop()
finally:
    server.kill()

# The window runs from the latest request: 4 requests 1.5 s apart with a 4 s window share one
# step, though the 4th comes 4.5 s after the first (a window counted from the first alone would
# have run the first 3 at 4 s, and the 4th after them).
server = Server(vkformer, ["--model", gguf_path, "--ctx", "128", "--parallel", "4", "--batch-tokens", "64",
                           "--batch-window", "4000", "--model-name", "tiny"])
try:
    before = counters(server)
    start = time.monotonic()

    def spaced(i):
        time.sleep(max(0.0, start + 1.5 * i - time.monotonic()))
        return complete(server.base, i)

    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        spaced_replies = list(pool.map(spaced, range(4), timeout=120))
    steps, decode_rows, prompt_rows = (a - b for a, b in zip(counters(server), before))
    print("4 requests 1.5 s apart, a 4 s window: %d steps, %d prompt rows, %d decode rows"
          % (steps, prompt_rows, decode_rows))
    c.check(all(n == 1 for _, n in spaced_replies), "each spaced request generated its one token")
    c.check(steps == 1 and prompt_rows == 24, "the 4 spaced prompts ran in %d steps (%d prompt rows), not one"
            % (steps, prompt_rows))
    server.stop()
finally:
    server.kill()
c.finish()
