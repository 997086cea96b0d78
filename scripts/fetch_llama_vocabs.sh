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

name=fetch_llama_vocabs
. "$(dirname "$0")/fetch_lib.sh"
dest="$cache/llama-vocabs"

all_present() {  # every file of the manifest there with its expected hash
  [[ -d "$1" ]] && (cd "$1" && sha256sum --check --status --strict "$MANIFEST") 2>/dev/null
}

if all_present "$dest"; then
  echo "$dest"
  exit 0
fi

pip_download "$SDIST" "76 MB, a source archive" --no-binary :all: -q
archive=$downloaded

tar xzf "$archive" -C "$tmp" "$MEMBER_DIR" || die "cannot unpack the vocabularies from $archive"
mv "$tmp/$MEMBER_DIR" "$tmp/final"
all_present "$tmp/final" || die "the archive's vocabularies are not the expected ones ($MANIFEST)"

move_into_place "$tmp/final" "$dest" all_present "$dest"
say "unpacked into $dest"
echo "$dest"
