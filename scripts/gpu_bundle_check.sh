#!/usr/bin/env bash
# The GPU run's bundle, made and run here on lavapipe (ctest: gpu_bundle_dry_run and
# gpu_bundle_killed), so that the one command works on first contact with a GPU:
#
#   scripts/gpu_bundle_check.sh dry-run BUILD_DIR SCRATCH
#       scripts/gpu_bundle.sh packs BUILD_DIR's binaries (--build-dir, --fast: no second build,
#       xz preset 1) into SCRATCH/.gl and SCRATCH/.devrun with the size check and the test list, then
#       SCRATCH/.devrun/gpu_run.sh --dry-run unpacks them into a prefix and runs every step with
#       small sizes. Checked: every step ok; the loader came from the prefix, the driver through
#       VK_DRIVER_FILES, the validation layer from the carried packages; the suites ran from the
#       bundle's binaries (not BUILD_DIR's), each entry of tests.tsv with exit 0, the tensor-core
#       suites first; every file under $OUT parses.
#   scripts/gpu_bundle_check.sh killed SCRATCH
#       runs that bundle again, without xz (the set-up's fallback), and kills the whole run
#       (SIGKILL, every process of its session) at a random moment within the dry run's
#       duration (VKF_KILL_AT=S: a chosen one): every file it left must parse, compare.py must
#       make its table from them, and each step and suite that run.log says ended must have its
#       record, with status ok.
set -u -o pipefail
here=$(cd "$(dirname "$0")" && pwd)
checkout=$(cd "$here/.." && pwd)
fail() { echo "gpu_bundle_check: $*" >&2; exit 1; }

check_out() {  # every result file parses and compare.py makes a table of them
  python3 "$1/.devrun/gpu_run_record.py" check "$2" || fail "a result file under $2 does not parse"
  python3 "$1/.devrun/compare.py" --out-dir "$2" --smoke --markdown "$2/summary.md" >/dev/null ||
    fail "compare.py --out-dir $2 failed"
}

