#!/usr/bin/env python3
"""`vkformer perplexity` beside llama.cpp's `llama-perplexity` on the same models, text and contexts.

Issue 37's acceptance: the two final estimates within 0.5% of each other. For each model and
each --ctx, this build's `vkformer perplexity --json` and `llama-perplexity -f TEXT -c N` (llama.cpp's
CPU backend, --threads) run one after the other; the table gives both estimates with their
errors, the relative difference, the chunks and each program's time. --json writes every figure,
the running estimates of both included.

    python3 bench/perplexity_vs_llama.py \
        --model $(scripts/fetch_smollm2.sh) --model $(scripts/fetch_gemma3_270m.sh) \
        --text $(scripts/fetch_wiki_text.sh) --ctx 512 --ctx 2048 \
        --llama-perplexity /work/peers/llama.cpp-build-cpu/bin/llama-perplexity \
        --json bench/results/perplexity-vs-llama-lavapipe-DATE.json

--chunks K (once, or once per --model in order) scores the first K chunks only, in both programs.
vkformer runs with VKFORMER_TUNING=static on --device (default the first device).
"""
import argparse
import datetime
import json
import os
import re
import subprocess
import sys
import time


def run_vkformer(binary, model, text, ctx, chunks, device):
    cmd = [binary, "perplexity", "-m", model, "-f", text, "-c", str(ctx), "--json"]
    if chunks:
        cmd += ["--chunks", str(chunks)]
    if device:
        cmd += ["--device", device]
    env = dict(os.environ, VKFORMER_TUNING="static")
    t0 = time.monotonic()
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    wall = time.monotonic() - t0
    if r.returncode != 0:
        sys.exit(f"{' '.join(cmd)}: exit status {r.returncode}\n{r.stderr}")
    doc = json.loads(r.stdout)
    doc["wall_seconds"] = wall
    return doc


def run_llama(binary, model, text, ctx, chunks, threads, extra):
    cmd = [binary, "-m", model, "-f", text, "-c", str(ctx), "-t", str(threads), *extra]
    if chunks:
        cmd += ["--chunks", str(chunks)]
    t0 = time.monotonic()
    r = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.monotonic() - t0
    out = r.stdout + r.stderr
    final = re.search(r"Final estimate: PPL = ([0-9.]+) \+/- ([0-9.]+)", out)
    if r.returncode != 0 or not final:
        sys.exit(f"{' '.join(cmd)}: exit status {r.returncode}, no final estimate\n{out[-3000:]}")
    over = re.search(r"calculating perplexity over (\d+) chunks", out)
    running = [float(v) for _, v in re.findall(r"\[(\d+)\]([0-9.]+),", out)]
    return {"ppl": float(final.group(1)), "ppl_error": float(final.group(2)),
            "chunks": int(over.group(1)) if over else None, "chunk_ppl": running, "wall_seconds": wall,
            "command": cmd}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", action="append", required=True, help="a GGUF file (repeatable)")
    ap.add_argument("--text", required=True, help="the text file (scripts/fetch_wiki_text.sh)")
    ap.add_argument("--ctx", action="append", type=int, required=True, help="tokens per chunk (repeatable)")
    ap.add_argument("--chunks", action="append", type=int, default=[],
                    help="first K chunks only: once for all models or once per --model (0: all)")
    ap.add_argument("--ours", default="build/tools/vkformer", help="this build's vkformer")
    ap.add_argument("--llama-perplexity", required=True, help="llama.cpp's llama-perplexity (CPU build)")
    ap.add_argument("--threads", type=int, default=2, help="llama-perplexity threads (default 2)")
    ap.add_argument("--llama-arg", action="append", default=None,
                    help="an argument for llama-perplexity (repeatable; default --no-repack: its repacked "
                         "AMX kernels die with SIGILL where the CPU lists AMX but the kernel does not grant it)")
    ap.add_argument("--device", default="", help="vkformer's --device")
    ap.add_argument("--json", default="", help="write every figure here")
    a = ap.parse_args()
    llama_args = ["--no-repack"] if a.llama_arg is None else a.llama_arg
    chunks = a.chunks or [0]
    if len(chunks) not in (1, len(a.model)):
        sys.exit("--chunks: give it once, or once per --model")
    chunks = chunks * len(a.model) if len(chunks) == 1 else chunks

    rows = []
    for model, k in zip(a.model, chunks):
        for ctx in a.ctx:
            print(f"{os.path.basename(model)} ctx {ctx}: vkformer ...", file=sys.stderr, flush=True)
            ours = run_vkformer(a.ours, model, a.text, ctx, k, a.device)
            print(f"{os.path.basename(model)} ctx {ctx}: llama-perplexity ...", file=sys.stderr, flush=True)
            theirs = run_llama(a.llama_perplexity, model, a.text, ctx, k, a.threads, llama_args)
            diff = ours["ppl"] / theirs["ppl"] - 1
            rows.append({"model": os.path.basename(model), "ctx": ctx, "chunks": ours["chunks"],
                         "vkformer": ours, "llama_perplexity": theirs, "relative_difference": diff})
            print(f"  vkformer {ours['ppl']:.4f} ± {ours['ppl_error']:.4f}, llama-perplexity "
                  f"{theirs['ppl']:.4f} ± {theirs['ppl_error']:.4f}: {100 * diff:+.3f}%", file=sys.stderr, flush=True)

    print("| model | ctx | chunks | vkformer PPL | llama-perplexity PPL | difference | vkformer s | llama.cpp s |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        o, t = r["vkformer"], r["llama_perplexity"]
        print(f"| {r['model']} | {r['ctx']} | {r['chunks']} | {o['ppl']:.4f} ± {o['ppl_error']:.4f} | "
              f"{t['ppl']:.4f} ± {t['ppl_error']:.4f} | {100 * r['relative_difference']:+.3f}% | "
              f"{o['wall_seconds']:.0f} | {t['wall_seconds']:.0f} |")
    worst = max(abs(r["relative_difference"]) for r in rows)
    print(f"\nlargest |difference| {100 * worst:.3f}% (issue 37 asks for at most 0.5%)")
    if a.json:
        doc = {"date": datetime.date.today().isoformat(), "text": a.text, "threads": a.threads, "rows": rows}
        with open(a.json, "w") as f:
            json.dump(doc, f, indent=1)
            f.write("\n")
    return 0 if worst <= 0.005 else 1


if __name__ == "__main__":
    sys.exit(main())
