#!/usr/bin/env python3
"""Checks the lavapipe targets of the performance issue in one `vkformer bench --json` file and
prints them as Markdown for bench/RESULTS.md. Every ratio comes from the one run in the file.

  python3 bench/targets.py results.json [--device NAME_SUBSTRING]

Targets: f32 matmul 1024^3 at >= 25% of the measured FMA peak; fused attention at sequence 1024
at least 2x faster than the unfused path (every batch/heads/d_k/causal case measured both ways);
f32 softmax and layer norm at >= 60% of the measured copy bandwidth. Exits 1 if one is missed.
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


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("json")
    p.add_argument("--device", default="", help="which device of the file (name substring)")
    a = p.parse_args()
    data, dev = load_device(a.json, a.device)
    ok = {r["id"]: r for r in dev["results"] if r.get("status") == "ok"}
    peak = dev.get("peak") or {}
    rows, missed = [], 0

    def row(what, measured, holds):
        nonlocal missed
        missed += 0 if holds else 1
        rows.append(f"| {what} | {measured} | {'yes' if holds else '**no**'} |")

    mm = ok.get("matmul/square/f32/m=1024,n=1024,k=1024")
    if mm:
        row("f32 matmul 1024³ ≥ 25% of the FMA peak",
            f"{mm['gflops']:.1f} GFLOP/s = {pct(mm['peak_fraction'])}", mm["peak_fraction"] >= 0.25)
    else:
        row("f32 matmul 1024³ ≥ 25% of the FMA peak", "not measured", False)

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
        row("fused attention at sequence 1024 ≥ 2× unfused", "no pair measured", False)

    for bid, r in sorted(ok.items()):
        if not re.match(r"(softmax|layer_norm)/[^/]+/f32/", bid):
            continue
        same = r.get("same_size_fraction")
        row(f"{bid.split('/')[0]} f32 {bid.split('/')[-1]} ≥ 60% of the copy peak",
            f"{r['gbps']:.2f} GB/s = {pct(r['peak_fraction'])}"
            + (f" ({pct(same)} of a same-size copy)" if same else ""),
            r["peak_fraction"] >= 0.60)

    d = dev["device"]
    print(f"{d['name']}, {data.get('date', '')}: FMA peak {peak.get('fma_gflops', 0):.1f} GFLOP/s, "
          f"copy peak {peak.get('copy_gbps', 0):.2f} GB/s\n")
    print("| target | measured | holds |\n|---|---|---|")
    print("\n".join(rows))
    return 1 if missed else 0


if __name__ == "__main__":
    raise SystemExit(main())
