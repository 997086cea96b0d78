#!/usr/bin/env bash
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
#
# A hang is a failure that says where: a program still running after VKFORMER_WINE_TIMEOUT
# seconds (840, below ctest's 900) has its threads described (winedbg's backtraces of every
# Windows thread, and each Linux thread's kernel wait) and is then stopped here rather than by
# ctest, so that its output so far (GoogleTest names each test as it starts) is shown too.
limit=${VKFORMER_WINE_TIMEOUT:-840}
tmp=$(mktemp -d) || exit 125
trap 'rm -rf "$tmp"' EXIT

describe_threads() {  # the program's process (timeout's child) and every wine process's threads
  echo "=== wine_run.sh: $1 still running after $2 s; its threads:"
  for pid in $(pgrep -f 'wineserver|\.exe' ; pgrep -P "$3"); do
    for task in /proc/"$pid"/task/*; do
      [ -r "$task/stat" ] || continue
      printf '%s/%s %s state=%s wchan=%s\n' "$pid" "${task##*/}" "$(tr -d '\n' < "$task/comm")" \
        "$(awk '{print $3}' "$task/stat")" "$(cat "$task/wchan" 2>/dev/null)"
    done
  done
  echo "=== winedbg bt all:"
  timeout 60 winedbg --command "bt all" 2>&1 | head -n 400
}

# A command run in the background reads /dev/null, not this script's input: the program gets that
# through fd 3 (`vkformer chat < turns.txt`).
exec 3<&0
timeout --kill-after=10 "$limit" wine "$@" <&3 3<&- > "$tmp/out" 2> "$tmp/err" &
runner=$!
# Polls once a second, so it ends by itself soon after the program (no process outlives this
# script holding ctest's pipes).
(
  for _ in $(seq $((limit > 30 ? limit - 30 : 1))); do
    kill -0 "$runner" 2> /dev/null || exit 0
    sleep 1
  done
  kill -0 "$runner" 2> /dev/null && describe_threads "$1" "$((limit - 30))" "$runner"
) > "$tmp/threads" 2>&1 < /dev/null &
reporter=$!
wait "$runner"
status=$?
wait "$reporter"
cat "$tmp/out"
cat "$tmp/err" >&2
if [ "$status" -eq 124 ] || [ "$status" -eq 137 ]; then
  cat "$tmp/threads" >&2
  echo "wine_run.sh: $1 was still running after $limit s and was stopped (its output so far is above)" >&2
fi
exit "$status"
