#!/usr/bin/env bash
# Prepares the one-command GPU run (../shared/GPU.md) and prints the command:
#
#   scripts/gpu_bundle.sh
#
# fills, in the checkout's root (both ignored by git):
#   .gl/      Debian packages: the Vulkan loader, the validation layers, and the GL/X11 libraries
#             NVIDIA's Vulkan driver needs (without them every instance fails to find it);
#   .devrun/  gpu_run.sh (the run), bin.tar.xz (the vkformer tool and the Vulkan test suites,
#             built in build-gpu/ with -static-libstdc++ -static-libgcc, stripped, in one xz
#             stream whose dictionary spans several binaries, so the library they share is
#             stored about once), tests.tsv (the suites as ctest runs them), the Python scripts,
#             SmolLM2-135M's header as a spec for scripts/random_gguf.py and all-MiniLM-L6-v2's
#             small files for scripts/random_safetensors.py (the 98 and 87 MB weights cannot
#             travel; the run remakes them with random weights).
# Then it checks that the working tree and both folders fit the 64 MiB that travel, and prints
# the command: run it with the device tool, carrying [".gl", ".devrun"]. The same script runs
# here on lavapipe with small sizes as the gpu_run_smoke test (scripts/gpu_run.sh --smoke).
set -euo pipefail
cd "$(dirname "$0")/.."

# The suites that exercise the device; host-only ones (tokenizers, file readers) and those that
# need a fetched model (SmolLM2, all-MiniLM: too large to carry) stay on lavapipe.
SUITES=(elementwise_test core_test device_test graph_test matmul_test heads_test layer_norm_test
  embedding_test softmax_test attention_test model_test capi_test llama_ops_test windows_test
  memory_limits_test pooling_test quant_matmul_test llama_model_test llm_families_test generate_test capi_llm_test
  tunables_test tuning_cache_test)
LIMIT_MIB=64

# ---- .gl: the packages (../shared/GPU.md) ---------------------------------------------------
GL_PACKAGES=(libvulkan1 vulkan-validationlayers libglvnd0 libglx0 libgl1 libegl1 libopengl0
  libgles2 libx11-6 libxext6 libxcb1 libxau6 libxdmcp6 libbsd0 libmd0 libx11-data)
missing=()
for p in "${GL_PACKAGES[@]}"; do
  ls .gl/"${p}"_*.deb >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  mkdir -p .gl /tmp/amd64/partial
  o='-oAPT::Architecture=amd64 -oAPT::Architectures=amd64 -oDir::State::Lists=/tmp/amd64'
  # shellcheck disable=SC2086
  apt-get $o update -qq
  # shellcheck disable=SC2086
  (cd .gl && apt-get $o download "${missing[@]}")
fi

# ---- the build --------------------------------------------------------------------------------
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release "${launcher[@]}" \
  -DCMAKE_EXE_LINKER_FLAGS="-static-libstdc++ -static-libgcc" >/dev/null
cmake --build build-gpu -j"$(nproc)" --target vkformer_cli "${SUITES[@]}"

rm -rf .devrun && mkdir -p .devrun/stage/tests .devrun/stage/lib
cp build-gpu/tools/vkformer .devrun/stage/
for s in "${SUITES[@]}"; do cp "build-gpu/tests/$s" .devrun/stage/tests/; done
strip .devrun/stage/vkformer .devrun/stage/tests/*
# Shared libraries the GPU machine (Ubuntu 24.04) has in other versions or not at all (RE2,
# utf8proc); the C library, libgcc_s and the Vulkan loader (opened at run time) are there.
ldd .devrun/stage/vkformer .devrun/stage/tests/* 2>/dev/null | awk '/=> \//{print $3}' | sort -u |
  grep -Ev '/(libc|libm|libdl|libpthread|librt|ld-linux[^/]*|libgcc_s|libstdc\+\+)\.so' |
  while read -r lib; do cp -L "$lib" .devrun/stage/lib/; done
# One stream, a dictionary larger than a binary: the copies of the library compress away.
tar -C .devrun/stage -cf - . | xz -T1 -9e --lzma2=dict=256MiB >.devrun/bin.tar.xz
unpacked=$(du -sm .devrun/stage | cut -f1)
rm -rf .devrun/stage

# The suites as ctest runs them (name, binary, environment, arguments), the carried ones only;
# those that need a fetched model are filtered out by name.
ctest --test-dir build-gpu --show-only=json-v1 >build-gpu/tests.json
python3 - "${SUITES[@]}" <<'PY' >.devrun/tests.tsv
import json, os, sys
suites = set(sys.argv[1:])
doc = json.load(open("build-gpu/tests.json"))
print("# name\tbinary\tenvironment (;-separated, - for none)\targuments")
for t in doc["tests"]:
    cmd = t.get("command") or []
    if not cmd:
        continue
    binary = os.path.basename(cmd[0])
    if binary not in suites or t["name"].endswith("_gpu_tuning") or t["name"] == "generate_test_smollm2":
        continue  # a GPU runs the GPU configuration anyway; SmolLM2 cannot travel
    env = []
    for p in t.get("properties", []):
        if p["name"] == "ENVIRONMENT":
            env = [e for e in p["value"] if not e.startswith("GTEST_FILTER=")]
    args = [a for a in cmd[1:] if not a.startswith("--gtest_filter")]
    if binary in ("llama_model_test", "generate_test"):
        args.append("--gtest_filter=-SmolLM2*:*SmolLM2*")
    print("\t".join([t["name"], binary, ";".join(env) or "-", " ".join(args)]))
PY
cp scripts/gpu_run.sh scripts/random_gguf.py scripts/random_safetensors.py bench/torch_bench.py \
  bench/compare.py .devrun/
chmod +x .devrun/gpu_run.sh
pwd >.devrun/source_dir

# SmolLM2-135M-Instruct's header (tokenizer included): the run remakes the file from it.
smollm2=${VKFORMER_SMOLLM2_GGUF:-}
[ -n "$smollm2" ] || smollm2=$(scripts/fetch_smollm2.sh | tail -n1)
python3 scripts/random_gguf.py spec "$smollm2" .devrun/smollm2.spec.json.gz
# all-MiniLM-L6-v2's small files and weight layout (its weights are remade there too).
minilm=${VKFORMER_MINILM_DIR:-}
[ -n "$minilm" ] || minilm=$(scripts/fetch_minilm.sh | tail -n1)
python3 scripts/random_safetensors.py pack "$minilm" .devrun/minilm.spec.json.gz

# ---- the size check and the command -------------------------------------------------------
tree=$(git ls-files -z | xargs -0 du -cb 2>/dev/null | tail -n1 | cut -f1)
carried=$(du -sb .gl .devrun | awk '{s += $1} END {print s}')
total=$(((tree + carried) / 1048576))
echo
du -sh .gl .devrun .devrun/bin.tar.xz
echo "binaries: ${unpacked} MiB unpacked; working tree $((tree / 1048576)) MiB + carried $((carried / 1048576)) MiB = ${total} MiB of ${LIMIT_MIB}"
if [ "$total" -ge "$LIMIT_MIB" ]; then
  echo "gpu_bundle.sh: ${total} MiB would travel, more than ${LIMIT_MIB} MiB" >&2
  exit 1
fi
cat <<'CMD'

Command for the device tool (carry: [".gl", ".devrun"], timeout_s: 540):

bash .devrun/gpu_run.sh

It writes $OUT/summary.md (the table of ratios, issue 22's figures), results.json (every step's
JSON), run.log and tuning-cache.json; commit results.json under bench/results/ and the table in
bench/RESULTS.md.
CMD
