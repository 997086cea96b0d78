#!/usr/bin/env bash
# The per-suite times of a build folder's last ctest run, slowest first, and their sum: CI prints
# them after each test group (.ci/run) so that a suite which grew shows up in the log by name.
# Read from ctest's own log (Testing/Temporary/LastTest.log: "N/M Test: name" ... "Test time =");
# a suite that was cut off by its timeout has no time there and is listed as "(no time)".
#
#   scripts/ctest_times.sh [BUILD_DIR] [N]    (defaults: build, 25 rows)
set -euo pipefail
build_dir=${1:-build}
rows=${2:-25}
log="$build_dir/Testing/Temporary/LastTest.log"
if [[ ! -f "$log" ]]; then
  echo "ctest_times: no $log (ctest has not run in $build_dir)" >&2
  exit 1
fi
awk -v rows="$rows" '
  /^[0-9]+\/[0-9]+ Test: / { name = $3; seen[name] = 1; order[++n] = name; next }
  /^Test time = / && name != "" { t[name] = $4; total += $4; name = ""; next }
  END {
    m = 0
    for (i = 1; i <= n; ++i) if (order[i] in t) sorted[++m] = order[i]
    # Insertion sort by time, slowest first (POSIX awk has no sort).
    for (i = 2; i <= m; ++i) {
      x = sorted[i]; j = i - 1
      while (j >= 1 && t[sorted[j]] + 0 < t[x] + 0) { sorted[j + 1] = sorted[j]; --j }
      sorted[j + 1] = x
    }
    printf "%d suites, %.0f s of test time in all (ctest -j runs several at once)\n", n, total
    for (i = 1; i <= m && i <= rows; ++i) printf "%8.1f s  %s\n", t[sorted[i]], sorted[i]
    if (m > rows) printf "     ...  %d faster suites\n", m - rows
    for (i = 1; i <= n; ++i) if (!(order[i] in t)) printf "  (no time)  %s\n", order[i]
  }' "$log"
