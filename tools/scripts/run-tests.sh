#!/usr/bin/env bash
# README command 2: install what is missing, build, run every test.
#   tools/scripts/run-tests.sh            release build, then AddressSanitizer +
#                                 UndefinedBehaviorSanitizer, then ThreadSanitizer
#   tools/scripts/run-tests.sh release    one flavour only (release, asan or tsan)
# Exits non-zero on any failure.
set -euo pipefail
cd "$(dirname "$0")/../.."
bash tools/scripts/install-deps.sh --tests

flavours=("$@")
[ ${#flavours[@]} -eq 0 ] && flavours=(release asan tsan)

export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:suppressions=$PWD/tools/scripts/tsan.supp"

for flavour in "${flavours[@]}"; do
  echo "=== run-tests: $flavour build"
  bash tools/scripts/build.sh "$flavour"
  case "$flavour" in release) dir=build ;; *) dir="build-$flavour" ;; esac
  echo "=== run-tests: $flavour tests"
  if ! (cd "$dir" && ctest --output-on-failure -j "$(nproc)"); then
    # A failing test's output can be long, and a reader of a log's tail sees
    # only its name; say here which cases failed and what they said.
    echo "=== run-tests: $flavour failed; the failing cases and their messages:"
    grep -E -A6 '^\[  FAILED  \]|: Failure$|ERROR: (Address|Thread|Undefined)|runtime error:|WARNING: ThreadSanitizer' \
      "$dir/Testing/Temporary/LastTest.log" | head -120 || true
    exit 1
  fi
done
echo "=== run-tests: all passed (${flavours[*]})"