case ${1:-} in
  dry-run)
    [ $# -eq 3 ] || fail "usage: $0 dry-run BUILD_DIR SCRATCH"
    build=$2 scratch=$3
    rm -rf "$scratch" && mkdir -p "$scratch" || exit 1
    minilm=${VKFORMER_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/vkformer}/all-MiniLM-L6-v2/model
    [ -f "$minilm/model.safetensors" ] || minilm=none  # never fetched here: its rows say so
    "$checkout/scripts/gpu_bundle.sh" --build-dir "$build" --root "$scratch" --fast --peer-dir none \
      --smollm2 "$checkout/tests/golden_llama/tiny/tiny_llama_tied.gguf" --minilm "$minilm" ||
      fail "gpu_bundle.sh failed"
    t0=$SECONDS
    TMPDIR=$scratch bash "$scratch/.devrun/gpu_run.sh" --dry-run --out "$scratch/out" --prefix "$scratch/prefix" ||
      fail "the dry run failed (its log: $scratch/out/run.log, tails: $scratch/out/logs-tail.txt)"
    echo $((SECONDS - t0)) >"$scratch/dry_run_seconds"
    check_out "$scratch" "$scratch/out"
    python3 - "$scratch" "$build" <<'PY' || fail "the dry run's records are not what the bundle should give"
import json, os, sys
sys.path.insert(0, os.path.join(sys.argv[1], ".devrun"))
from gpu_run_record import read_jsonl
scratch, build = (os.path.realpath(p) for p in sys.argv[1:3])
prefix = os.path.join(scratch, "prefix")
out = os.path.join(scratch, "out")
steps, problems = read_jsonl(os.path.join(out, "steps.jsonl"))
assert not problems, problems
names = [s["step"] for s in steps]
want = ["setup", "devices", "models", "bench_core", "torch_core", "ggml", "llm", "tests", "bench_more",
        "torch_more", "tune"]
assert sorted(names) == sorted(want), f"steps recorded: {names}, expected {want}"
bad = [(s["step"], s["status"]) for s in steps if s["status"] != "ok"]
assert not bad, f"steps not ok: {bad}"
setup = next(s for s in steps if s["step"] == "setup")["setup"]
loader = os.path.realpath(setup["loader"]["path"])
assert loader.startswith(prefix + "/"), f"the loader came from {loader}, not the prefix {prefix}"
assert setup["environment"]["VK_DRIVER_FILES"].endswith(".json") and "lvp_icd" in setup["environment"]["VK_DRIVER_FILES"], setup["environment"]
layer = setup["layer"]
assert layer and os.path.realpath(layer["manifest"]).startswith(prefix + "/"), f"layer: {layer}"
assert setup["environment"]["VK_LAYER_PATH"].startswith(prefix), setup["environment"]
tsv = [l.split("\t") for l in open(os.path.join(scratch, ".devrun", "tests.tsv")) if l.strip() and not l.startswith("#")]
tensor_core = {"coopmat_test", "fused_ops_test", "flash_attention_test"}
first = [t[1] for t in tsv[:len([t for t in tsv if t[1] in tensor_core])]]
assert set(first) == tensor_core, f"the tensor-core suites are not first: {[t[0] for t in tsv[:6]]}"
suites, problems = read_jsonl(os.path.join(out, "tests.jsonl"))
assert not problems, problems
by = {s["suite"]: s for s in suites}
missing = [t[0] for t in tsv if t[0] not in by]
assert not missing, f"no record for {missing}"
failed = [(s["suite"], s["exit"]) for s in suites if s["exit"] != 0]
assert not failed, f"suites failed: {failed}"
for s in suites:  # the bundle's binaries, unpacked into the prefix, not the build folder's
    path = os.path.realpath(s["path"])
    assert path == os.path.join(prefix, "bin", "tests", s["binary"]), f"{s['suite']} ran {path}"
ran = {s["suite"]: s["ran"] for s in suites}
assert ran.get("device_test", 0) >= 2 and ran.get("coopmat_test", 0) >= 1, f"tests run: {ran}"
print(f"dry run: {len(steps)} steps ok, {len(suites)} suites from the bundle, loader {loader}, layer {layer['version']}")
PY
    ;;
  killed)
    [ $# -eq 2 ] || fail "usage: $0 killed SCRATCH"
    scratch=$2
    [ -f "$scratch/.devrun/gpu_run.sh" ] || fail "no bundle in $scratch (gpu_bundle_dry_run makes it)"
    span=$(cat "$scratch/dry_run_seconds" 2>/dev/null || echo 120)
    [ "$span" -ge 4 ] || span=4
    at=${VKF_KILL_AT:-$((2 + RANDOM % (span - 2)))}  # VKF_KILL_AT: a chosen moment
    out=$scratch/out-killed
    rm -rf "$out" "$scratch/prefix-killed"
    # Without xz this time: the set-up's fallback (Python's lzma) unpacks the binaries.
    VKF_NO_XZ=1 TMPDIR=$scratch setsid bash "$scratch/.devrun/gpu_run.sh" --dry-run --out "$out" --prefix "$scratch/prefix-killed" \
      >"$scratch/killed.log" 2>&1 &
    pid=$!
    # Poll, so the kill lands at `at` seconds (or the run ended by itself first).
    t0=$SECONDS
    while kill -0 "$pid" 2>/dev/null && [ $((SECONDS - t0)) -lt "$at" ]; do sleep 0.5; done
    # The whole session: timeout(1) puts each step in a process group of its own.
    for _ in 1 2 3; do
      pids=$(ps -o pid= -s "$pid" 2>/dev/null | tr -d ' ')
      [ -n "$pids" ] || break
      # shellcheck disable=SC2086
      kill -KILL $pids 2>/dev/null
      sleep 0.2
    done
    echo "killed the dry run at $((SECONDS - t0)) s of about $span"
    wait "$pid" 2>/dev/null
    ls -l "$out"
    check_out "$scratch" "$out"
    [ -s "$out/run.log" ] || fail "the killed run left no run.log"
    # What it measured came back: every step and suite that run.log says ended has its record
    # (gpu_run.sh logs the end after writing the record).
    python3 - "$scratch" "$out" <<'PY' || fail "the killed run lost results it had"
import os, re, sys
sys.path.insert(0, os.path.join(sys.argv[1], ".devrun"))
from gpu_run_record import read_jsonl
out = sys.argv[2]
log = open(os.path.join(out, "run.log"), errors="replace").read()
ended_steps = re.findall(r"^== (\w+): (?!skipped).* in \d+ s$", log, re.M)
ended_suites = re.findall(r"^(\w+): exit -?\d+ in \d+ s$", log, re.M)
records = read_jsonl(os.path.join(out, "steps.jsonl"))[0]
steps = {s["step"] for s in records}
bad = [(s["step"], s["status"]) for s in records if s["status"] != "ok"]
assert not bad, f"steps that ended before the kill but not ok: {bad}"
suites = {s["suite"] for s in read_jsonl(os.path.join(out, "tests.jsonl"))[0]}
lost = [s for s in ended_steps if s not in steps] + [s for s in ended_suites if s not in suites]
assert not lost, f"ended but not recorded: {lost}"
print(f"the killed run's results parse: {len(steps)} steps and {len(suites)} suites recorded, "
      f"{len(ended_steps)} steps and {len(ended_suites)} suites ended")
PY
    ;;
  *) fail "usage: $0 dry-run BUILD_DIR SCRATCH | killed SCRATCH" ;;
esac
