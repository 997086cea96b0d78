#!/usr/bin/env bash
# Fetches llama.cpp's vocabulary-only GGUF files (models/ggml-vocab-*.gguf, with llama.cpp's own
# test vectors, the .inp/.out files) and its chat templates (models/templates/*.jinja) once into
# a cache, and prints the directory holding them as the last line of its output. They are not in
# the repository: they come from the llama-cpp-python sdist on PyPI (76 MB, the llama.cpp sources
# it vendors), through pip. The tokenizer tests compare vkformer with llama.cpp's ids for them
# (tests/golden_bpe, the .out files); the chat template test renders the templates
# (tests/golden_chat).
#
#   scripts/fetch_llama_vocabs.sh     # -> ~/.cache/vkformer/llama-vocabs
#
# The cache is ${VKFORMER_CACHE_DIR:-${XDG_CACHE_HOME:-~/.cache}/vkformer}. A second run finds
# the files and does nothing. Exits non-zero with the reason when it cannot fetch, or when a
# file is not the one the committed expectations were made from (scripts/llama_vocabs.sha256).
set -euo pipefail

SDIST=llama-cpp-python==0.3.36
MEMBER_DIR=llama_cpp_python-0.3.36/vendor/llama.cpp/models
MANIFEST="$(cd "$(dirname "$0")" && pwd)/llama_vocabs.sha256"

cache="${VKFORMER_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/vkformer}"
dest="$cache/llama-vocabs"

die() { echo "fetch_llama_vocabs: error: $*" >&2; exit 1; }
say() { echo "fetch_llama_vocabs: $*" >&2; }

all_present() {  # every file of the manifest there with its expected hash
  [[ -d "$1" ]] && (cd "$1" && sha256sum --check --status --strict "$MANIFEST") 2>/dev/null
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

tar xzf "$archive" -C "$tmp" "$MEMBER_DIR" || die "cannot unpack the vocabularies from $archive"
mv "$tmp/$MEMBER_DIR" "$tmp/final"
all_present "$tmp/final" || die "the archive's vocabularies are not the expected ones ($MANIFEST)"

# Into place in one rename, so a concurrent run sees all of it or nothing.
rm -rf "$dest.old"
[[ -e "$dest" ]] && mv "$dest" "$dest.old"
mv "$tmp/final" "$dest" || all_present "$dest" || die "cannot move the vocabularies into $dest"
rm -rf "$dest.old"
say "unpacked into $dest"
echo "$dest"
