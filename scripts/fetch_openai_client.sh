#!/usr/bin/env bash
# Makes a Python virtual environment with the official `openai` client (PyPI) once, in a cache,
# and prints its python as the last line of its output. tests/server/ drive `vkformer serve`
# with it. pip keeps its downloads in its own cache (~/.cache/pip), so a remade venv is fast.
#
#   scripts/fetch_openai_client.sh   # -> ~/.cache/vkformer/openai-client-3.57.0/bin/python
#
# The cache is ${VKFORMER_CACHE_DIR:-${XDG_CACHE_HOME:-~/.cache}/vkformer}. Needs Debian's
# python3 with venv (python3-venv or python3.11-venv's ensurepip) and PyPI; exits non-zero with
# the reason otherwise.
set -euo pipefail

VERSION=3.57.0
# numpy and gguf (with pyyaml, what its reader imports) read the test data and the GGUF's vocabulary.
EXTRA=(numpy==2.4.6 pyyaml==6.0.4)
GGUF=gguf==0.19.0
cache="${VKFORMER_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/vkformer}"
dest="$cache/openai-client-$VERSION"
python=/usr/bin/python3
[[ -x $python ]] || python=$(command -v python3)

die() { echo "fetch_openai_client: error: $*" >&2; exit 1; }

works() { [[ -x "$1/bin/python" ]] && "$1/bin/python" -c "import openai, numpy, gguf; assert openai.__version__ == '$VERSION'" 2>/dev/null; }

if works "$dest"; then
  echo "$dest/bin/python"
  exit 0
fi
mkdir -p "$cache" || die "cannot create the cache directory $cache"
# ctest runs the server tests in parallel: one makes the venv, the others wait for it (a second
# maker would replace the venv under the first one's running python).
exec 9> "$cache/.openai-client.lock"
flock -w 900 9 || die "another fetch_openai_client.sh held $cache/.openai-client.lock for 15 minutes"
if works "$dest"; then
  echo "$dest/bin/python"
  exit 0
fi
tmp=$(mktemp -d "$cache/.openai-client.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
# The venv is made where it will stay (a venv's scripts name their own path), under a temporary
# name first so a half-made one is never used.
"$python" -m venv "$tmp/venv" >&2 || die "python3 -m venv failed (Debian: apt-get install python3-venv)"
"$tmp/venv/bin/python" -m pip install --disable-pip-version-check --no-input -q --timeout 30 \
  "openai==$VERSION" "${EXTRA[@]}" >&2 || die "pip install openai==$VERSION ${EXTRA[*]} failed (see pip's message above; is PyPI reachable?)"
# --no-deps: gguf's own requirements (requests, tqdm) are for its scripts, not its reader.
"$tmp/venv/bin/python" -m pip install --disable-pip-version-check --no-input -q --timeout 30 --no-deps "$GGUF" >&2 ||
  die "pip install $GGUF failed (see pip's message above)"
rm -rf "$dest"
mv -T "$tmp/venv" "$dest" || die "cannot move the venv to $dest"
# A moved venv's bin/ scripts keep the old path; the test runs bin/python -m, which does not care.
works "$dest" || die "the venv in $dest does not import openai $VERSION"
echo "fetch_openai_client: openai $VERSION is in $dest" >&2
echo "$dest/bin/python"
