#!/usr/bin/env python3
"""KV cache types side by side (issue 37): f16 against q8_0 and q4_0 K/V on one model, one run.

Phases (--phase, repeatable; default all):
  bytes   KV bytes per token from the allocations (`vkformer perplexity --json`'s
          kv_bytes_per_token, which LanguageModel::kv_cache() reads from the caches' buffers)
  ppl     `vkformer perplexity` with each type on the same text and chunks, one after another
  greedy  `vkformer generate` greedy text with each type on the prompts of --prompts (one per
          line), compared with f16's
  speed   `vkformer bench --model` decoding at a filled cache (-d DEPTH, -n GEN) and a prompt at
          a context of PROMPT tokens (-p), the types in alternating rounds (f16, q8_0, f16, ...),
          so both see the same load on a shared machine

    python3 bench/kv_cache_types.py --model $(scripts/fetch_smollm2.sh) \
        --text $(scripts/fetch_wiki_text.sh) --ctx 512 --chunks 6 \
        --json bench/results/kv-cache-types-smollm2-lavapipe-DATE.json

The activations stay f32 (the CLI's); "f16" is --cache-type-k f16 --cache-type-v f16.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

TYPES = ["f16", "q8_0", "q4_0"]


def run(cmd):
    t0 = time.monotonic()
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"{' '.join(cmd)}: exit status {r.returncode}\n{r.stderr[-3000:]}")
    return r.stdout, r.stderr, time.monotonic() - t0


def kv(t):
    return ["--cache-type-k", t, "--cache-type-v", t]


def phase_ppl(a, out):
    rows = {}
    for t in a.types:
        cmd = [a.ours, "perplexity", "-m", a.model, "-f", a.text, "-c", str(a.ctx), "--json", *kv(t)]
        if a.chunks:
            cmd += ["--chunks", str(a.chunks)]
        stdout, _, wall = run(cmd)
        doc = json.loads(stdout)
        doc["wall_seconds"] = wall
        rows[t] = doc
        print(f"ppl {t}: {doc['ppl']:.4f} ± {doc['ppl_error']:.4f} ({doc['chunks']} chunks, "
              f"{doc['kv_bytes_per_token']} bytes per token, {wall:.0f} s)", flush=True)
    out["ppl"] = rows
    base = rows.get("f16")
    if base:
        for t, d in rows.items():
            d["vs_f16"] = d["ppl"] / base["ppl"] - 1
            d["bytes_vs_f16"] = d["kv_bytes_per_token"] / base["kv_bytes_per_token"]


def phase_greedy(a, out):
    prompts = [p for p in open(a.prompts, encoding="utf-8").read().splitlines() if p.strip()]
    rows = []
    for p in prompts:
        texts = {}
        for t in a.types:
            stdout, _, _ = run([a.ours, "generate", "-m", a.model, "--prompt", p, "--chat", "-n", str(a.greedy_tokens),
                                "-c", "512", *kv(t)])
            texts[t] = stdout
        rows.append({"prompt": p, "texts": texts, "equal_to_f16": {t: texts[t] == texts["f16"] for t in texts}})
        print(f"greedy {p[:40]!r}: " + ", ".join(f"{t} {'=' if texts[t] == texts['f16'] else '≠'}" for t in texts),
              flush=True)
    out["greedy"] = rows


def bench_once(a, t, extra):
    stdout, _, _ = run([a.ours, "bench", "--model", a.model, "-r", str(a.repeats), "--json", a.scratch, *extra, *kv(t)])
    return json.load(open(a.scratch))


def phase_speed(a, out):
    tests = {"decode": ["-p", "0", "-n", str(a.gen), "-d", str(a.depth)],
             "prompt": ["-p", str(a.prompt), "-n", "0"]}
    res = {name: {t: [] for t in a.speed_types} for name in tests}
    for r in range(a.rounds):
        for name, extra in tests.items():
            for t in (a.speed_types if r % 2 == 0 else list(reversed(a.speed_types))):
                doc = bench_once(a, t, extra)
                res[name][t] += doc["llm"][0]["samples_ts"]
                print(f"speed round {r + 1} {name} {t}: {doc['llm'][0]['avg_ts']:.2f} t/s", flush=True)
    summary = {}
    for name in tests:
        summary[name] = {t: {"median_ts": statistics.median(v), "samples_ts": v} for t, v in res[name].items()}
        base = summary[name]["f16"]["median_ts"]
        for t in summary[name]:
            summary[name][t]["vs_f16"] = summary[name][t]["median_ts"] / base
    out["speed"] = {"depth": a.depth, "gen": a.gen, "prompt": a.prompt, "rounds": a.rounds, "repeats": a.repeats,
                    "results": summary}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True)
    ap.add_argument("--text", help="the text for ppl (scripts/fetch_wiki_text.sh)")
    ap.add_argument("--ctx", type=int, default=512)
    ap.add_argument("--chunks", type=int, default=0)
    ap.add_argument("--prompts", default="bench/kv_cache_prompts.txt", help="greedy: one chat prompt a line")
    ap.add_argument("--greedy-tokens", type=int, default=48)
    ap.add_argument("--depth", type=int, default=4096, help="speed: tokens in the cache before decoding")
    ap.add_argument("--gen", type=int, default=16, help="speed: decoded tokens timed")
    ap.add_argument("--prompt", type=int, default=2048, help="speed: prompt tokens timed")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--types", nargs="+", default=TYPES)
    ap.add_argument("--speed-types", nargs="+", default=["f16", "q8_0"])
    ap.add_argument("--phase", action="append", choices=["bytes", "ppl", "greedy", "speed"])
    ap.add_argument("--ours", default="build/tools/vkformer")
    ap.add_argument("--scratch", default="/tmp/kv_cache_types_bench.json")
    ap.add_argument("--json", default="")
    a = ap.parse_args()
    phases = a.phase or ["ppl", "greedy", "speed"]
    out = {"model": a.model, "text": a.text, "ctx": a.ctx, "chunks": a.chunks,
           "vkformer": subprocess.run([a.ours, "--version"], capture_output=True, text=True).stdout.strip(),
           "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "load_average": os.getloadavg()}
    for p in phases:
        {"bytes": phase_ppl, "ppl": phase_ppl, "greedy": phase_greedy, "speed": phase_speed}[p](a, out)
        if a.json:
            with open(a.json, "w") as f:
                json.dump(out, f, indent=2)
                f.write("\n")


if __name__ == "__main__":
    main()
