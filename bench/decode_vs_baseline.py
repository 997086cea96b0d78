#!/usr/bin/env python3
"""Decoding speed of this build against an older vkformer and llama.cpp's CPU backend, in one run.

Issue 21's figures: generation (tg, one token per pass) and prompt processing (pp) tokens/s of a
GGUF language model, this build's `vkformer bench --model` beside a baseline vkformer binary (by
default the statically linked 161d6ee) and, where given, llama.cpp's `llama-bench` on the CPU
(2 threads). The machine is shared and noisy, so the programs take turns: every round runs each
once (-r 1, after its own untimed warm-up), the order reversed every other round (A B C, C B A,
...), and the figures are the medians over the rounds. Prints a table and the ratios; --json
writes them with every sample.

    M=$(scripts/fetch_smollm2.sh)
    python3 bench/decode_vs_baseline.py --model $M --rounds 3 \
        --llama-bench /work/peers/llama.cpp-build-cpu/bin/llama-bench

Both vkformer binaries run with VKFORMER_TUNING=static (the static table, not a tuning cache)
on the same Vulkan device (--device, default the first).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile


def run_vkformer(binary, model, p, n, device, tmp):
    out = os.path.join(tmp, "vk.json")
    cmd = [binary, "bench", "--model", model, "-p", str(p), "-n", str(n), "-r", "1", "--json", out]
    if device:
        cmd += ["--device", device]
    env = dict(os.environ, VKFORMER_TUNING="static")
    subprocess.run(cmd, check=True, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    with open(out) as f:
        doc = json.load(f)
    tps = {t["test"]: t["samples_ts"][0] for t in doc["llm"]}
    return tps, doc


def run_llama_bench(binary, model, p, n, threads):
    # --repack 0: the repacked (AMX) CPU kernels die with SIGILL on the shared machine.
    cmd = [binary, "-m", model, "-p", str(p), "-n", str(n), "-r", "1", "-t", str(threads), "--repack", "0",
           "-o", "json"]
    res = subprocess.run(cmd, check=True, capture_output=True, text=True)
    tps = {}
    for t in json.loads(res.stdout):
        name = f"pp{t['n_prompt']}" if t["n_gen"] == 0 else f"tg{t['n_gen']}"
        tps[name] = t["avg_ts"]
    return tps, None


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True, help="GGUF file (e.g. scripts/fetch_smollm2.sh's)")
    ap.add_argument("--ours", default="build/tools/vkformer", help="this build's vkformer")
    ap.add_argument("--baseline", default="/work/baseline/161d6ee/vkformer", help="the vkformer to compare with")
    ap.add_argument("--llama-bench", default="", help="llama.cpp's llama-bench (CPU build); none: left out")
    ap.add_argument("--threads", type=int, default=2, help="llama-bench threads (default 2)")
    ap.add_argument("--rounds", type=int, default=3, help="runs of each program, taking turns (default 3)")
    ap.add_argument("-p", type=int, default=512, help="prompt tokens (default 512; 0: no pp test)")
    ap.add_argument("-n", type=int, default=128, help="generated tokens (default 128; 0: no tg test)")
    ap.add_argument("--device", default="", help="vkformer --device (default: the first device)")
    ap.add_argument("--json", default="", help="also write the samples, medians and ratios here")
    a = ap.parse_args()
    if a.rounds < 1:
        ap.error(f"--rounds must be at least 1, got {a.rounds}")
    for path, what in ((a.model, "--model"), (a.ours, "--ours"), (a.baseline, "--baseline")) + (
            ((a.llama_bench, "--llama-bench"),) if a.llama_bench else ()):
        if not os.path.isfile(path):
            ap.error(f"{what} {path}: no such file")

    runners = [("ours", lambda tmp: run_vkformer(a.ours, a.model, a.p, a.n, a.device, tmp)),
               ("baseline", lambda tmp: run_vkformer(a.baseline, a.model, a.p, a.n, a.device, tmp))]
    if a.llama_bench:
        runners.append((f"llama.cpp CPU -t {a.threads}",
                        lambda tmp: run_llama_bench(a.llama_bench, a.model, a.p, a.n, a.threads)))
    tests = ([f"pp{a.p}"] if a.p > 0 else []) + ([f"tg{a.n}"] if a.n > 0 else [])  # 0: left out
    samples = {name: {t: [] for t in tests} for name, _ in runners}
    loads = []  # the 1-minute load average before each round: the machine is shared
    ours_doc = None
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(a.rounds):
            order = runners if r % 2 == 0 else list(reversed(runners))
            loads.append(os.getloadavg()[0])
            for name, run in order:
                tps, doc = run(tmp)
                if name == "ours":
                    ours_doc = doc
                for t in tests:
                    samples[name][t].append(tps[t])
                print(f"round {r + 1}/{a.rounds} {name}: " +
                      ", ".join(f"{t} {tps[t]:.1f} t/s" for t in tests), file=sys.stderr, flush=True)

    med = {name: {t: statistics.median(v) for t, v in by.items()} for name, by in samples.items()}
    names = [name for name, _ in runners]
    print(f"{a.model}: medians of {a.rounds} alternating runs (tokens/s), load average "
          + ", ".join(f"{x:.1f}" for x in loads))
    # Also the median of the rounds' own ratios: a round's runs share its moment of the machine.
    print("| test | " + " | ".join(names) + " | ours / baseline | per round |" +
          (f" ours / {names[2]} |" if len(names) > 2 else ""))
    print("|---" * (len(names) + 3 + (len(names) > 2)) + "|")
    ratios = {}
    for t in tests:
        row = [f"{med[n][t]:.1f}" for n in names]
        paired = statistics.median(o / b for o, b in zip(samples["ours"][t], samples["baseline"][t]))
        ratios[t] = {"baseline": med["ours"][t] / med["baseline"][t], "baseline_per_round": paired}
        row += [f"{ratios[t]['baseline']:.2f}x", f"{paired:.2f}x"]
        if len(names) > 2:
            ratios[t]["llama_cpp_cpu"] = med["ours"][t] / med[names[2]][t]
            row.append(f"{ratios[t]['llama_cpp_cpu']:.2f}x")
        print(f"| {t} | " + " | ".join(row) + " |")
    if ours_doc and "per_decoded_token" in ours_doc:
        d = ours_doc["per_decoded_token"]
        print(f"ours per decoded token: {d['dispatches']} dispatches ({d['dispatches_per_layer']:.2f} per layer), "
              f"{d['barriers']} barriers, {d['pipeline_binds']} pipeline binds, "
              f"{d['weight_bytes_read'] / 1e6:.1f} MB of weights")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"model": a.model, "rounds": a.rounds, "samples_ts": samples, "median_ts": med,
                       "ratios": ratios, "load_average_per_round": loads,
                       "ours_per_decoded_token": (ours_doc or {}).get("per_decoded_token"),
                       "ours_decoded_token_by_kernel": (ours_doc or {}).get("decoded_token_by_kernel"),
                       "ours_decode_weight_gbps": (ours_doc or {}).get("decode_weight_gbps"),
                       "ours_copy_gbps": (ours_doc or {}).get("copy_gbps")},
                      f, indent=2)


if __name__ == "__main__":
    main()
