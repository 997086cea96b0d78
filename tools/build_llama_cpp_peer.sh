#!/usr/bin/env bash
# Builds llama.cpp, the peer we compare against: its tokenizer makes tests/golden_bpe, and
# llama-bench measures ggml-vulkan and ggml's CPU backend on the same device.
#
#   tools/build_llama_cpp_peer.sh [PEER_DIR]     # default /work/peers
#
# The sources come from PyPI's llama-cpp-python sdist (it vendors llama.cpp at a pinned commit,
# with the vocab-only GGUFs under vendor/llama.cpp/models). The build runs with one job under
# nice so other builds keep a core. It configures build-vulkan/ (GGML_VULKAN=ON, needs glslc,
# libvulkan-dev and spirv-headers); if that fails it builds build-cpu/ instead and says why.
# Binaries end up in PEER_DIR/llama.cpp-build-{vulkan,cpu}/bin. Running it again rebuilds only
# what changed. BACKEND=cpu skips the Vulkan attempt (no glslc, or only the tokenizer and
# llama-quantize are wanted: the CPU build is much shorter).
#
# BACKEND=vulkan-static builds what the GPU run carries (scripts/gpu_bundle.sh, issue 41):
# llama-bench and test-backend-ops with ggml-vulkan linked in (no shared ggml libraries),
# -static-libstdc++ -static-libgcc like vkformer's binaries (the GPU machine has another C++
# library) and no -march=native (another processor there), into
# PEER_DIR/llama.cpp-build-vulkan-static/bin; no fallback to the CPU backend.
set -euo pipefail

VERSION=0.3.36                 # llama-cpp-python; the llama.cpp commit it vendors is in the log
PEER_DIR="${1:-/work/peers}"
JOBS="${JOBS:-1}"
BACKEND="${BACKEND:-auto}"     # auto: Vulkan, falling back to CPU; cpu: CPU only; vulkan-static
# llama-quantize writes the K-quant fixtures (tests/fixtures/make_family_models.py); llama-completion is
# the classic one-shot CLI; llama-perplexity is what `vkformer perplexity` is checked against;
# llama-cli and llama-server need the server library (slow) and come last so the others are
# usable early.
TARGETS=(llama-tokenize llama-quantize llama-bench llama-completion llama-perplexity llama-cli llama-server)

say() { echo "build_llama_cpp_peer: $*" >&2; }
die() { say "error: $*"; exit 1; }

mkdir -p "$PEER_DIR/dl"
sdist="$PEER_DIR/dl/llama_cpp_python-$VERSION.tar.gz"
if [[ ! -f "$sdist" ]]; then
  python3 -m pip download --no-deps --no-binary :all: "llama-cpp-python==$VERSION" \
    -d "$PEER_DIR/dl" >&2 || die "pip download llama-cpp-python==$VERSION failed"
fi
src="$PEER_DIR/llama_cpp_python-$VERSION/vendor/llama.cpp"
[[ -f "$src/CMakeLists.txt" ]] || tar xzf "$sdist" -C "$PEER_DIR" || die "cannot unpack $sdist"

# ggml-vulkan compiles its shaders with glslc and finds SPIR-V headers through their CMake config.
need=()
[[ "$BACKEND" == cpu ]] ||
  for p in glslc libvulkan-dev spirv-headers; do dpkg -s "$p" >/dev/null 2>&1 || need+=("$p"); done
if (( ${#need[@]} )); then
  say "installing ${need[*]}"
  apt-get install -y "${need[@]}" >&2 || say "apt-get failed; the Vulkan build may fail"
fi

# Debian 12's Vulkan headers (1.3.239) predate VK_EXT_layer_settings, which ggml-vulkan uses only
# to turn on best-practice checks when GGML_VULKAN_VALIDATE is set. Guard that block by the header
# version (nothing else changes; the block is unchanged with newer headers). Idempotent.
python3 - "$src/ggml/src/ggml-vulkan/ggml-vulkan.cpp" <<'PY' || die "cannot patch ggml-vulkan.cpp"
import sys
path = sys.argv[1]
text = open(path).read()
begin = "    VkBool32 enable_best_practice = layer_settings;\n"
end = "vk::InstanceCreateInfo instance_create_info(vk::InstanceCreateFlags{}, &app_info, layers, extensions, &layer_setting_info);\n"
if "VK_EXT_LAYER_SETTINGS_EXTENSION_NAME) // vkformer peer build" not in text:
    i, j = text.find(begin), text.find(end)
    if i < 0 or j < 0:
        sys.exit("ggml-vulkan.cpp: the layer-settings block is not where expected")
    j += len(end)
    fallback = ("#else\n    vk::InstanceCreateInfo instance_create_info(vk::InstanceCreateFlags{}, "
                "&app_info, layers, extensions);\n#endif\n")
    text = (text[:i] + "#if defined(VK_EXT_LAYER_SETTINGS_EXTENSION_NAME) // vkformer peer build\n"
            + text[i:j] + fallback + text[j:])
    open(path, "w").write(text)
PY

# Common options: tools only, no tests/examples/web UI, no network libraries.
common=(-DCMAKE_BUILD_TYPE=Release -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF
        -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=ON
        -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF)

build() {  # build DIR [cmake options...]: configure once, then each target in turn
  local dir="$1"; shift
  nice -n 10 cmake -S "$src" -B "$dir" "${common[@]}" "$@" >&2 || return 1
  for t in "${TARGETS[@]}"; do
    say "building $t in $dir"
    nice -n 10 cmake --build "$dir" -j"$JOBS" --target "$t" >&2 || return 1
  done
}

if [[ "$BACKEND" == vulkan-static ]]; then
  TARGETS=(llama-bench test-backend-ops)
  static="$PEER_DIR/llama.cpp-build-vulkan-static"
  build "$static" -DGGML_VULKAN=ON -DBUILD_SHARED_LIBS=OFF -DLLAMA_BUILD_TESTS=ON -DLLAMA_BUILD_SERVER=OFF \
    -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON \
    -DCMAKE_EXE_LINKER_FLAGS="-static-libstdc++ -static-libgcc" || die "the static Vulkan build failed"
  say "done: $static/bin"
  echo "$static/bin"
  exit 0
fi

vk="$PEER_DIR/llama.cpp-build-vulkan"
if [[ "$BACKEND" != cpu ]] && build "$vk" -DGGML_VULKAN=ON; then
  say "done: $vk/bin"
  echo "$vk/bin"
else
  [[ "$BACKEND" == cpu ]] || say "the Vulkan build failed (see above); building the CPU backend alone"
  cpu="$PEER_DIR/llama.cpp-build-cpu"
  build "$cpu" -DGGML_VULKAN=OFF || die "the CPU-only build failed too"
  echo "$cpu/bin"
fi
