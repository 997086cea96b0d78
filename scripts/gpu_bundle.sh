#!/usr/bin/env bash
# Prepares the one-command GPU run (../shared/GPU.md) and prints the command:
#
#   scripts/gpu_bundle.sh [--build-dir DIR] [--root DIR] [--fast] [--peer-dir DIR|none]
#                         [--smollm2 FILE.gguf] [--minilm DIR|none]
#
# fills, in the checkout's root (both ignored by git) or in --root:
#   .gl/      Debian packages: the Vulkan loader, Debian 12's validation layer (1.3.239), the
#             GL/X11 libraries NVIDIA's Vulkan driver needs (without them every instance fails
#             to find it), and in .gl/newer/ Debian 13's validation layer (1.4.309): 1.3.239
#             predates VK_KHR_cooperative_matrix, which vkformer enables on NVIDIA. The run
#             unpacks them into a prefix and uses the newest layer that loads there.
#   .devrun/  gpu_run.sh (the run) and its helpers, bin.tar.xz (the vkformer tool, the Vulkan
#             test suites and, where built, ggml-vulkan's llama-bench and test-backend-ops, in
#             one xz stream whose dictionary spans several binaries, so the code they share is
#             stored about once), tests.tsv (the suites as ctest runs them, the tensor-core
#             suites first), the Python scripts, SmolLM2-135M's header as a spec for
#             scripts/random_gguf.py and all-MiniLM-L6-v2's small files for
#             scripts/random_safetensors.py (the 98 and 87 MB weights cannot travel; the run
#             remakes them with random weights).
# Then it checks that the working tree and both folders fit the 64 MiB that travel, and prints
# the command: run it with the device tool, carrying [".gl", ".devrun"].
#
# --build-dir takes the binaries of a build folder instead of building build-gpu/ with
# -static-libstdc++ -static-libgcc (the GPU machine has another C++ library); --fast compresses
# with xz preset 1 (seconds; 10% larger) instead of 6 (minutes). ctest's gpu_bundle_dry_run uses both, with --root in a
# scratch folder, then runs that bundle's gpu_run.sh --dry-run on lavapipe.
# --peer-dir is the ggml-vulkan build (tools/build_llama_cpp_peer.sh BACKEND=vulkan-static),
# default /work/peers/llama.cpp-build-vulkan-static/bin where it exists.
set -euo pipefail
checkout=$(cd "$(dirname "$0")/.." && pwd)
cd "$checkout"

build_dir=""
root=$checkout
fast=0
peer_dir=/work/peers/llama.cpp-build-vulkan-static/bin
smollm2=${VKFORMER_SMOLLM2_GGUF:-}
minilm=${VKFORMER_MINILM_DIR:-}
while [ $# -gt 0 ]; do
  case $1 in
    --build-dir) build_dir=$(cd "$2" && pwd); shift ;;
    --root) mkdir -p "$2" && root=$(cd "$2" && pwd); shift ;;
    --fast) fast=1 ;;
    --peer-dir) peer_dir=$2; shift ;;
    --smollm2) smollm2=$2; shift ;;
    --minilm) minilm=$2; shift ;;
    *) echo "gpu_bundle.sh: unknown argument '$1' (see the comment at the top)" >&2; exit 2 ;;
  esac
  shift
done
cache=${VKFORMER_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/vkformer}

# The suites that exercise the device, the most wanted first (the run starts them in this order):
# the tensor-core kernels, then the ops, models and the rest. Host-only suites (tokenizers, file
# readers) and those that need a fetched model (SmolLM2, all-MiniLM: too large to carry) stay on
# lavapipe.
SUITES=(coopmat_test fused_ops_test flash_attention_test matmul_test quant_matmul_test attention_test
  softmax_test layer_norm_test elementwise_test llama_ops_test llama_model_test heads_test
  embedding_test pooling_test model_test llm_families_test generate_test device_test core_test
  graph_test capi_test capi_llm_test memory_limits_test windows_test tunables_test tuning_cache_test)
