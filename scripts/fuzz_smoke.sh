#!/usr/bin/env bash
# Builds the libFuzzer harnesses of the file readers (fuzz/) with clang and runs each for a bounded
# time from the committed seed corpus. Fails on any crash, sanitizer report (ASan, UBSan), leak,
# timeout or out-of-memory; the input that did it is saved under $BUILD_DIR/artifacts/.
#
#   scripts/fuzz_smoke.sh                    every harness for FUZZ_SECONDS (60) each
#   FUZZ_SECONDS=600 scripts/fuzz_smoke.sh npy   one harness, longer
#
# Variables: BUILD_DIR (build-fuzz), FUZZ_SECONDS (60), JOBS (all cores), CXX (clang++).
# New inputs libFuzzer finds go to $BUILD_DIR/corpus/<name>/, never into fuzz/corpus/.
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD_DIR=${BUILD_DIR:-build-fuzz}
FUZZ_SECONDS=${FUZZ_SECONDS:-60}
JOBS=${JOBS:-$(nproc 2>/dev/null || echo 2)}
CXX_FUZZ=${CXX:-clang++}
all=(safetensors npy config gguf tokenizer bpe_tokenizer)
names=("$@")
[[ ${#names[@]} -gt 0 ]] || names=("${all[@]}")

say() { echo "fuzz_smoke: $*"; }
die() { echo "fuzz_smoke: error: $*" >&2; exit 1; }
for n in "${names[@]}"; do
  [[ -f fuzz/$n.cpp ]] || die "no harness '$n' (there are: ${all[*]})"
done

./scripts/install_deps.sh --fuzz

# Configured every time (quick once cached), so that a harness added since is known.
# Only the harnesses are built here: tests, tools and examples stay off.
cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER="$CXX_FUZZ" \
  -DVKFORMER_FUZZ=ON -DVKFORMER_BUILD_TESTS=OFF -DVKFORMER_BUILD_TOOLS=OFF \
  -DVKFORMER_BUILD_EXAMPLES=OFF > /dev/null
cmake --build "$BUILD_DIR" -j "$JOBS" --target "${names[@]/#/fuzz_}"

# Leaks are checked after every input (libFuzzer's -detect_leaks, on by default with ASan).
export ASAN_OPTIONS="detect_leaks=1:allocator_may_return_null=0"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
mkdir -p "$BUILD_DIR/artifacts"
# One harness per core at a time (libFuzzer runs one process on one core): the 6 harnesses of a
# 20 s smoke run take 60 s on 2 cores instead of 120 s. Each writes its own log; the results are
# printed in the harnesses' order once all have ended.
fuzz_one() {
  local n=$1 work="$BUILD_DIR/corpus/$1" dict=()
  mkdir -p "$work"
  [[ -f fuzz/$n.dict ]] && dict=(-dict="fuzz/$n.dict")
  # -timeout: one input taking 10 s is a hang. -rss_limit_mb: an input must not make a reader
  # allocate far beyond its own size (a few MB at most here).
  "$BUILD_DIR/fuzz/fuzz_$n" "$work" "fuzz/corpus/$n" "${dict[@]}" \
      -max_total_time="$FUZZ_SECONDS" -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
      -print_final_stats=1 -artifact_prefix="$BUILD_DIR/artifacts/$n-" \
      > "$BUILD_DIR/fuzz_$n.log" 2>&1
}
declare -A pid_of=()
running=0
for n in "${names[@]}"; do
  if (( running >= JOBS )); then wait -n || true; running=$((running - 1)); fi
  say "$n: ${FUZZ_SECONDS} s from fuzz/corpus/$n ($(ls "fuzz/corpus/$n" | wc -l) seeds)"
  fuzz_one "$n" &
  pid_of[$n]=$!
  running=$((running + 1))
done
failed=()
for n in "${names[@]}"; do
  if ! wait "${pid_of[$n]}"; then
    tail -n 60 "$BUILD_DIR/fuzz_$n.log"
    failed+=("$n")
    continue
  fi
  grep -E '^(Done|stat::number_of_executed_units|stat::peak_rss_mb)' "$BUILD_DIR/fuzz_$n.log" |
    sed "s/^/fuzz_smoke: $n: /"
done

if [[ ${#failed[@]} -ne 0 ]]; then
  die "failed: ${failed[*]} (logs: $BUILD_DIR/fuzz_<name>.log; inputs: $BUILD_DIR/artifacts/;
  replay one with $BUILD_DIR/fuzz/fuzz_<name> <input>)"
fi
say "ok: ${names[*]}"
