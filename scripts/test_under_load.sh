#!/usr/bin/env bash
# The test suite on a busy machine (issue 40; `make test-under-load`, docs/testing.md): ctest with
# twice as many jobs as cores while one busy process per core competes, RUNS times in a row,
# then every failure with its test and run. A test that passes on a quiet machine and fails here
# depends on timing (a fixed sleep, a tight wall-clock bound, a race): a bug to fix.
#
#   scripts/test_under_load.sh                              # the whole suite, 5 runs
#   RUNS=50 TESTS=serve_hostile_requests scripts/test_under_load.sh   # one test, 50 runs
#
# Variables: BUILD_DIR (build), RUNS (5), TESTS (a ctest -R regular expression; all tests when
# unset), JOBS (ctest -j: 2 x cores), HOGS (busy processes: one per core), LOG_DIR
# ($BUILD_DIR/test-under-load). Arguments are passed on to ctest (e.g. -E cli_bench).
# Exit status 0 when every run passed, 1 when one failed, 2 for a usage error. The busy processes
# are stopped however it ends (a failure, Ctrl-C, SIGTERM).
set -u

cores=$(nproc 2>/dev/null || echo 2)
BUILD_DIR=${BUILD_DIR:-build}
RUNS=${RUNS:-5}
TESTS=${TESTS:-}
JOBS=${JOBS:-$((2 * cores))}
HOGS=${HOGS:-$cores}
LOG_DIR=${LOG_DIR:-$BUILD_DIR/test-under-load}
CTEST=${CTEST:-ctest}

die() { echo "test_under_load.sh: error: $*" >&2; exit 2; }
for v in RUNS JOBS HOGS; do
  [[ ${!v} =~ ^[0-9]+$ ]] || die "$v=${!v} is not a whole number"
done
((RUNS >= 1)) || die "RUNS=$RUNS: at least one run"
((JOBS >= 1)) || die "JOBS=$JOBS: at least one ctest job"
[[ -f $BUILD_DIR/CTestTestfile.cmake ]] ||
  die "$BUILD_DIR/ has no tests: build it first (make build, or set BUILD_DIR)"
mkdir -p "$LOG_DIR" || die "cannot make $LOG_DIR"
if [[ -n $TESTS ]]; then
  listed=$("$CTEST" --test-dir "$BUILD_DIR" -N -R "$TESTS" "$@" | sed -n 's/^Total Tests: //p')
  [[ ${listed:-0} -gt 0 ]] || die "TESTS='$TESTS' matches no test of $BUILD_DIR (ctest -N -R)"
fi