# Cases that run last in their own entry: those sized by the device's own limits (on a GPU,
# windows_test's RealLimit cases cross a 4 GiB binding range: seconds of CPU reference).
SPLITS=("windows_test:*RealLimit*")
TENSOR_CORE_SUITES=(coopmat_test fused_ops_test flash_attention_test)
LIMIT_MIB=64

# ---- .gl: the packages (../shared/GPU.md), kept in a cache between bundles ------------------------
# apt-get with lists and caches of its own (the machine's stay as they are), amd64 whatever the
# processor here.
GL_PACKAGES=(libvulkan1 vulkan-validationlayers libglvnd0 libglx0 libgl1 libegl1 libopengl0
  libgles2 libx11-6 libxext6 libxcb1 libxau6 libxdmcp6 libbsd0 libmd0 libx11-data)
debs=$cache/gpu-debs
mkdir -p "$debs/bookworm" "$debs/newer"
o=(-oAPT::Architecture=amd64 -oAPT::Architectures=amd64)
missing=()
for p in "${GL_PACKAGES[@]}"; do
  ls "$debs/bookworm/${p}"_*.deb >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  # Debian 12's lists alone (the machine may name sources that cannot be reached).
  mkdir -p "$debs/lists-bookworm/partial" "$debs/cache-bookworm/archives/partial"
  printf 'deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian %s main\n' \
    bookworm bookworm-updates >"$debs/bookworm.list"
  ob=("${o[@]}" -oDir::Etc::SourceList="$debs/bookworm.list" -oDir::Etc::SourceParts=/dev/null
      -oDir::State::Lists="$debs/lists-bookworm" -oDir::Cache="$debs/cache-bookworm")
  apt-get "${ob[@]}" update -qq
  (cd "$debs/bookworm" && apt-get "${ob[@]}" download "${missing[@]}")
fi
if ! ls "$debs/newer"/vulkan-validationlayers_*.deb >/dev/null 2>&1; then
  # Debian 13's layer, from lists of trixie alone.
  mkdir -p "$debs/lists-trixie/partial" "$debs/cache-trixie/archives/partial"
  echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian trixie main" \
    >"$debs/trixie.list"
  ot=("${o[@]}" -oDir::Etc::SourceList="$debs/trixie.list" -oDir::Etc::SourceParts=/dev/null
      -oDir::State::Lists="$debs/lists-trixie" -oDir::Cache="$debs/cache-trixie")
  apt-get "${ot[@]}" update -qq
  (cd "$debs/newer" && apt-get "${ot[@]}" download vulkan-validationlayers)
