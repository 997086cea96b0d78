#!/usr/bin/env python3
"""An OpenAI-compatible server under the loads users bring (issues 24 and 36), greedy streamed
chat requests, time to first token (TTFT) measured by the client:

  lone        one short request at a time: the TTFT the others are compared with
  burst       N short requests released together: TTFT p50/p95 (and / lone)
  late        N long streams decoding, then short requests arriving one at a time among them:
              their TTFT (and / lone); each notes whether the N were all still decoding
  prefix      a ~600-token system prompt never seen before (cold), then the same system prompt
              with another question (warm): TTFT of each (prefix caching: warm / cold)
  throughput  aggregate generated tokens/s at 1 stream and at N concurrent streams, and the ratio

Against `vkformer serve` (started here with --vkformer) and llama.cpp's llama-server (started
here with --llama-server, or any server already listening: --url) in ONE run: the servers are
started once with the same slots and context per slot, and take the rounds in turns (the first
server of a round alternates), so both see the same machine load; the load average is recorded
before and after each server's turn. Token counts come from the servers' usage reports; the
servers keep their default prompt caching (both reuse a slot's cached prefix). Standard library only.

  bench/serve_throughput.py --vkformer build/tools/vkformer --llama-server /path/llama-server \\
      --model SmolLM2-135M-Instruct.Q4_1.gguf --rounds 3 --json OUT.json
  bench/serve_throughput.py --url http://127.0.0.1:8080 --model-name X --modes throughput
"""
import argparse
import concurrent.futures
import json
import os
import random
import re
import socket
import statistics
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

STORIES = ["Write a long story about a %s who travels the world." % w for w in
           ["baker", "sailor", "robot", "cat", "painter", "farmer", "pilot", "teacher", "doctor", "poet",
            "miner", "clown", "diver", "judge", "smith", "monk"]]
QUESTIONS = ["What is the capital of %s?" % w for w in
             ["France", "Peru", "Japan", "Kenya", "Canada", "Norway", "Chile", "Egypt", "India", "Spain"]]
WORDS = ("river stone garden market winter lantern harbor meadow copper violin thunder orchard "
         "compass feather glacier mirror candle velvet canyon saddle harvest beacon marble quarry "
         "ribbon falcon tavern lighthouse willow cellar").split()


