#!/usr/bin/env bash
# expect_abi.sh <major.minor> <chorus-conformance> <its arguments...>: runs the kit and fails
# unless it passed and reported the plugin's ABI as <major.minor>.
set -uo pipefail
want=${1:?usage: expect_abi.sh MAJOR.MINOR CHORUS_CONFORMANCE ARGS...}
shift
output=$("$@" 2>&1)
status=$?
echo "$output"
(( status == 0 )) || { echo "FAIL: the kit exited $status" >&2; exit 1; }
grep -q ", ABI $want (kit ABI" <<<"$output" ||
  { echo "FAIL: the kit did not report ABI $want for the plugin" >&2; exit 1; }
echo "the kit passed a plugin built for ABI $want"
