#!/usr/bin/env bash
# `make test-windows`: builds vkformer for Windows with MinGW-w64 (the library, the vkformer tool,
# the examples and the GoogleTest suites, in build-windows/), then runs every ctest test under
# Wine, whose vulkan-1.dll forwards to the host's Vulkan loader and so to lavapipe. Wine's
# graphics driver needs a display, so the script starts its own Xvfb on a free display number and
# stops it at the end. Debian 12; installs what is missing (scripts/windows/install_deps.sh).
#
# Variables: WINDOWS_BUILD_DIR (build-windows), WINDOWS_DEPS (~/.cache/vkformer/windows-deps: the
# third-party libraries built once), WINEPREFIX (~/.cache/vkformer/wine: made on first use),
# JOBS (all cores), TEST_JOBS (2), VKFORMER_SKIP_DEPS=1 (no package check),
# WINDOWS_CTEST_EXCLUDE (a ctest -E regular expression of tests to leave out; none by default).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
build=${WINDOWS_BUILD_DIR:-build-windows}
deps=${WINDOWS_DEPS:-$HOME/.cache/vkformer/windows-deps}
jobs=${JOBS:-$(nproc 2>/dev/null || echo 2)}
test_jobs=${TEST_JOBS:-2}
export WINEPREFIX=${WINEPREFIX:-$HOME/.cache/vkformer/wine}
export WINEDEBUG=${WINEDEBUG:--all}
# No Wine dialogs (Mono, Gecko) while the prefix is made: nothing here needs them.
export WINEDLLOVERRIDES=${WINEDLLOVERRIDES:-mscoree,mshtml=}

step() { echo; echo "=== test-windows: $*"; }

if [ "${VKFORMER_SKIP_DEPS:-0}" != 1 ]; then
  step "packages"
  ./scripts/windows/install_deps.sh
fi

step "third-party libraries for MinGW ($deps)"
./scripts/windows/build_deps.sh "$deps"

step "configure $build"
# ccache, where installed, makes a second clean clone's build minutes instead of half an hour.
launcher=()
command -v ccache > /dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
# A unity build (several sources per translation unit; src/CMakeLists.txt) halves the library's
# compile time; the Linux build (`make build`) compiles each source alone.
if [ ! -f "$build/CMakeCache.txt" ]; then
  PKG_CONFIG_LIBDIR="$deps/lib/pkgconfig" cmake -S . -B "$build" "${launcher[@]}" -DCMAKE_UNITY_BUILD=ON \
    -DCMAKE_TOOLCHAIN_FILE="$root/cmake/toolchains/mingw-w64-x86_64.cmake" \
    -DCMAKE_BUILD_TYPE=Release -DCMAKE_FIND_ROOT_PATH="$deps" -DCMAKE_PREFIX_PATH="$deps" \
    -DGLSLANG_VALIDATOR="$(command -v glslangValidator)"
fi

step "build"
PKG_CONFIG_LIBDIR="$deps/lib/pkgconfig" cmake --build "$build" -j "$jobs"

# Wine's drive Z: is the Unix root (what `winepath -w` says, without starting a Wine program).
windows_path() { local p=$1; echo "Z:${p//\//\\}"; }

step "Xvfb and the Wine prefix"
display=""
for n in $(seq 90 140); do
  if [ ! -e "/tmp/.X11-unix/X$n" ] && [ ! -e "/tmp/.X$n-lock" ]; then display=$n; break; fi
