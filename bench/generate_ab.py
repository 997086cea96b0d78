#!/usr/bin/env python3
"""`vkformer generate` tokens/s of two builds side by side: alternating rounds (the order of the
builds flips each round), every model x sampling option set in each round, the generation rate
read from the tool's stderr line. Prints a table of medians and writes every run as JSON.

    bench/generate_ab.py --a /tmp/vkformer_before --b build/tools/vkformer \
        --model $(scripts/fetch_smollm2.sh) --model $(scripts/fetch_gemma3_270m.sh) \
        --sampling "" --sampling "--temperature 1" --rounds 3 -n 32 --json out.json
"""
import argparse
import json
import os
import re
import resource
import shlex
import statistics
import subprocess
import sys

RATE = re.compile(r"generation (\d+) tokens in ([0-9.]+) s \(([0-9.]+) tokens/s\)")


def run(binary, model, sampling, n, ctx, prompt):
    cmd = [binary, "generate", "--model", model, "-p", prompt, "-n", str(n), "-c", str(ctx)] + shlex.split(sampling)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    r = subprocess.run(cmd, capture_output=True, text=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    m = RATE.search(r.stderr)
    if r.returncode != 0 or not m:
        sys.exit(f"{' '.join(cmd)} failed ({r.returncode}):\n{r.stderr[-2000:]}")
    # CPU seconds of the whole process (load included; lavapipe's threads too): what a build costs,
    # less swayed by other processes than the wall clock. Two -n values give the cost per token.
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"tokens": int(m.group(1)), "seconds": float(m.group(2)), "tokens_per_second": float(m.group(3)),
            "cpu_seconds": cpu, "text": r.stdout}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--a", required=True, help="the first vkformer binary (e.g. before)")
    ap.add_argument("--b", required=True, help="the second vkformer binary (e.g. after)")
    ap.add_argument("--model", action="append", required=True)
    ap.add_argument("--sampling", action="append", required=True,
                    help='generate options of one set, e.g. "" (greedy) or "--temperature 1"')
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("-n", type=int, default=32)
    ap.add_argument("--ctx", type=int, default=256)
    ap.add_argument("--prompt", default="The history of the river")
    ap.add_argument("--json")
    args = ap.parse_args()

    runs = []
    for rnd in range(args.rounds):
        order = [("a", args.a), ("b", args.b)] if rnd % 2 == 0 else [("b", args.b), ("a", args.a)]
        for model in args.model:
            for sampling in args.sampling:
                for name, binary in order:
                    r = run(binary, model, sampling, args.n, args.ctx, args.prompt)
                    r.update(round=rnd, build=name, model=os.path.basename(model), sampling=sampling,
                             load=os.getloadavg()[0])
                    runs.append(r)
                    print(f"round {rnd} {name} {r['model']} [{sampling}] {r['tokens_per_second']:.2f} t/s, "
                          f"{r['cpu_seconds']:.2f} s CPU (load {r['load']:.1f})", file=sys.stderr, flush=True)

    print("| model | sampling | a t/s (median) | b t/s (median) | b / a | same text |")
    print("|---|---|---|---|---|---|")
    for model in args.model:
        for sampling in args.sampling:
            sel = [r for r in runs if r["model"] == os.path.basename(model) and r["sampling"] == sampling]
            a = [r["tokens_per_second"] for r in sel if r["build"] == "a"]
            b = [r["tokens_per_second"] for r in sel if r["build"] == "b"]
            same = len({r["text"] for r in sel}) == 1
            print(f"| {os.path.basename(model)} | `{sampling or 'greedy'}` | {statistics.median(a):.2f} | "
                  f"{statistics.median(b):.2f} | {statistics.median(b) / statistics.median(a):.2f}x | {same} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"a": args.a, "b": args.b, "n": args.n, "ctx": args.ctx, "prompt": args.prompt, "runs": runs},
                      f, indent=1)


if __name__ == "__main__":
    main()
