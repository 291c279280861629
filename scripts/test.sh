#!/usr/bin/env bash
# The whole test suite: install what is missing, then build and run CTest three ways:
#   1. release build, every test;
#   2. AddressSanitizer + UndefinedBehaviorSanitizer build, every test but the 3- and 4-worker
#      repeats of the multi-process collective sweep (the 2-worker sweep runs), the parameter-
#      server example's training (its parts have tests of their own) and the out-of-tree
#      template build (a packaging test; its plugin is not instrumented); the conformance kit
#      runs its short sweep (CHORUS_CONFORMANCE_SWEEP=short: the large count for one dtype of
#      each element size), as in 3;
#   3. ThreadSanitizer build, the threaded tests (replica threads, stores, tcp transport, the ucx
#      transport (its progress thread, four threads on one endpoint),
#      ring collective, the hierarchical collective with ranks as threads, the parameter-server
#      coordinator with its ps and worker processes, the fit loop and its metrics, the watchdog
#      over plugin calls, the checkpoint manager, a multi-worker start-up that fails;
#      cmake/tsan_suppressions.txt drops reports
#      inside Debian's gRPC and abseil, which are not built for TSan).
# The release build uses g++, the sanitizer builds Clang and lld (docs/design.md: why).
# CHORUS_TEST_QUICK=1 runs only the first.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc)

scripts/install-deps.sh

# Each phase prints its seconds, so a CI log shows where the suite's time goes.
run_preset() {
  local preset=$1
  shift
  echo "== build and test: $preset"
  local start=$SECONDS
  scripts/build-preset.sh "$preset"
  local built=$SECONDS
  ctest --preset "$preset" -j "$jobs" "$@"
  echo "== $preset: build $((built - start)) s, tests $((SECONDS - built)) s"
}

run_preset release
if [[ "${CHORUS_TEST_QUICK:-0}" != 1 ]]; then
  run_preset asan
  run_preset tsan
fi
