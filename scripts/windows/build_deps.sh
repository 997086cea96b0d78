#!/usr/bin/env bash
# Builds the third-party libraries vkformer needs for Windows (MinGW-w64) into a prefix, once:
#   utf8proc and RE2 from Debian's source packages (apt-get source), cpp-httplib's single header
#   from its Debian source package (Debian's -dev package has the header split from a compiled
#   library, which MinGW cannot link), GoogleTest from Debian's
#   /usr/src/googletest (package googletest), and the header-only nlohmann_json, CLI11 and Vulkan
#   headers copied from Debian's -dev packages (they are the same for every platform).
# Usage: scripts/windows/build_deps.sh PREFIX. A prefix holding a stamp of the same recipe is
# reused as it is (CI caches it under ~/.cache/vkformer/windows-deps).
set -euo pipefail
prefix=${1:?usage: build_deps.sh PREFIX}
root=$(cd "$(dirname "$0")/../.." && pwd)
toolchain=$root/cmake/toolchains/mingw-w64-x86_64.cmake
recipe=$(cat "$0" "$toolchain" | sha256sum | cut -c1-16)
if [ -f "$prefix/.vkformer-deps-$recipe" ]; then
  echo "Windows dependencies: $prefix (cached)"
  exit 0
fi
rm -rf "$prefix"
mkdir -p "$prefix"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
jobs=$(nproc 2>/dev/null || echo 2)

cmake_build() {  # cmake_build SOURCE_DIR [cmake options...]
  local src=$1
  shift
  cmake -S "$src" -B "$work/build-$(basename "$src")" -DCMAKE_TOOLCHAIN_FILE="$toolchain" \
    -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX="$prefix" -DBUILD_SHARED_LIBS=OFF \
    "$@" > "$work/configure.log" || { cat "$work/configure.log"; exit 1; }
  cmake --build "$work/build-$(basename "$src")" -j "$jobs" > "$work/build.log" ||
    { tail -n 50 "$work/build.log"; exit 1; }
  cmake --install "$work/build-$(basename "$src")" > /dev/null
}

echo "Windows dependencies: sources of utf8proc and re2 (apt-get source)"
(cd "$work" && apt-get source --download-only utf8proc re2 cpp-httplib > "$work/source.log" 2>&1) ||
  { cat "$work/source.log"; echo "apt-get source failed: are deb-src lines configured?" \
    "(scripts/windows/install_deps.sh adds them)" >&2; exit 1; }
(cd "$work" && for dsc in utf8proc_*.dsc re2_*.dsc cpp-httplib_*.dsc; do dpkg-source -x "$dsc" > /dev/null; done)

echo "Windows dependencies: utf8proc"
cmake_build "$(ls -d "$work"/utf8proc-*/ | head -n1)" -DUTF8PROC_INSTALL=ON -DUTF8PROC_ENABLE_TESTING=OFF

echo "Windows dependencies: re2"
re2_src=$(ls -d "$work"/re2-*/ | head -n1)
# Debian's source leaves out the generated tables; its build makes them from package unicode-data
# (its patch points re2/unicode.py there), as we do.
(cd "$re2_src" && perl re2/make_perl_groups.pl > re2/perl_groups.cc &&
  /usr/bin/python3 re2/make_unicode_casefold.py > re2/unicode_casefold.cc &&
  /usr/bin/python3 re2/make_unicode_groups.py > re2/unicode_groups.cc)
cmake_build "$re2_src" -DRE2_BUILD_TESTING=OFF
re2_version=$(cd "$work" && ls re2_*.dsc | sed 's/re2_\([0-9]*\).*/\1/')
mkdir -p "$prefix/lib/pkgconfig"
cat > "$prefix/lib/pkgconfig/re2.pc" <<PC
prefix=$prefix
Name: re2
Description: RE2 (MinGW-w64 static build for vkformer)
Version: $re2_version
Cflags: -I\${prefix}/include
Libs: -L\${prefix}/lib -lre2
PC

echo "Windows dependencies: cpp-httplib (one header, no TLS)"
httplib_src=$(ls -d "$work"/cpp-httplib-*/ | head -n1)
httplib_version=$(cd "$work" && ls cpp-httplib_*.dsc | sed 's/cpp-httplib_\([0-9.]*\).*/\1/')
mkdir -p "$prefix/include" "$prefix/lib/pkgconfig"
cp "$httplib_src/httplib.h" "$prefix/include/"
cat > "$prefix/lib/pkgconfig/cpp-httplib.pc" <<PC
prefix=$prefix
Name: cpp-httplib
Description: cpp-httplib, header-only (MinGW-w64 build for vkformer)
Version: $httplib_version
Cflags: -I\${prefix}/include
Libs: -lws2_32
PC

echo "Windows dependencies: googletest (/usr/src/googletest)"
[ -d /usr/src/googletest ] || { echo "/usr/src/googletest is missing: apt-get install googletest" >&2; exit 1; }
cmake_build /usr/src/googletest -DBUILD_GMOCK=OFF -Dgtest_force_shared_crt=ON

echo "Windows dependencies: headers of nlohmann_json, CLI11 and Vulkan"
mkdir -p "$prefix/include" "$prefix/share/cmake"
cp -r /usr/include/nlohmann /usr/include/CLI /usr/include/vulkan /usr/include/vk_video "$prefix/include/"
cp -r /usr/share/cmake/nlohmann_json /usr/share/cmake/CLI11 "$prefix/share/cmake/"

touch "$prefix/.vkformer-deps-$recipe"
echo "Windows dependencies: $prefix"
