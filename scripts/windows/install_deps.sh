#!/usr/bin/env bash
# Installs what `make test-windows` needs beyond scripts/install_deps.sh, only if missing: the
# MinGW-w64 cross compiler, Wine and Xvfb, and what scripts/windows/build_deps.sh uses (Debian's
# source packages, so a deb-src line for bookworm main; GoogleTest's sources; RE2's table
# generators' inputs).
set -euo pipefail
"$(dirname "$0")/../install_deps.sh"
packages=(g++-mingw-w64-x86-64-posix wine wine64 xvfb xauth dpkg-dev googletest unicode-data
  python3-six perl nlohmann-json3-dev libcli11-dev libvulkan-dev)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2> /dev/null | grep -q "install ok installed" || missing+=("$p")
done
sudo=""
[ "$(id -u)" = 0 ] || sudo=sudo
src_list=/etc/apt/sources.list.d/vkformer-deb-src.sources
if ! grep -rqs '^Types:.*deb-src\|^deb-src' /etc/apt/sources.list /etc/apt/sources.list.d/; then
  echo "adding $src_list (Debian's source packages, for apt-get source utf8proc re2)"
  printf '%s\n' "Types: deb-src" "URIs: http://deb.debian.org/debian" "Suites: bookworm" \
    "Components: main" "Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg" |
    $sudo tee "$src_list" > /dev/null
  need_update=1
fi
if [ ${#missing[@]} -gt 0 ] || [ -n "${need_update:-}" ]; then
  $sudo apt-get update -qq
fi
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing: ${missing[*]}"
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}"
fi
