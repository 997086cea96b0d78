#!/usr/bin/env python3
"""Two vkformer builds' `vkformer bench` figures side by side, taking turns, in one run.

The lavapipe figures of bench/RESULTS.md were taken on other days and this machine is shared, so a
later build is compared with an older one in the same run, not with the numbers in the file: each
round runs both binaries on the same selection (--filter), the order reversed every other round,
and each benchmark's figure is the median over the rounds of its median time. A ratio above 1
means the new build is faster.

    python3 bench/ab_bench.py --new build/tools/vkformer --old /work/baseline/161d6ee/vkformer \\
        --filter '^(matmul/square|softmax|layer_norm/affine/f32)' --rounds 3 --json ab.json

Ids that only one build knows are listed and left out; a benchmark skipped by either build
(binding limits, predicted too slow) has no ratio.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile


def run_bench(binary, args, tmp, tag):
    out = os.path.join(tmp, tag + ".json")
    cmd = [binary, "bench", "--no-peak", "--json", out] + args
    env = dict(os.environ, VKFORMER_TUNING="static")
    subprocess.run(cmd, check=True, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    with open(out) as f:
        doc = json.load(f)
    results = doc["devices"][0]["results"]
    return {r["id"]: r["median_us"] for r in results if r["status"] == "ok" and r["median_us"]}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--new", default="build/tools/vkformer", help="this build's vkformer")
    ap.add_argument("--old", default="/work/baseline/161d6ee/vkformer", help="the vkformer to compare with")
    ap.add_argument("--filter", default="", help="vkformer bench --filter (RE2), the same for both")
    ap.add_argument("--quick", action="store_true", help="vkformer bench --quick")
    ap.add_argument("--budget", type=float, default=1.0, help="vkformer bench --budget per benchmark (default 1 s)")
    ap.add_argument("--max-run-seconds", type=float, default=0,
                    help="vkformer bench --max-run-seconds, the same for both (default: bench's own)")
    ap.add_argument("--rounds", type=int, default=3, help="runs of each build, taking turns (default 3)")
    ap.add_argument("--json", default="", help="also write every sample and ratio here")
    a = ap.parse_args()

    args = ["--budget", str(a.budget)]
    if a.filter:
        args += ["--filter", a.filter]
    if a.quick:
        args.append("--quick")
    if a.max_run_seconds:
        args += ["--max-run-seconds", str(a.max_run_seconds)]
    samples = {"new": [], "old": []}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(a.rounds):
            order = ["new", "old"] if r % 2 == 0 else ["old", "new"]
            for who in order:
                binary = a.new if who == "new" else a.old
                samples[who].append(run_bench(binary, args, tmp, f"{who}{r}"))
                print(f"round {r + 1}: {who} done", file=sys.stderr)

    ids_new = set().union(*samples["new"])
    ids_old = set().union(*samples["old"])
    for only, who in ((ids_new - ids_old, "new"), (ids_old - ids_new, "old")):
        for i in sorted(only):
            print(f"only the {who} build measured {i}")
    rows = []
    for i in sorted(ids_new & ids_old):
        new = [s[i] for s in samples["new"] if i in s]
        old = [s[i] for s in samples["old"] if i in s]
        mn, mo = statistics.median(new), statistics.median(old)
        rows.append({"id": i, "new_us": new, "old_us": old, "new_median_us": mn,
                     "old_median_us": mo, "speedup": mo / mn})
    width = max([len(r["id"]) for r in rows] + [2])
    print(f"{'id':<{width}}  {'old ms':>10}  {'new ms':>10}  {'old/new':>8}")
    for r in rows:
        print(f"{r['id']:<{width}}  {r['old_median_us'] / 1e3:>10.3f}  {r['new_median_us'] / 1e3:>10.3f}"
              f"  {r['speedup']:>7.2f}x")
    if rows:
        print(f"median speed-up over {len(rows)} benchmarks: "
              f"{statistics.median(r['speedup'] for r in rows):.2f}x; "
              f"lowest {min(r['speedup'] for r in rows):.2f}x ({min(rows, key=lambda r: r['speedup'])['id']})")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"new": a.new, "old": a.old, "args": args, "rounds": a.rounds, "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
