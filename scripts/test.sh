#!/usr/bin/env bash
# The whole test suite: install what is missing, then build and run CTest three ways:
#   1. release build (GCC, unity build; the tests' own code at -Og), every test: the full sweeps
#      and the training runs;
#   2. AddressSanitizer + UndefinedBehaviorSanitizer build (Clang, unity build), every
#      interface and every plugin, without the runs that repeat code already under ASan at more
#      sizes, backends or steps (the `asan` test preset's exclude filter); the conformance kit
#      runs its short sweep (CHORUS_CONFORMANCE_SWEEP=short);
#   3. ThreadSanitizer build (Clang, unity build), the threaded tests the `tsan` test preset
#      lists; cmake/tsan_suppressions.txt drops reports inside Debian's gRPC and abseil, which
#      are not built for TSan.
# docs/design.md ("What the test suite runs in which build") says why each build runs what it runs.
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
