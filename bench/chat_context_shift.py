#!/usr/bin/env python3
"""A long `vkformer chat` at a small --ctx (issue 37 item 3): once the context is full, every turn
forgets the oldest turns by a context shift (LanguageModel::shift) instead of running the kept
ones again. Prints each turn's prompt time (the shift's time, from chat's "forgot the oldest"
line, added to the turn it made room for) and the medians before and after the context filled;
the issue's target is after <= 1.5 x before.

    python3 bench/chat_context_shift.py --model $(scripts/fetch_smollm2.sh) --turns 100 --ctx 512 \\
        --json bench/results/chat-context-shift-smollm2-lavapipe-DATE.json
"""
import argparse
import json
import re
import statistics
import subprocess
import sys
import time

TURN = re.compile(r"vkformer chat: turn (\d+) tokens, cache (\d+) of (\d+); prompt (\d+) tokens in ([0-9.]+) s")
FORGOT = re.compile(r"forgot the oldest (\d+) turns? \(([^,]+), ([0-9.]+) s\)")
TOPICS = ["the sea", "a cat", "rain", "the moon", "bread", "a train", "winter", "a garden", "music", "a river"]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True)
    ap.add_argument("--ours", default="build/tools/vkformer")
    ap.add_argument("--turns", type=int, default=100)
    ap.add_argument("--ctx", type=int, default=512)
    ap.add_argument("-n", type=int, default=16, help="reply tokens at most")
    ap.add_argument("--extra", nargs="*", default=[], help="more chat options (e.g. --cache-type-k q8_0)")
    ap.add_argument("--json")
    a = ap.parse_args()
    lines = [f"Say one short thing about {TOPICS[i % len(TOPICS)]} (turn {i + 1})." for i in range(a.turns)]
    cmd = [a.ours, "chat", "--model", a.model, "--ctx", str(a.ctx), "-n", str(a.n), "--temp", "0",
           "--system", "You answer in one short sentence."] + a.extra
    t0 = time.time()
    p = subprocess.run(cmd, input="\n".join(lines) + "\n", capture_output=True, text=True)
    wall = time.time() - t0
    if p.returncode != 0:
        sys.exit(f"chat exited {p.returncode}:\n{p.stderr[-3000:]}")
    turns, pending_shift, full = [], 0.0, False
    for line in p.stderr.splitlines():
        m = FORGOT.search(line)
        if m:
            pending_shift += float(m.group(3))
            full = True
            shifted = m.group(2)
            continue
        m = TURN.search(line)
        if m:
            turns.append({"turn_tokens": int(m.group(1)), "cache": int(m.group(2)), "prompt_tokens": int(m.group(4)),
                          "prompt_s": float(m.group(5)), "shift_s": pending_shift, "after_full": full,
                          "how": shifted if pending_shift else ""})
            pending_shift = 0.0
    before = [t["prompt_s"] + t["shift_s"] for t in turns if not t["after_full"]]
    after = [t["prompt_s"] + t["shift_s"] for t in turns if t["after_full"]]
    for i, t in enumerate(turns):
        print(f"turn {i + 1:3d}: {t['prompt_tokens']:4d} prompt tokens, {t['prompt_s']:.3f} s + shift {t['shift_s']:.3f} s,"
              f" cache {t['cache']}{'  (after full)' if t['after_full'] else ''}")
    result = {"command": cmd, "turns": turns, "wall_s": wall}
    if before and after:
        mb, ma = statistics.median(before), statistics.median(after)
        result.update(median_before_s=mb, median_after_s=ma, ratio=ma / mb, turns_before=len(before),
                      turns_after=len(after), shifted_all=all(t["how"] in ("", "shifted out of the cache") for t in turns))
        print(f"median turn prompt time: before the context filled {mb:.3f} s ({len(before)} turns), "
              f"after {ma:.3f} s ({len(after)} turns): {ma / mb:.2f}x; every forget a shift: {result['shifted_all']}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