def stream_one(url, model, messages, max_tokens, on_first=None):
    """(TTFT, seconds, completion tokens, end time) of one streamed chat request; on_first() is
    called when its first text comes."""
    body = {"model": model, "messages": messages, "max_tokens": max_tokens, "temperature": 0, "stream": True,
            "stream_options": {"include_usage": True}}
    req = urllib.request.Request(url + "/v1/chat/completions", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    t0 = time.monotonic()
    ttft, tokens, pieces = None, None, 0
    with urllib.request.urlopen(req, timeout=1800) as r:
        for raw in r:
            line = raw.decode("utf-8", "replace").strip()
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            ev = json.loads(line[6:])
            if ev.get("usage"):
                tokens = ev["usage"]["completion_tokens"]
            for ch in ev.get("choices", []):
                if ch.get("delta", {}).get("content"):
                    pieces += 1
                    if ttft is None:
                        ttft = time.monotonic() - t0
                        if on_first:
                            on_first()
    end = time.monotonic()
    return ttft, end - t0, tokens if tokens is not None else pieces, end


def user(text):
    return [{"role": "user", "content": text}]


_asked = [0]


def story(i):
    """A request nobody sent before: a number first (so that it shares only the chat template's
    first tokens with earlier ones: each request computes its whole message, ~20 tokens), then
    one of the stories."""
    _asked[0] += 1
    return user("Story %d. %s" % (_asked[0], STORIES[i % len(STORIES)]))


def pct(values, q):
    v = sorted(x for x in values if x is not None)
    return v[min(len(v) - 1, int(round(q * (len(v) - 1))))] if v else None


def mode_lone(url, model, a, rnd):
    ttfts = [stream_one(url, model, story(rnd * 3 + i), 8)[0] for i in range(a.lone)]
    return {"requests": a.lone, "ttft_s": [round(t, 3) for t in ttfts], "ttft_p50_s": round(statistics.median(ttfts), 3)}


def mode_burst(url, model, a, rnd):
    barrier = threading.Barrier(a.streams)

    messages = [story(rnd + i) for i in range(a.streams)]

    def one(i):
        barrier.wait()
        return stream_one(url, model, messages[i], 16)

    with concurrent.futures.ThreadPoolExecutor(a.streams) as pool:
        res = list(pool.map(one, range(a.streams)))
    ttfts = [r[0] for r in res]
    return {"requests": a.streams, "ttft_s": [round(t, 3) for t in ttfts], "ttft_p50_s": round(pct(ttfts, 0.5), 3),
            "ttft_p95_s": round(pct(ttfts, 0.95), 3)}


def mode_late(url, model, a, rnd):
    started = [threading.Event() for _ in range(a.streams)]
    ends = [None] * a.streams
    messages = [story(rnd + i) for i in range(a.streams)]
    late_messages = []
    for j in range(a.late):
        _asked[0] += 1
        late_messages.append(user("Question %d. %s" % (_asked[0], QUESTIONS[(rnd + j) % len(QUESTIONS)])))

    def long_stream(i):
        try:
            ends[i] = stream_one(url, model, messages[i], a.late_tokens, on_first=started[i].set)[3]
        finally:
            started[i].set()

    with concurrent.futures.ThreadPoolExecutor(a.streams) as pool:
        futures = [pool.submit(long_stream, i) for i in range(a.streams)]
        for e in started:
            e.wait(1800)
        late = []
        for j in range(a.late):
            sent = time.monotonic()
            ttft, _, _, end = stream_one(url, model, late_messages[j], 4)
            late.append((ttft, sent, end))
        for f in futures:
            f.result()
    first_end = min(ends)
    ttfts = [t for t, _, _ in late]
    return {"decoding_streams": a.streams, "requests": a.late, "ttft_s": [round(t, 3) for t in ttfts],
            "ttft_p50_s": round(statistics.median(ttfts), 3),
            "among_all_decoding": [end <= first_end for _, _, end in late]}


def system_prompt(seed, words):
    rng = random.Random(seed)
    text = " ".join(rng.choice(WORDS) for _ in range(words))
    return "You are a careful assistant. Background notes follow. " + text


def mode_prefix(url, model, a, rnd, server_index):
    out = {"pairs": []}
    for k in range(a.prefix_pairs):
        # A system prompt no server has seen (seeded by round, server and pair): the cold request
        # computes it all; the warm one shares it and differs in the question.
        system = system_prompt(1000 * rnd + 100 * server_index + k, a.prefix_words)
        cold = stream_one(url, model, [{"role": "system", "content": system},
                                       {"role": "user", "content": QUESTIONS[k % len(QUESTIONS)]}], 8)[0]
        warm = stream_one(url, model, [{"role": "system", "content": system},
                                       {"role": "user", "content": QUESTIONS[(k + 5) % len(QUESTIONS)]}], 8)[0]
        out["pairs"].append({"cold_ttft_s": round(cold, 3), "warm_ttft_s": round(warm, 3)})
    out["cold_ttft_p50_s"] = round(statistics.median(p["cold_ttft_s"] for p in out["pairs"]), 3)
    out["warm_ttft_p50_s"] = round(statistics.median(p["warm_ttft_s"] for p in out["pairs"]), 3)
    out["warm_over_cold"] = round(out["warm_ttft_p50_s"] / out["cold_ttft_p50_s"], 3)
    return out


def throughput_run(url, model, streams, requests, max_tokens, rnd):
    t0 = time.monotonic()
    messages = [story(rnd + i) for i in range(requests)]
    with concurrent.futures.ThreadPoolExecutor(streams) as pool:
        res = list(pool.map(lambda i: stream_one(url, model, messages[i], max_tokens), range(requests)))
    wall = time.monotonic() - t0
    tokens = sum(r[2] for r in res)
    ttfts = [r[0] for r in res]
    return {"streams": streams, "requests": requests, "tokens": tokens, "seconds": round(wall, 2),
            "tokens_per_second": round(tokens / wall, 2), "ttft_p50_s": round(pct(ttfts, 0.5), 3),
            "ttft_p95_s": round(pct(ttfts, 0.95), 3)}


def mode_throughput(url, model, a, rnd):
    one = throughput_run(url, model, 1, a.requests_per_stream, a.max_tokens, rnd)
    many = throughput_run(url, model, a.streams, a.streams * a.requests_per_stream, a.max_tokens, rnd)
    return {"max_tokens": a.max_tokens, "single": one, "concurrent": many,
            "speedup": round(many["tokens_per_second"] / one["tokens_per_second"], 2)}


def stage_totals(url):
    """vkformer's /metrics: {stage: (seconds, requests)} of vkformer_request_stage_seconds, or None
    (another server)."""
    try:
        with urllib.request.urlopen(url + "/metrics", timeout=30) as r:
            text = r.read().decode()
    except (urllib.error.URLError, ConnectionError, socket.timeout):
        return None
    out = {}
    for m in re.finditer(r'^vkformer_request_stage_seconds_(sum|count)\{stage="(\w+)"\} (\S+)$', text, re.M):
        sums = out.setdefault(m.group(2), [0.0, 0.0])
        sums[0 if m.group(1) == "sum" else 1] = float(m.group(3))
    if not out:
        return None
    # The scheduler's counters: steps, their rows by kind and their seconds.
    for name, key in (("vkformer_scheduler_steps_total", "steps"), ("vkformer_scheduler_step_seconds_total", "step_seconds"),
                      ('vkformer_scheduler_rows_total{kind="decode"}', "decode_rows"),
                      ('vkformer_scheduler_rows_total{kind="prompt"}', "prompt_rows")):
        m = re.search("^" + re.escape(name) + r" (\S+)$", text, re.M)
        if m:
            out["scheduler"] = dict(out.get("scheduler", {}), **{key: float(m.group(1))})
    return out


def stage_means(before, after):
    """Mean seconds per stage of the requests answered between two stage_totals()."""
    if not before or not after:
        return None
    means = {}
    for stage, v in after.items():
        if stage == "scheduler":
            continue
        s1, n1 = v
        s0, n0 = before.get(stage, (0.0, 0.0))
        if n1 > n0:
            means[stage] = round((s1 - s0) / (n1 - n0), 3)
    return means


def scheduler_counts(before, after):
    """What vkformer's scheduler ran between two stage_totals(): steps, decode and prompt rows,
    step seconds."""
    if not before or not after or "scheduler" not in after:
        return None
    b = before.get("scheduler", {})
    return {k: round(v - b.get(k, 0.0), 3) for k, v in after["scheduler"].items()}


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def wait_health(url, proc, seconds=600):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError("the server exited with %s" % proc.returncode)
        try:
            with urllib.request.urlopen(url + "/health", timeout=5) as r:
                if r.status == 200:
                    return
        except (urllib.error.URLError, ConnectionError, socket.timeout):
            pass
        time.sleep(0.2)
    raise RuntimeError(url + " did not become healthy")


def start(cmd, url, log):
    sys.stderr.write("$ " + " ".join(cmd) + "\n")
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=open(log, "w"))
    wait_health(url, proc)
    return proc