# The load: a shell spinning on one core each, stopped by their ids on every way out; each also
# stops by itself once this script is gone (killed with SIGKILL, say), checking every ~0.05 s.
hogs=()
stop_hogs() {
  ((${#hogs[@]})) && kill "${hogs[@]}" 2>/dev/null && wait "${hogs[@]}" 2>/dev/null
  hogs=()
}
# ctest runs as a job of its own (job control: its own process group, SIGINT not ignored as it
# would be in a background command without job control), so a signal to this script reaches it
# at once: Ctrl-C or SIGTERM is passed on to ctest and its tests, then everything stops.
set -m
ctest_pid=
stop_ctest() {
  [[ -n $ctest_pid ]] && kill -"$1" -- -"$ctest_pid" 2>/dev/null && wait "$ctest_pid" 2>/dev/null
  ctest_pid=
}
trap stop_hogs EXIT
trap 'echo "test_under_load.sh: interrupted" >&2; stop_ctest INT; exit 130' INT
trap 'stop_ctest TERM; exit 143' TERM
for ((h = 0; h < HOGS; h++)); do
  bash -c "while kill -0 $$ 2>/dev/null; do for ((i = 0; i < 20000; i++)); do :; done; done" &
  hogs+=($!)
done

filter=()
[[ -n $TESTS ]] && filter=(-R "$TESTS")
what="ctest -j$JOBS${filter[*]:+ ${filter[*]}}${*:+ $*}"
echo "test_under_load.sh: $RUNS run(s) of $what against $HOGS busy processes on $cores cores" \
  "(load now: $(cut -d' ' -f1-3 /proc/loadavg)); logs in $LOG_DIR"

# What a failed test's output says went wrong (from ctest's JUnit file): a line that names a
# failure (FAIL:, GoogleTest's [  FAILED  ], CMake Error, an exception), else its last line.
first_failure_line() {  # junit.xml test-name
  python3 - "$1" "$2" <<'PY' 2>/dev/null
import re, sys, xml.etree.ElementTree as ET
for case in ET.parse(sys.argv[1]).getroot().iter("testcase"):
    if case.get("name") != sys.argv[2]:
        continue
    lines = [l.strip() for l in "".join(e.text or "" for e in case.iter("system-out")).splitlines() if l.strip()]
    for pattern in (r"^FAIL|^\[  FAILED  \] [A-Za-z]|^CMake Error|SEND_ERROR|AssertionError|^E {3}",
                    r"^[A-Za-z.]+(Error|Exception): |[Ff]ailure"):
        hit = next((l for l in lines if re.search(pattern, l)), None)
        if hit:
            print(hit[:240])
            break
    else:
        if lines:
            print("its last line: " + lines[-1][:220])
PY
}

summary=()
failures=()   # "test<TAB>run<TAB>status" for each failed test of each run
failed_runs=0
for ((run = 1; run <= RUNS; run++)); do
  log="$LOG_DIR/run-$run.log"
  began=$(date +%s)
  junit="$(cd "$LOG_DIR" && pwd)/run-$run.xml"
  rm -f "$junit"
  "$CTEST" --test-dir "$BUILD_DIR" --output-on-failure --output-junit "$junit" -j"$JOBS" "${filter[@]}" "$@" \
    >"$log" 2>&1 &
  ctest_pid=$!
  wait "$ctest_pid"
  rc=$?
  ctest_pid=
  took=$(($(date +%s) - began))
  passed=$(sed -n 's/^[0-9]*% tests passed, \([0-9]*\) tests failed out of \([0-9]*\)$/\2 \1/p' "$log" |
           awk '{print $1 - $2 "/" $1}')
  # ctest's closing list: "  12 - serve_hostile_requests (Failed)"
  mapfile -t failed < <(sed -n '/^The following tests FAILED:/,$ s/^[[:space:]]*[0-9]* - \(.*\) (\(.*\))$/\1\t\2/p' "$log")
  if ((rc != 0)); then
    failed_runs=$((failed_runs + 1))
    ((${#failed[@]})) || failed=("(ctest itself)	exit status $rc")
    for f in "${failed[@]}"; do
      name=${f%%	*}
      detail=$([[ -f $junit ]] && first_failure_line "$junit" "$name")
      failures+=("$name	$run	${f#*	}	${detail:-see the log}")
    done
  fi
  # The slowest test: how close the load brings it to its TIMEOUT (ctest's "... Passed  512.3 sec").
  slowest=$(sed -n 's/^ *[0-9]*\/[0-9]* Test *#[0-9]*: \([^ ]*\) .* \([0-9.]*\) sec$/\2 \1/p' "$log" | sort -rn | head -1)
  line=$(printf 'run %d: %s, %s passed, %d s (load %s; slowest %s)' "$run" "$([[ $rc == 0 ]] && echo ok || echo FAILED)" \
         "${passed:-?}" "$took" "$(cut -d' ' -f1 /proc/loadavg)" "${slowest:+${slowest#* } ${slowest%% *} s}")
  ((${#failed[@]})) && [[ $rc != 0 ]] && line+=": $(printf '%s, ' "${failed[@]%%	*}" | sed 's/, $//')"
  echo "$line"
  summary+=("$line")
done
stop_hogs

{
  echo ""
  echo "test_under_load.sh summary: $((RUNS - failed_runs)) of $RUNS run(s) passed ($what," \
       "$HOGS busy processes, $cores cores)"
  printf '  %s\n' "${summary[@]}"
  if ((${#failures[@]})); then
    echo "Failures by test (each run's output is in $LOG_DIR/run-N.log):"
    printf '%s\n' "${failures[@]}" | sort -t$'\t' -k1,1 -k2,2n |
      awk -F'\t' '
        $1 != name { name = $1; print "  " name ":" }
        { print "    run " $2 " (" $3 "): " $4 }'
  fi
} | tee "$LOG_DIR/summary.txt"
((failed_runs == 0))
