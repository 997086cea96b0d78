#!/bin/sh
# wine_run.sh PROGRAM.exe [ARGS...]: runs a Windows program under Wine for ctest and the tool's
# checks (the toolchain file's CMAKE_CROSSCOMPILING_EMULATOR), with its exit status, standard
# output and standard error.
#
# Why not plain `wine`: Wine starts its helper processes (services.exe, explorer.exe /desktop,
# wineboot.exe) on demand from whichever program needs them first, and they inherit that
# program's standard output and error. Under ctest those are the test's pipes, so ctest waited
# for the helpers to exit, 20 s after each test that used Vulkan, or forever. Here the program
# writes to files, which the helpers may keep, and this script copies them out when it ends
# (stdout first, then stderr: the two are not interleaved).
out=$(mktemp) || exit 125
err=$(mktemp) || { rm -f "$out"; exit 125; }
trap 'rm -f "$out" "$err"' EXIT
wine "$@" > "$out" 2> "$err"
status=$?
cat "$out"
cat "$err" >&2
exit "$status"
