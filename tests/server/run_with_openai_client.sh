#!/usr/bin/env bash
# Runs one of tests/server/*_test.py with the venv of scripts/fetch_openai_client.sh (the
# official openai package), fetching all-MiniLM-L6-v2 first when the test takes it.
#   run_with_openai_client.sh TEST.py VKFORMER TINY_DIR [minilm] [ARGS...]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
test=$1 vkformer=$2 tiny=$3
shift 3
python=$("$root/scripts/fetch_openai_client.sh" | tail -n 1)
args=()
for a in "$@"; do
  if [[ $a == minilm ]]; then
    args+=("${VKFORMER_MINILM_DIR:-$("$root/scripts/fetch_minilm.sh" | tail -n 1)}")
  else
    args+=("$a")
  fi
done
cd "$here"
exec "$python" -u "$here/$test" "$vkformer" "$tiny" "${args[@]}"