fi
rm -rf "$root/.gl" && mkdir -p "$root/.gl/newer"
cp "$debs"/bookworm/*.deb "$root/.gl/"
cp "$debs"/newer/vulkan-validationlayers_*.deb "$root/.gl/newer/"

# ---- the binaries ------------------------------------------------------------------------------------
if [ -z "$build_dir" ]; then
  launcher=()
  command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
  cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release "${launcher[@]}" \
    -DCMAKE_EXE_LINKER_FLAGS="-static-libstdc++ -static-libgcc" >/dev/null
  cmake --build build-gpu -j"$(nproc)" --target vkformer_cli "${SUITES[@]}"
  build_dir=$checkout/build-gpu
fi

devrun=$root/.devrun
rm -rf "$devrun" && mkdir -p "$devrun/stage/tests" "$devrun/stage/lib"
stage=$devrun/stage
cp "$build_dir/tools/vkformer" "$stage/"
for s in "${SUITES[@]}"; do cp "$build_dir/tests/$s" "$stage/tests/"; done
peer=""
if [ "$peer_dir" != none ] && [ -x "$peer_dir/llama-bench" ]; then
  mkdir -p "$stage/peer"
  cp "$peer_dir/llama-bench" "$stage/peer/"
  [ -x "$peer_dir/test-backend-ops" ] && cp "$peer_dir/test-backend-ops" "$stage/peer/"
  peer=$(ls "$stage/peer" | tr '\n' ' ')
fi
strip "$stage/vkformer" "$stage"/tests/* "$stage"/peer/* 2>/dev/null || strip "$stage/vkformer" "$stage"/tests/*
# Shared libraries the GPU machine (Ubuntu 24.04) has in other versions or not at all (RE2,
# utf8proc); the C library, libgcc_s and the Vulkan loader (from .gl) are there.
# shellcheck disable=SC2046
ldd "$stage/vkformer" "$stage"/tests/* $(ls "$stage"/peer/* 2>/dev/null) 2>/dev/null |
  awk '/=> \//{print $3}' | sort -u |
  grep -Ev '/(libc|libm|libdl|libpthread|librt|ld-linux[^/]*|libgcc_s|libstdc\+\+|libvulkan)\.so' |
  while read -r lib; do cp -L "$lib" "$stage/lib/"; done
# One stream, a dictionary larger than a binary: the copies of the library compress away.
# (preset= inside --lzma2: a dict= alone would reset the preset to 6.)
preset=6; [ "$fast" = 1 ] && preset=1
tar -C "$stage" -cf - . | xz -T1 --lzma2=preset=$preset,dict=256MiB >"$devrun/bin.tar.xz"
unpacked=$(du -sm "$stage" | cut -f1)
rm -rf "$stage"

# The suites as ctest runs them (name, binary, environment, arguments), in SUITES' order, the
# SPLITS cases in entries of their own at the end; those that need a fetched model are filtered
# out by name.
# (ctest writes Testing/Temporary/LastTest.log where it runs, even for --show-only: it reads a
# copy of the build folder's test files, so that a ctest running this script keeps its log.)
ctest_copy=$(mktemp -d)
(cd "$build_dir" && find . -name CTestTestfile.cmake -exec cp --parents {} "$ctest_copy" \;)
ctest --test-dir "$ctest_copy" --show-only=json-v1 >"$devrun/ctest.json"
rm -rf "$ctest_copy"
python3 - "$devrun/ctest.json" "${SUITES[*]}" "${SPLITS[*]}" "${TENSOR_CORE_SUITES[*]}" <<'PY' >"$devrun/tests.tsv"
import json, os, sys
doc = json.load(open(sys.argv[1]))
suites = sys.argv[2].split()
splits = dict(s.split(":", 1) for s in sys.argv[3].split())
entries = {s: [] for s in suites}
for t in doc["tests"]:
    cmd = t.get("command") or []
    if not cmd:
        continue
    binary = os.path.basename(cmd[0])
    if binary not in entries or t["name"].endswith("_gpu_tuning") or t["name"].endswith("_smollm2"):
        continue  # a GPU runs the GPU configuration anyway; SmolLM2 cannot travel
    env = []
    for p in t.get("properties", []):
        if p["name"] == "ENVIRONMENT":
            env = [e for e in p["value"] if not e.startswith("GTEST_FILTER=")]
    args = [a for a in cmd[1:] if not a.startswith("--gtest_filter") and a != "--gtest_color=no"]
    entries[binary].append((t["name"], env, args))
print("# name\tbinary\tenvironment (;-separated, - for none)\targuments")
missing = [s for s in suites if not entries[s]]
if missing:
    sys.exit(f"tests.tsv: ctest runs no {missing}")
last = []
for binary in suites:
    for name, env, args in entries[binary]:
        excluded = "-" + splits[binary] if binary in splits else ""
        if binary in ("llama_model_test", "generate_test"):
            excluded = (excluded or "-") + (":" if excluded else "") + "SmolLM2*:*SmolLM2*"
        print("\t".join([name, binary, ";".join(env) or "-", " ".join(args + ([f"--gtest_filter={excluded}"] if excluded else []))]))
        if binary in splits and name == binary:
            last.append("\t".join([name + "_real_limit", binary, ";".join(env) or "-",
                                   " ".join(args + [f"--gtest_filter={splits[binary]}"])]))
print("\n".join(last))
PY
rm -f "$devrun/ctest.json"
for s in "${TENSOR_CORE_SUITES[@]}"; do
  grep -q "^$s	" "$devrun/tests.tsv" || { echo "gpu_bundle.sh: $s is not in tests.tsv" >&2; exit 1; }
done
cp scripts/gpu_run.sh scripts/gpu_run_record.py scripts/gpu_run_setup.py scripts/random_gguf.py \
  scripts/random_safetensors.py bench/torch_bench.py bench/compare.py "$devrun/"
chmod +x "$devrun/gpu_run.sh"
# The speculative rows' prompts (gpu_run.sh's llm step).
mkdir -p "$devrun/spec_prompts" && cp bench/spec_prompts/*.txt "$devrun/spec_prompts/"
echo "$checkout" >"$devrun/source_dir"
# What the results came from (the set-up step's record carries it back).
python3 - "$devrun/bundle.json" "$(git rev-parse HEAD)" "$(git status --porcelain | wc -l)" "$preset" "$peer" \
  "$(cd "$root/.gl" && ls ./*.deb newer/*.deb | tr '\n' ' ')" <<'PY'
import json, sys, time
path, commit, dirty, preset, peer, debs = sys.argv[1:]
json.dump({"commit": commit, "uncommitted_files": int(dirty), "made": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
           "xz_preset": preset, "peer": peer.split(), "packages": debs.split()}, open(path, "w"), indent=1)
PY

# SmolLM2-135M-Instruct's header (tokenizer included): the run remakes the file from it.
[ -n "$smollm2" ] || smollm2=$(scripts/fetch_smollm2.sh | tail -n1)
python3 scripts/random_gguf.py spec "$smollm2" "$devrun/smollm2.spec.json.gz"
# all-MiniLM-L6-v2's small files and weight layout (its weights are remade there too).
if [ "$minilm" != none ]; then
  [ -n "$minilm" ] || minilm=$(scripts/fetch_minilm.sh | tail -n1)
  python3 scripts/random_safetensors.py pack "$minilm" "$devrun/minilm.spec.json.gz"
fi

# ---- the size check and the command -------------------------------------------------------
# What travels: the tracked and the untracked-but-not-ignored files of the checkout, and the
# two carried folders.
tree=$(git ls-files -co --exclude-standard -z | xargs -0 du -cb 2>/dev/null | awk '$2 == "total" {s += $1} END {print s + 0}')
carried=$(du -sb "$root/.gl" "$devrun" | awk '{s += $1} END {print s}')
total_bytes=$((tree + carried))
total=$((total_bytes / 1048576))
echo
du -sh "$root/.gl" "$devrun" "$devrun/bin.tar.xz"
echo "binaries: ${unpacked} MiB unpacked${peer:+ (ggml-vulkan: $peer)}; working tree $((tree / 1048576)) MiB + carried $((carried / 1048576)) MiB = ${total} MiB of ${LIMIT_MIB}"
echo "tests.tsv: $(grep -vc '^#' "$devrun/tests.tsv") entries, first: $(grep -v '^#' "$devrun/tests.tsv" | head -3 | cut -f1 | tr '\n' ' ')"
if [ "$total_bytes" -ge $((LIMIT_MIB * 1048576)) ]; then
  echo "gpu_bundle.sh: ${total} MiB would travel, more than ${LIMIT_MIB} MiB" >&2
  exit 1
fi
cat <<'CMD'

Command for the device tool (carry: [".gl", ".devrun"], timeout_s: 420; the run ends itself
within 330 s, so a rerun fits the 15 minutes with the machine's start):

bash .devrun/gpu_run.sh

It streams under $OUT steps.jsonl, tests.jsonl, torch.jsonl, logs-tail.txt and run.log, and ends
with summary.md (the table of ratios), results.json and tuning-cache.json. If it was cut short,
`python3 bench/compare.py --out-dir DIR` makes the table here from what came back. Commit
results.json (or the .jsonl files) under bench/results/ and the table in bench/RESULTS.md.
CMD
