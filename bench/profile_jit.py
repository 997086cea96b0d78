#!/usr/bin/env python3
"""Summarizes perf samples over JIT machine code (see profile_lavapipe.sh): the share of samples
in the JIT code, its functions (split at `ret`), the hottest windows of instructions, backward
jumps (loops) with their samples, and the instruction mix weighted by samples.

  profile_jit.py IPS_FILE OBJDUMP_FILE [--window N] [--show K]
"""
import argparse
import collections
import re


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("ips")
    p.add_argument("objdump")
    p.add_argument("--window", type=int, default=40, help="instructions per window")
    p.add_argument("--show", type=int, default=3, help="hottest windows to print in full")
    a = p.parse_args()

    samples = collections.Counter(int(line.split()[0], 16) for line in open(a.ips) if line.strip())
    addrs, ins = [], []
    for line in open(a.objdump):
        m = re.match(r"\s*([0-9a-f]+):\t[^\t]*\t(.*)", line)
        if m:
            addrs.append(int(m.group(1), 16))
            ins.append(m.group(2).strip())
    if not addrs:
        raise SystemExit("no instructions in " + a.objdump)
    hits = [samples[x] for x in addrs]
    total, jit = sum(samples.values()), sum(hits)
    print(f"{total} samples, {jit} in the JIT code ({100 * jit / max(total, 1):.0f}%)\n")

    print("functions (split at ret) with >= 2% of the JIT samples:")
    start = 0
    for i, t in enumerate(ins):
        if t.startswith("ret"):
            s = sum(hits[start:i + 1])
            if s >= 0.02 * jit:
                print(f"  [{start}..{i}] {i - start + 1} instructions, {100 * s / jit:.1f}%")
            start = i + 1

    print("\nloops (backward jumps over > 300 bytes):")
    index = {x: i for i, x in enumerate(addrs)}
    for j, t in enumerate(ins):
        m = re.match(r"j\w+\s+0x([0-9a-f]+)", t)
        if not m:
            continue
        k = index.get(int(m.group(1), 16))
        if k is None or k >= j or addrs[j] - addrs[k] <= 300:
            continue
        s = sum(hits[k:j + 1])
        if s >= 0.01 * jit:
            mix = collections.Counter(x.split()[0] for x in ins[k:j + 1]).most_common(5)
            print(f"  [{k}..{j}] {j - k + 1} instructions, {100 * s / jit:.1f}%: {mix}")

    mix = collections.Counter()
    for h, t in zip(hits, ins):
        mix[t.split()[0]] += h
    print("\ninstruction mix by samples:", ", ".join(f"{k} {100 * v / jit:.1f}%" for k, v in mix.most_common(15)))

    w = a.window
    windows = sorted(((sum(hits[i:i + w]), i) for i in range(0, len(addrs), w)), reverse=True)
    for s, i in windows[:a.show]:
        print(f"\nwindow [{i}..{i + w - 1}]: {100 * s / jit:.1f}% of the JIT samples")
        for j in range(i, min(i + w, len(addrs))):
            print(f"  {hits[j]:6d}  {ins[j]}")


if __name__ == "__main__":
    main()
