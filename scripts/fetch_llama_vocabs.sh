#!/usr/bin/env bash
# Fetches llama.cpp's vocabulary-only GGUF files for the gpt-2, llama-bpe (Llama 3), qwen2 and
# falcon tokenizers once into a cache, and prints the directory holding them as the last line of
# its output. They are not in the repository: they come from the llama-cpp-python sdist on PyPI
# (76 MB, the llama.cpp sources it vendors, models/ggml-vocab-*.gguf), through pip. The BPE
# tokenizer test compares vkformer with llama.cpp's ids for them (tests/golden_bpe).
#
#   scripts/fetch_llama_vocabs.sh     # -> ~/.cache/vkformer/llama-vocabs
#
# The cache is ${VKFORMER_CACHE_DIR:-${XDG_CACHE_HOME:-~/.cache}/vkformer}. A second run finds
# the files and does nothing. Exits non-zero with the reason when it cannot fetch, or when a
# file is not the one the committed expectations were made from.
set -euo pipefail

SDIST=llama-cpp-python==0.3.36
MEMBER_DIR=llama_cpp_python-0.3.36/vendor/llama.cpp/models
FILES=(
  "ggml-vocab-gpt-2.gguf cedc56ca6e2e89f63e781696d1fd76b4b1d49e6720dee86463e915f6e90016ac"
  "ggml-vocab-llama-bpe.gguf 97272e430d53bc7688f52d5e0ad8ea8f163ede9f1bbd1694feaa504797d5d96e"
  "ggml-vocab-qwen2.gguf 44c2f46b715f585c6ab513970e8a006bfa5badd6108560054921cf598d154d8c"
  "ggml-vocab-falcon.gguf 9f0bf8b0733680398b72e652e90f260f43782f326e75545fc0e49611a5ba35ad"
)

cache="${VKFORMER_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/vkformer}"
dest="$cache/llama-vocabs"

die() { echo "fetch_llama_vocabs: error: $*" >&2; exit 1; }
say() { echo "fetch_llama_vocabs: $*" >&2; }

all_present() {  # every file there with its expected hash
  local dir="$1" entry
  for entry in "${FILES[@]}"; do
    set -- $entry
    [[ -f "$dir/$1" ]] && echo "$2  $dir/$1" | sha256sum --check --status || return 1
  done
}

if all_present "$dest"; then
  echo "$dest"
  exit 0
fi

command -v python3 >/dev/null || die "python3 not found (needed for pip)"
python3 -m pip --version >/dev/null 2>&1 ||
  die "python3 -m pip is not available: install it (Debian: apt-get install python3-pip)"
mkdir -p "$cache" || die "cannot create the cache directory $cache"
tmp=$(mktemp -d "$cache/.fetch.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

say "downloading the $SDIST source archive (76 MB) with pip into $cache"
python3 -m pip download --no-deps --no-binary :all: --disable-pip-version-check --no-input -q \
  -d "$tmp/sdist" "$SDIST" >&2 ||
  die "pip download $SDIST failed (see pip's message above; is PyPI reachable?)"
archive=$(ls "$tmp"/sdist/*.tar.gz 2>/dev/null | head -n1)
[[ -n "$archive" ]] || die "pip download left no source archive in $tmp/sdist"

members=()
for entry in "${FILES[@]}"; do
  set -- $entry
  members+=("$MEMBER_DIR/$1")
done
tar xzf "$archive" -C "$tmp" "${members[@]}" || die "cannot unpack the vocabularies from $archive"
mkdir -p "$tmp/final"
for entry in "${FILES[@]}"; do
  set -- $entry
  mv "$tmp/$MEMBER_DIR/$1" "$tmp/final/$1"
done
all_present "$tmp/final" || die "the archive's vocabularies are not the expected ones"

# Into place in one rename, so a concurrent run sees all of it or nothing.
rm -rf "$dest.old"
[[ -e "$dest" ]] && mv "$dest" "$dest.old"
mv "$tmp/final" "$dest" || all_present "$dest" || die "cannot move the vocabularies into $dest"
rm -rf "$dest.old"
say "unpacked into $dest"
echo "$dest"