def loadavg():
    return " ".join("%.2f" % x for x in os.getloadavg())


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--vkformer", help="start this vkformer binary's server")
    ap.add_argument("--vkformer-args", default="", help="more options for vkformer serve (e.g. '--batch-tokens 128')")
    ap.add_argument("--llama-server", help="start this llama-server binary too")
    ap.add_argument("--llama-server-args", default="",
                    help="more options for llama-server (e.g. '--no-repack' where its AMX kernels fault)")
    ap.add_argument("--model", help="GGUF file for the servers started here")
    ap.add_argument("--url", action="append", default=[], help="an already running server (repeatable)")
    ap.add_argument("--model-name", default="bench")
    ap.add_argument("--modes", default="lone,burst,late,prefix,throughput")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--streams", type=int, default=8, help="N: burst size, decoding streams, concurrent streams")
    ap.add_argument("--parallel", type=int, default=0, help="slots of the servers started here (default N + 2)")
    ap.add_argument("--ctx", type=int, default=1024, help="tokens per slot")
    ap.add_argument("--lone", type=int, default=3, help="lone requests per round")
    ap.add_argument("--late", type=int, default=3, help="late arrivals per round")
    ap.add_argument("--late-tokens", type=int, default=64, help="max_tokens of the decoding streams in 'late'")
    ap.add_argument("--prefix-words", type=int, default=330, help="words of the system prompt (~600 tokens)")
    ap.add_argument("--prefix-pairs", type=int, default=2)
    ap.add_argument("--requests-per-stream", type=int, default=1)
    ap.add_argument("--max-tokens", type=int, default=48, help="max_tokens in 'throughput'")
    ap.add_argument("--json", help="write the results here too")
    a = ap.parse_args()
    modes = a.modes.split(",")
    parallel = a.parallel or a.streams + 2
    servers, procs = [], []
    try:
        if a.vkformer:
            port = free_port()
            url = "http://127.0.0.1:%d" % port
            cmd = [a.vkformer, "serve", "--model", a.model, "--port", str(port), "--parallel", str(parallel),
                   "--ctx", str(a.ctx), "--model-name", a.model_name] + a.vkformer_args.split()
            procs.append(start(cmd, url, "/tmp/serve_throughput_vkformer.log"))
            servers.append(("vkformer", url, " ".join(cmd)))
        if a.llama_server:
            port = free_port()
            url = "http://127.0.0.1:%d" % port
            # -c is the whole context, split among the slots: ctx per slot as vkformer's --ctx.
            cmd = [a.llama_server, "-m", a.model, "--parallel", str(parallel), "-c", str(a.ctx * parallel),
                   "-t", "2", "--host", "127.0.0.1", "--port", str(port), "--alias", a.model_name] + a.llama_server_args.split()
            procs.append(start(cmd, url, "/tmp/serve_throughput_llama_server.log"))
            servers.append(("llama-server", url, " ".join(cmd)))
        for i, url in enumerate(a.url):
            servers.append(("url%d" % i, url, url))
        for name, url, _ in servers:
            # Warm-up: pipelines compiled, and every slot has served a chat request, so that each
            # holds the chat template's first tokens as a server that has been up a while does.
            with concurrent.futures.ThreadPoolExecutor(parallel) as pool:
                list(pool.map(lambda i: stream_one(url, a.model_name, user("Hi number %d" % i), 4), range(parallel)))
        out = {"command": " ".join(sys.argv), "servers": {n: c for n, _, c in servers}, "parallel": parallel,
               "ctx": a.ctx, "streams": a.streams, "rounds": []}
        for rnd in range(a.rounds):
            order = servers if rnd % 2 == 0 else servers[::-1]
            round_out = {}
            for name, url, _ in order:
                index = [n for n, _, _ in servers].index(name)
                r = {"loadavg_before": loadavg()}
                for m in modes:
                    t0 = time.monotonic()
                    stages_before = stage_totals(url)
                    if m == "prefix":
                        r[m] = mode_prefix(url, a.model_name, a, rnd, index)
                    else:
                        r[m] = {"lone": mode_lone, "burst": mode_burst, "late": mode_late,
                                "throughput": mode_throughput}[m](url, a.model_name, a, rnd)
                    stages_after = stage_totals(url)
                    stages = stage_means(stages_before, stages_after)
                    if stages:
                        r[m]["stage_means_s"] = stages  # where vkformer's requests spent their time
                        r[m]["scheduler"] = scheduler_counts(stages_before, stages_after)
                    sys.stderr.write("round %d %s %s: %.1f s\n" % (rnd + 1, name, m, time.monotonic() - t0))
                r["loadavg_after"] = loadavg()
                if "lone" in r and "burst" in r:
                    r["burst"]["p50_over_lone"] = round(r["burst"]["ttft_p50_s"] / r["lone"]["ttft_p50_s"], 2)
                if "lone" in r and "late" in r:
                    r["late"]["p50_over_lone"] = round(r["late"]["ttft_p50_s"] / r["lone"]["ttft_p50_s"], 2)
                round_out[name] = r
            out["rounds"].append(round_out)
            print(json.dumps(round_out, indent=1), flush=True)
        if a.json:
            with open(a.json, "w") as f:
                json.dump(out, f, indent=1)
    finally:
        for p in procs:
            p.terminate()
            try:
                p.wait(60)
            except subprocess.TimeoutExpired:
                p.kill()


if __name__ == "__main__":
    main()
