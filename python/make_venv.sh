#!/usr/bin/env bash
# Makes (once) the Python environment that builds vkformer's Python module and runs its tests,
# and prints its interpreter as the last line of its output. CMake's configure step runs it
# when tests are built (python/CMakeLists.txt); a second run finds the venv and takes well under
# a second.
#
#   python/make_venv.sh     # -> ~/.cache/vkformer/python-venv-3.11/bin/python
#
# Debian's python3 (/usr/bin/python3, python3-venv, python3-dev) with its numpy (python3-numpy),
# so only nanobind and pytest come from PyPI, at pinned versions. PYTHON=... picks another
# interpreter. The cache is ${VKFORMER_CACHE_DIR:-${XDG_CACHE_HOME:-~/.cache}/vkformer}.
set -euo pipefail

REQUIREMENTS=(nanobind==3.1.0 pytest==9.2.0)
python=${PYTHON:-/usr/bin/python3}
[[ -x "$python" ]] || python=$(command -v python3) || { echo "make_venv: error: no python3" >&2; exit 1; }

die() { echo "make_venv: error: $*" >&2; exit 1; }
say() { echo "make_venv: $*" >&2; }

version=$("$python" -c 'import sys; print("%d.%d" % sys.version_info[:2])') || die "$python does not run"
cache="${VKFORMER_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/vkformer}"
venv="$cache/python-venv-$version"
stamp="$venv/.requirements"

# The stamp names what was installed: a changed pin makes the venv again.
if [[ -x "$venv/bin/python" && -f "$stamp" && "$(cat "$stamp")" == "${REQUIREMENTS[*]}" ]]; then
  echo "$venv/bin/python"
  exit 0
fi

say "making $venv (${REQUIREMENTS[*]} from PyPI; numpy from $python)"
mkdir -p "$cache" || die "cannot create $cache"
rm -rf "$venv"
# --system-site-packages: Debian's numpy, so no 16 MB numpy wheel is downloaded.
"$python" -m venv --system-site-packages "$venv" ||
  die "$python -m venv failed (Debian: apt-get install python3-venv)"
pins="${REQUIREMENTS[*]}"
"$venv/bin/python" -c 'import numpy' 2>/dev/null || REQUIREMENTS+=(numpy)
"$venv/bin/python" -m pip install --disable-pip-version-check --no-input --progress-bar on \
  "${REQUIREMENTS[@]}" >&2 || die "pip install ${REQUIREMENTS[*]} failed (see pip's message above; is PyPI reachable?)"
echo "$pins" > "$stamp"
echo "$venv/bin/python"
