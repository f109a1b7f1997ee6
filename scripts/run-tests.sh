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
set -euo pipefail
BUILD=${1:-build}
cd "$(dirname "$0")/.."
JOBS=$(nproc)
STEPS=${MLE_TEST_STEPS:-main asan tsan}
FUZZ_SECONDS=${MLE_FUZZ_SECONDS:-20}

step() {
  local name=$1 start=$SECONDS
  shift
  "$@"
  echo "run-tests: ${name}: $((SECONDS - start)) s" >&2
}

# Each sanitizer's report fails the test that triggered it.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:strict_string_checks=1:detect_stack_use_after_return=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1}
export TSAN_OPTIONS=${TSAN_OPTIONS:-second_deadlock_stack=1:suppressions=$(cd "$(dirname "$0")/.." && pwd)/tests/tsan.supp}

launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)

sanitized() {  # DIR SANITIZER FUZZ LABELS TARGETS...
  local dir=$1 sanitizer=$2 fuzz=$3 labels=$4
  shift 4
  step "configure ${dir}" cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_CXX_COMPILER=clang++ "${launcher[@]}" -DMLE_SANITIZE="$sanitizer" -DMLE_FUZZ="$fuzz" \
    -DMLE_FUZZ_SECONDS="$FUZZ_SECONDS" >/dev/null
  step "build ${dir}" cmake --build "$dir" -j "$JOBS" --target "$@"
  step "tests in ${dir}" ctest --test-dir "$dir" --output-on-failure -j "$JOBS" --timeout 600 -L "$labels"
}

for s in $STEPS; do
  case $s in
    main) step "tests in ${BUILD}" ctest --test-dir "$BUILD" --output-on-failure -j "$JOBS" --timeout 600 ;;
    asan) sanitized build-asan address ON 'unit|fuzz' unit_tests fuzz_targets ;;
    tsan) sanitized build-tsan thread OFF unit unit_tests ;;
    *) echo "run-tests: unknown step $s (main, asan, tsan)" >&2; exit 2 ;;
  esac
done
