#!/usr/bin/env python3
"""Throughput of an OpenAI-compatible server under concurrent streams (issue 24): aggregate
generated tokens per second at 1 stream and at N concurrent streams, and time to first token
(p50/p95) under that load. Works against `vkformer serve` (started here with --vkformer) or any
server already listening (--url, e.g. llama.cpp's llama-server --parallel 8). Greedy, streamed, a fixed
max_tokens and prompts that ask for long answers; token counts come from the server's usage
report. Standard library only.

  bench/serve_throughput.py --vkformer build/tools/vkformer --model SmolLM2.gguf --streams 8
  bench/serve_throughput.py --url http://127.0.0.1:8080 --model-name X --streams 8
"""
import argparse
import concurrent.futures
import json
import re
import statistics
import subprocess
import sys
import threading
import time
import urllib.request

PROMPTS = ["Write a long story about a %s who travels the world." % w for w in
           ["baker", "sailor", "robot", "cat", "painter", "farmer", "pilot", "teacher", "doctor", "poet",
            "miner", "clown", "diver", "judge", "smith", "monk"]]


def stream_one(url, model, prompt, max_tokens):
    """(time to first token, seconds, completion tokens) of one streamed chat request."""
    body = {"model": model, "messages": [{"role": "user", "content": prompt}], "max_tokens": max_tokens,
            "temperature": 0, "stream": True, "stream_options": {"include_usage": True}}
    req = urllib.request.Request(url + "/v1/chat/completions", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    t0 = time.monotonic()
    ttft, tokens = None, 0
    with urllib.request.urlopen(req, timeout=1800) as r:
        for raw in r:
            line = raw.decode("utf-8", "replace").strip()
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            ev = json.loads(line[6:])
            if ev.get("usage"):
                tokens = ev["usage"]["completion_tokens"]
            for ch in ev.get("choices", []):
                if ttft is None and ch.get("delta", {}).get("content"):
                    ttft = time.monotonic() - t0
    return ttft, time.monotonic() - t0, tokens


def run(url, model, streams, requests, max_tokens):
    t0 = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(streams) as pool:
        results = list(pool.map(lambda i: stream_one(url, model, PROMPTS[i % len(PROMPTS)], max_tokens), range(requests)))
    wall = time.monotonic() - t0
    tokens = sum(r[2] for r in results)
    ttfts = sorted(r[0] for r in results if r[0] is not None)
    p = lambda q: ttfts[min(len(ttfts) - 1, int(round(q * (len(ttfts) - 1))))]
    return {"streams": streams, "requests": requests, "tokens": tokens, "seconds": round(wall, 2),
            "tokens_per_second": round(tokens / wall, 2), "ttft_p50_s": round(p(0.5), 3), "ttft_p95_s": round(p(0.95), 3)}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--vkformer", help="start this vkformer binary's server")
    ap.add_argument("--model", help="GGUF file for --vkformer")
    ap.add_argument("--url", help="an already running server")
    ap.add_argument("--model-name", default="bench")
    ap.add_argument("--streams", type=int, default=8)
    ap.add_argument("--requests-per-stream", type=int, default=2)
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--ctx", type=int, default=512)
    ap.add_argument("--json", help="write the results here too")
    a = ap.parse_args()
    proc = None
    url = a.url
    if a.vkformer:
        cmd = [a.vkformer, "serve", "--model", a.model, "--port", "0", "--parallel", str(a.streams), "--ctx", str(a.ctx),
               "--model-name", a.model_name]
        proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True)
        for line in proc.stderr:
            sys.stderr.write(line)
            m = re.search(r"listening on (http://\S+:\d+)", line)
            if m:
                url = m.group(1)
                break
        threading.Thread(target=lambda: [None for _ in proc.stderr], daemon=True).start()
    try:
        stream_one(url, a.model_name, "Hi", 4)  # warm-up: pipelines compiled, caches touched
        one = run(url, a.model_name, 1, a.requests_per_stream, a.max_tokens)
        many = run(url, a.model_name, a.streams, a.streams * a.requests_per_stream, a.max_tokens)
        out = {"url": url, "max_tokens": a.max_tokens, "single": one, "concurrent": many,
               "speedup": round(many["tokens_per_second"] / one["tokens_per_second"], 2)}
        print(json.dumps(out, indent=1))
        if a.json:
            with open(a.json, "w") as f:
                json.dump(out, f, indent=1)
    finally:
        if proc:
            proc.terminate()
            proc.wait(60)


if __name__ == "__main__":
    main()
