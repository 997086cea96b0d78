#!/usr/bin/env python3
"""Checks the project's CPU-device (lavapipe) performance targets in one `vkformer bench --json`
file and prints them as Markdown for bench/RESULTS.md. Every ratio comes from the one run in the
file.

  python3 bench/targets.py results.json [--device NAME_SUBSTRING]

Targets: f32 matmul 1024^3 at >= 25% of the measured FMA peak; fused attention at sequence 1024
at least 2x faster than the unfused path (every batch/heads/d_k/causal case measured both ways);
f32 softmax and layer norm at >= 60% of the measured copy bandwidth. Exits 1 if one is missed,
else 2 if one could not be judged (the benchmark is not in the file, or the run had no peaks:
--no-peak), else 0.
"""
import argparse
import json
import re


def load_device(path, name):
    data = json.load(open(path))
    devices = [d for d in data["devices"] if name.lower() in d["device"]["name"].lower()]
    if not devices:
        raise SystemExit(f"no device matching '{name}' in {path}")
    return data, devices[0]


def pct(x):
    return f"{x * 100:.1f}%"


NO_PEAK = "no peak in this file (a run with --no-peak)"


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("json")
    p.add_argument("--device", default="", help="which device of the file (name substring)")
    a = p.parse_args()
    data, dev = load_device(a.json, a.device)
    ok = {r["id"]: r for r in dev["results"] if r.get("status") == "ok"}
    peak = dev.get("peak") or {}
    rows, missed, unjudged = [], 0, 0

    def row(what, measured, holds):
        """holds: True, False, or None where the file cannot tell."""
        nonlocal missed, unjudged
        if holds is None:
            unjudged += 1
            rows.append(f"| {what} | {measured} | not judged |")
            return
        missed += 0 if holds else 1
        rows.append(f"| {what} | {measured} | {'yes' if holds else '**no**'} |")

    mm = ok.get("matmul/square/f32/m=1024,n=1024,k=1024")
    if mm and mm.get("peak_fraction") is None:
        row("f32 matmul 1024³ ≥ 25% of the FMA peak", f"{mm['gflops']:.1f} GFLOP/s; {NO_PEAK}", None)
    elif mm:
        row("f32 matmul 1024³ ≥ 25% of the FMA peak",
            f"{mm['gflops']:.1f} GFLOP/s = {pct(mm['peak_fraction'])}", mm["peak_fraction"] >= 0.25)
    else:
        row("f32 matmul 1024³ ≥ 25% of the FMA peak", "not measured", None)

    pairs = 0
    for bid, fused in sorted(ok.items()):
        m = re.match(r"attention/fused(\.causal)?/(f32|f16)/(.*seq=1024,.*)", bid)
        if not m:
            continue
        unfused = ok.get(bid.replace("/fused", "/unfused", 1))
        if not unfused:
            continue
        pairs += 1
        speedup = unfused["median_us"] / fused["median_us"]
        row(f"fused attention {m.group(2)}{' causal' if m.group(1) else ''} ({m.group(3)}) ≥ 2× unfused",
            f"{fused['median_us'] / 1e3:.1f} vs {unfused['median_us'] / 1e3:.1f} ms = {speedup:.2f}×",
            speedup >= 2.0)
    if pairs == 0:
        row("fused attention at sequence 1024 ≥ 2× unfused", "no pair measured", None)

    for bid, r in sorted(ok.items()):
        if not re.match(r"(softmax|layer_norm)/[^/]+/f32/", bid):
            continue
        same = r.get("same_size_fraction")
        if r.get("peak_fraction") is None:
            row(f"{bid.split('/')[0]} f32 {bid.split('/')[-1]} ≥ 60% of the copy peak",
                f"{r['gbps']:.2f} GB/s; {NO_PEAK}", None)
            continue
        row(f"{bid.split('/')[0]} f32 {bid.split('/')[-1]} ≥ 60% of the copy peak",
            f"{r['gbps']:.2f} GB/s = {pct(r['peak_fraction'])}"
            + (f" ({pct(same)} of a same-size copy)" if same else ""),
            r["peak_fraction"] >= 0.60)

    d = dev["device"]
    if peak.get("fma_gflops") and peak.get("copy_gbps"):
        print(f"{d['name']}, {data.get('date', '')}: FMA peak {peak['fma_gflops']:.1f} GFLOP/s, "
              f"copy peak {peak['copy_gbps']:.2f} GB/s\n")
    else:
        print(f"{d['name']}, {data.get('date', '')}: {NO_PEAK}\n")
    print("| target | measured | holds |\n|---|---|---|")
    print("\n".join(rows))
    if not rows:
        print("(none of the targets' benchmarks is in this file)")
    return 1 if missed else 2 if unjudged else 0


if __name__ == "__main__":
    raise SystemExit(main())
