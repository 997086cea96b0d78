"""Clients of `vkformer serve` that leave at random points (issue 36): while their prompt is read,
while their reply streams, or before a non-streamed reply. SmolLM2-135M-Instruct, so that a
prompt takes several steps (--batch-tokens 8) and a leaving client is noticed mid-prompt; the
first wave leaves a second after its headers came, so they certainly leave mid-prompt
(vkformer_cancelled_requests_total{stage="prompt"}), the others at random points (fixed seed).
Each one's slot is free again (vkformer_active_slots back to 0), and what it left in the slot's
cache is a valid prefix: later requests that share long prefixes with the abandoned prompts,
and so start from those caches, give the text the same request gives with cache_prompt false.
The waits poll /metrics.
Usage: disconnect_test.py VKFORMER REPO_ROOT"""
import json
import os
import random
import socket
import subprocess
import sys
import threading
import time
import urllib.request

from serve_harness import HOST, Checks, Server, deadline

vkformer, root = sys.argv[1:3]
gguf_path = subprocess.run([os.path.join(root, "scripts", "fetch_smollm2.sh")], check=True, capture_output=True,
                           text=True).stdout.strip().splitlines()[-1]
c = Checks()

WORDS = ("the river ran past a stone garden where a market stood in winter and every lantern in the harbor "
         "lit the meadow while a copper violin played thunder over the orchard and the compass pointed to "
         "a feather on a glacier beside a mirror a candle and a velvet canyon").split()


def document(seed, words):
    rng = random.Random(seed)
    return " ".join(rng.choice(WORDS) for _ in range(words))


def complete(base, prompt, max_tokens, cache=True):
    body = {"model": "smollm2", "prompt": prompt, "max_tokens": max_tokens, "temperature": 0, "cache_prompt": cache}
    req = urllib.request.Request(base + "/v1/completions", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=600) as r:
        reply = json.loads(r.read())
    return reply["choices"][0]["text"], reply["usage"]["prompt_tokens_details"]["cached_tokens"]


def leave_at(port, prompt, stream, events, delay):
    """Sends a greedy request by hand and closes the connection `delay` seconds after it sent
    it (not streamed) or after the headers came and `events` SSE events (streamed; 0: none).
    True if the reply had not ended when it left."""
    body = json.dumps({"model": "smollm2", "prompt": prompt, "max_tokens": 60, "temperature": 0,
                       "stream": stream}).encode()
    s = socket.create_connection((HOST, port), timeout=300)
    try:
        s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  b"Content-Length: %d\r\n\r\n" % len(body) + body)
        if not stream:
            time.sleep(delay)
            s.settimeout(0)
            try:
                s.recv(1)
                return False  # answered (or closed) before it left
            except BlockingIOError:
                return True  # nothing answered yet: it leaves mid-request
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = s.recv(4096)
            if not chunk:
                return False
            data += chunk
        time.sleep(delay)
        seen = data.count(b"data: ")
        while seen < events:
            chunk = s.recv(4096)
            if not chunk or b"[DONE]" in chunk:
                return False
            data += chunk
            seen += chunk.count(b"data: ")
        return b"[DONE]" not in data
    finally:
        s.close()


def metric(server, name):
    return int(server.metric_value(name))


rng = random.Random(3636)
docs = [document(seed, 120) for seed in (1, 2, 3)]
# Abandoned prompts: the first 40 to 90 words of one of three documents, so that they share
# prefixes with one another and with the later requests.
abandoned = [" ".join(docs[i % 3].split()[:rng.randrange(40, 91)]) for i in range(20)]

server = Server(vkformer, ["--model", gguf_path, "--ctx", "256", "--parallel", "4", "--batch-tokens", "8",
                           "--model-name", "smollm2"])
try:
    base = server.base
    # Afterwards: prompts that share 25 to 70 words with the abandoned ones, then ask something.
    later = [" ".join(docs[i % 3].split()[:25 + (i * 11) % 46]) + " Question %d: what comes next?" % i
             for i in range(9)]
    ref = [complete(base, p, 8, cache=False)[0] for p in later]

    left = [0]
    plan = []  # (stream, events, delay) per abandoned prompt
    for i in range(len(abandoned)):
        if i < 4:
            # Wave 1: streams that leave 1 s after their headers came, before any text: their 4
            # prompts of 50 to 110 tokens take dozens of steps of 8 tokens, so they are mid-prompt.
            # The 1 s is the point of leaving, not a wait for something (issue 40): load only
            # makes the prompts longer, so safer; a device fast enough to read all four prompts
            # in 1 s would fail stages["prompt"] >= 1 below.
            plan.append((True, 0, 1.0))
        else:
            # The other waves leave at random points (after 0-4 events, or 0.05-2 s after sending
            # when not streamed): nothing below depends on where each one left.
            stream = i % 4 != 3
            plan.append((stream, rng.randrange(0, 5), 0 if stream else rng.uniform(0.05, 2.0)))

    def client(i):
        if leave_at(server.port, abandoned[i], *plan[i]):
            left[0] += 1

    for first, count in ((0, 4), (4, 8), (12, 8)):  # waves of clients, each leaving at its point
        threads = [threading.Thread(target=client, args=(i,)) for i in range(first, first + count)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(300)
        alive = deadline(300)
        while alive() and metric(server, "vkformer_active_slots") != 0:
            time.sleep(0.05)
        c.check(metric(server, "vkformer_active_slots") == 0,
                "after clients %d-%d left: %d slots still busy" % (first, first + count - 1,
                                                                   metric(server, "vkformer_active_slots")))
    stages = {s: metric(server, 'vkformer_cancelled_requests_total{stage="%s"}' % s)
              for s in ("queue", "prompt", "generation")}
    print("%d of %d clients left before their reply ended; cancelled while %s" % (left[0], len(abandoned), stages))
    c.check(stages["prompt"] >= 1, "no client was noticed leaving mid-prompt: %s" % stages)
    c.check(sum(stages.values()) == metric(server, "vkformer_client_disconnects_total") + stages["queue"],
            "cancellations %s against %d disconnects" % (stages, metric(server, "vkformer_client_disconnects_total")))

    got = [complete(base, p, 8) for p in later]
    for i in range(len(later)):
        c.check(got[i][0] == ref[i], "request %d after the disconnects (%d cached tokens): %r, without the cache %r"
                % (i, got[i][1], got[i][0], ref[i]))
    print("cached tokens of the later requests: %s" % [g[1] for g in got])
    c.check(sum(g[1] for g in got) >= 100, "only %d tokens came from slots' caches" % sum(g[1] for g in got))
    c.check(server.health(), "health at the end")
    server.stop()
finally:
    server.kill()
c.finish()