done
[ -n "$display" ] || { echo "no free X display number in 90..140" >&2; exit 1; }
Xvfb ":$display" -screen 0 1024x768x24 -nolisten tcp > "$build/xvfb.log" 2>&1 &
xvfb_pid=$!
cleanup() {
  wineserver -k 2> /dev/null || true
  kill "$xvfb_pid" 2> /dev/null || true
}
trap cleanup EXIT
for _ in $(seq 1 100); do [ -e "/tmp/.X11-unix/X$display" ] && break; sleep 0.1; done
[ -e "/tmp/.X11-unix/X$display" ] || { cat "$build/xvfb.log"; echo "Xvfb did not start" >&2; exit 1; }
export DISPLAY=":$display"
# Wine's vulkan-1.dll lists no layers; the host's loader behind it enables the validation layer
# named in VK_INSTANCE_LAYERS. Wine hides VK_* variables from the .exe, so VKFORMER_LOADER_LAYERS
# tells vkformer the same, and it accepts the layer from there when the tests ask for validation.
export VK_INSTANCE_LAYERS=VK_LAYER_KHRONOS_validation
export VKFORMER_LOADER_LAYERS=$VK_INSTANCE_LAYERS
echo "Xvfb on $DISPLAY (pid $xvfb_pid), WINEPREFIX=$WINEPREFIX"
# The prefix is made (or updated) first, and complete on disk once that server has exited: a
# program started while Wine still updates its prefix waited on it, sometimes for ever. Then one
# wine server for the whole run, started here with its output to /dev/null (one started by a
# test's program would hold that test's output pipe open); -p: it stays up between programs (the
# cleanup stops it). The programs themselves run through scripts/windows/wine_run.sh.
mkdir -p "$WINEPREFIX"
# A persistent server left in this prefix by a run that was killed before its cleanup would never
# exit, and `wineserver -w` below would wait for it for ever: stop it first.
wineserver -k > /dev/null 2>&1 || true
wineboot --init > /dev/null 2>&1 || true
wineserver -w
wineserver -p > /dev/null 2>&1
# Wine closes its desktop a second after the last program using it exits; a program started as
# it closes gets no graphics driver and so no Vulkan (scripts/windows/desktop_anchor.c says
# more). One program holds the desktop for the whole run; the cleanup's `wineserver -k` ends it.
anchor="$build/desktop_anchor.exe"
x86_64-w64-mingw32-gcc-posix -O2 -Wall -Werror -o "$anchor" scripts/windows/desktop_anchor.c
rm -f "$build/desktop_anchor.ready"
wine "$anchor" "$(windows_path "$(cd "$build" && pwd)/desktop_anchor.ready")" > "$build/desktop_anchor.log" 2>&1 &
for _ in $(seq 1 600); do [ -e "$build/desktop_anchor.ready" ] && break; sleep 0.1; done
[ -e "$build/desktop_anchor.ready" ] || { cat "$build/desktop_anchor.log"; echo "desktop_anchor.exe did not start in 60 s" >&2; exit 1; }

step "models, fetched on the host"
# The tests run the fetch scripts themselves on Linux; a Windows program cannot run bash, so the
# models are fetched here and named to the tests by their variables, as Windows paths (Z:\...).
# A failed fetch stops here with the script's reason.
fetched() { "./scripts/$1" | tail -n 1; }
minilm=$(fetched fetch_minilm.sh)
smollm2=$(fetched fetch_smollm2.sh)
llama_vocabs=$(fetched fetch_llama_vocabs.sh)
VKFORMER_MINILM_DIR=$(windows_path "$minilm")
VKFORMER_SMOLLM2_GGUF=$(windows_path "$smollm2")
VKFORMER_LLAMA_VOCABS_DIR=$(windows_path "$llama_vocabs")
export VKFORMER_MINILM_DIR VKFORMER_SMOLLM2_GGUF VKFORMER_LLAMA_VOCABS_DIR
echo "VKFORMER_MINILM_DIR=$VKFORMER_MINILM_DIR"
echo "VKFORMER_SMOLLM2_GGUF=$VKFORMER_SMOLLM2_GGUF"
echo "VKFORMER_LLAMA_VOCABS_DIR=$VKFORMER_LLAMA_VOCABS_DIR"

step "vkformer.exe devices"
./scripts/windows/wine_run.sh "$build/tools/vkformer.exe" devices | tee "$build/devices.txt"
grep -q llvmpipe "$build/devices.txt" || { echo "vkformer.exe devices did not list llvmpipe" >&2; exit 1; }

step "ctest under Wine"
# install_package builds consumers with the MinGW libraries' pkg-config files.
export PKG_CONFIG_LIBDIR="$deps/lib/pkgconfig"
exclude=${WINDOWS_CTEST_EXCLUDE:-}
[ -z "$exclude" ] || echo "left out: tests matching '$exclude' (WINDOWS_CTEST_EXCLUDE)"
ctest --test-dir "$build" --output-on-failure -j"$test_jobs" ${exclude:+-E "$exclude"}
