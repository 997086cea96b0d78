#!/usr/bin/env python3
"""`vkformer bench` with the tuning cache and with the static table, side by side: benchmark by
benchmark, the two runs alternate (static, tuned, static, tuned, ...) so both meet the machine's
same moments, and each keeps its best median over the rounds. Prints a Markdown table and exits
1 if a tuned result is slower than the static one by more than --tolerance.

  python3 bench/tuned_vs_static.py [--vkformer build/tools/vkformer] [--rounds 3] \\
      [--tolerance 0.05] [-- bench arguments, default --quick]

The cache is the one `vkformer tune` wrote ($VKFORMER_CACHE_DIR or the default folder).
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile


def run(vkformer, args, static, path):
    env = dict(os.environ)
    env["VKFORMER_TUNING"] = "static" if static else "cache"
    subprocess.run([vkformer, "bench", *args, "--json", path], env=env, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    doc = json.load(open(path))
    return {r["id"]: r["median_us"] for r in doc["devices"][0]["results"] if r["status"] == "ok"}, doc


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--vkformer", default="build/tools/vkformer")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--tolerance", type=float, default=0.05)
    p.add_argument("bench_args", nargs="*")
    a = p.parse_args()
    args = a.bench_args or ["--quick"]
    ids = subprocess.run([a.vkformer, "bench", *args, "--list"], capture_output=True, text=True,
                         check=True).stdout.split()
    best = {True: {}, False: {}}
    device = ""
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(a.rounds):
            for bid in ids:
                for static in (True, False):
                    one = [*args, "--filter", "^" + re.escape(bid) + "$", "--no-peak", "--budget", "1"]
                    res, doc = run(a.vkformer, one, static, os.path.join(tmp, "b.json"))
                    device = doc["devices"][0]["device"]["name"]
                    for k, v in res.items():
                        best[static][k] = min(v, best[static].get(k, float("inf")))
    state = subprocess.run([a.vkformer, "devices"], capture_output=True, text=True).stdout
    tuned_lines = [l.strip() for l in state.splitlines() if "tuning" in l or " = " in l]
    print(f"vkformer bench {' '.join(args)} on {device}: each benchmark run with the static table "
          f"and with the cache in turn, {a.rounds} rounds, best median of each\n")
    for l in tuned_lines:
        print(f"    {l}")
    print("\n| benchmark | static us | tuned us | tuned / static |\n|---|---|---|---|")
    worse = 0
    for k in ids:
        if k not in best[True] or k not in best[False]:
            print(f"| `{k}` | - | - | not measured |")
            continue
        s, t = best[True][k], best[False][k]
        flag = ""
        if t > s * (1 + a.tolerance):
            flag = " (slower)"
            worse += 1
        print(f"| `{k}` | {s:.1f} | {t:.1f} | {t / s:.3f}{flag} |")
    print(f"\n{worse} benchmark(s) slower with the tuned choices by more than {a.tolerance:.0%}")
    return 1 if worse else 0


if __name__ == "__main__":
    sys.exit(main())
