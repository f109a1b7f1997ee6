#!/usr/bin/env bash
# Runs every test of mlengine through CTest (docs/architecture.md, "Testing"):
#  main: in BUILD (default build/, built by `make build`): the C++ unit tests
#        and the Python suites, which start the real mlengined on port 0;
#  asan: in build-asan (clang): the unit tests under AddressSanitizer + UBSan,
#        and the libFuzzer targets of tests/fuzz, each replaying its corpus
#        and then fuzzing for MLE_FUZZ_SECONDS (default 20);
#  tsan: in build-tsan (clang): the unit tests under ThreadSanitizer.
# The sanitized trees build only the unit tests and the fuzz targets (ninja
# targets unit_tests, fuzz_targets). MLE_TEST_STEPS picks steps (default
# "main asan tsan"). Prints the wall-clock time of each step.
#
# When main runs with a sanitizer step, the sanitized trees are configured
# and built in the background, at the lowest CPU and I/O priority, while
# main's tests run: those tests spend much of their time waiting on
# processes, disks and Slurm (measured: about 40% of two cores idle, three
# quarters during the Slurm suite), and a nice 19 compiler in a scheduler
# autogroup of its own only takes what they leave. The sanitized tests run
# afterwards at normal priority. MLE_OVERLAP_BUILDS=0 builds them in turn
# instead.
set -euo pipefail
BUILD=${1:-build}
cd "$(dirname "$0")/.."
JOBS=$(nproc)
STEPS=${MLE_TEST_STEPS:-main asan tsan}
FUZZ_SECONDS=${MLE_FUZZ_SECONDS:-20}

# CTest in DIR with ARGS; when a test fails, ends with one line per failed
# test case (pytest's -rfE summary, gtest's [  FAILED  ], node's "not ok"),
# so that the last lines of a long log say what failed and why.
run_ctest() {  # DIR ARGS...
  local dir=$1 status=0
  shift
  ctest --test-dir "$dir" --output-on-failure -j "$JOBS" --timeout 600 "$@" || status=$?
  if ((status != 0)); then
    echo "run-tests: what failed in ${dir}:" >&2
    grep -h -E '^(FAILED|ERROR) |^\[  FAILED  \] [A-Za-z_].*\(|: Failure$|^not ok ' \
      "$dir/Testing/Temporary/LastTest.log" 2>/dev/null | cut -c1-300 | head -n 25 >&2 || true
  fi
  return "$status"
}

step() {
  local name=$1 start=$SECONDS
  shift
  "$@"
  echo "run-tests: ${name}: $((SECONDS - start)) s" >&2
}

# Each sanitizer's report fails the test that triggered it.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:strict_string_checks=1:detect_stack_use_after_return=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1}
export TSAN_OPTIONS=${TSAN_OPTIONS:-second_deadlock_stack=1:suppressions=$PWD/tests/tsan.supp}

LAUNCHER=
command -v ccache >/dev/null && LAUNCHER=-DCMAKE_CXX_COMPILER_LAUNCHER=ccache

# The sanitized tree of step asan or tsan: DIR SANITIZER FUZZ LABELS TARGETS...
tree() {
  case $1 in
    asan) echo build-asan address ON 'unit|fuzz' unit_tests fuzz_targets ;;
    tsan) echo build-tsan thread OFF unit unit_tests ;;
  esac
}

build_tree() {  # STEP
  local dir sanitizer fuzz labels targets
  read -r dir sanitizer fuzz labels targets <<<"$(tree "$1")"
  step "configure ${dir}" cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_CXX_COMPILER=clang++ $LAUNCHER -DMLE_SANITIZE="$sanitizer" -DMLE_FUZZ="$fuzz" \
    -DMLE_FUZZ_SECONDS="$FUZZ_SECONDS" >/dev/null
  # shellcheck disable=SC2086  # targets: words
  step "build ${dir}" cmake --build "$dir" -j "$JOBS" --target $targets
}

test_tree() {  # STEP
  local dir sanitizer fuzz labels targets
  read -r dir sanitizer fuzz labels targets <<<"$(tree "$1")"
  step "tests in ${dir}" run_ctest "$dir" -L "$labels"
}

for s in $STEPS; do
  case $s in
    main | asan | tsan) ;;
    *) echo "run-tests: unknown step $s (main, asan, tsan)" >&2; exit 2 ;;
  esac
done

# The sanitized trees' builds, in the background while main's tests run.
prebuilt=()
background=
if [[ " $STEPS " == *" main "* && ${MLE_OVERLAP_BUILDS:-1} == 1 ]]; then
  for s in $STEPS; do [[ $s != main ]] && prebuilt+=("$s"); done
fi
if ((${#prebuilt[@]})); then
  log="$BUILD/sanitized-builds.log"
  # A session of its own: its own process group, so that an early exit stops
  # the whole build, and its own scheduler autogroup, whose nice 19 is what
  # makes it yield to the tests (with autogroups, a process's nice counts
  # only against its own session; mlengined and its replicas run in theirs).
  export -f step tree build_tree
  export JOBS FUZZ_SECONDS LAUNCHER
  setsid bash -c 'set -euo pipefail; echo 19 >/proc/self/autogroup 2>/dev/null || true
    renice -n 19 -p $$ >/dev/null; ionice -c 3 -p $$ 2>/dev/null || true
    for s in "$@"; do build_tree "$s"; done' run-tests "${prebuilt[@]}" >"$log" 2>&1 &
  background=$!
  trap 'kill -TERM -- "-$background" 2>/dev/null || true' EXIT
  echo "run-tests: building ${prebuilt[*]} in the background (nice 19) while the tests of ${BUILD} run; log: $log" >&2
fi

# Waits once for the background builds; a failed one ends the run with its log's end.
await_background() {
  [[ -n $background ]] || return 0
  local start=$SECONDS status=0
  wait "$background" || status=$?
  background=
  trap - EXIT
  echo "run-tests: waited $((SECONDS - start)) s for the background builds:" >&2
  grep '^run-tests: ' "$log" >&2 || true
  if ((status != 0)); then
    echo "run-tests: a sanitized build failed (exit $status); the end of $log:" >&2
    tail -n 60 "$log" >&2
    exit "$status"
  fi
}

for s in $STEPS; do
  case $s in
    main) step "tests in ${BUILD}" run_ctest "$BUILD" ;;
    asan | tsan)
      if [[ " ${prebuilt[*]} " == *" $s "* ]]; then await_background; else build_tree "$s"; fi
      test_tree "$s"
      ;;
  esac
done
