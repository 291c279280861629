#!/usr/bin/env bash
# chorus-info names the collective and the cross-device ops the variables select, with why, and
# exits 2 naming the variable and the names there are when one selects nothing.
set -uo pipefail
info=${1:?usage: chorus_info_names_the_selection.sh CHORUS_INFO}
fail() { echo "chorus_info_names_the_selection: FAILED: $*" >&2; exit 1; }
run() { output=$(env -u CHORUS_CROSS_DEVICE_OPS -u CHORUS_COMMUNICATION -u CHORUS_ALGORITHM \
  -u CHORUS_TUNING_FILE "$@" "$info" 2>&1); status=$?; }

run
(( status == 0 )) || { echo "$output"; fail "with no variable set, chorus-info exited $status"; }
grep -q "^  collective (2 ranks on 1 host, host memory): [a-z_+]* \+(AUTO" <<<"$output" ||
  { echo "$output"; fail "no AUTO collective line"; }

run CHORUS_COMMUNICATION=core_ring
(( status == 0 )) || { echo "$output"; fail "CHORUS_COMMUNICATION=core_ring: exit $status"; }
grep -q "^  collective (.*): core_ring \+(CHORUS_COMMUNICATION=core_ring" <<<"$output" ||
  { echo "$output"; fail "CHORUS_COMMUNICATION=core_ring is not shown as the collective"; }

run CHORUS_COMMUNICATION=nosuch
(( status == 2 )) || { echo "$output"; fail "CHORUS_COMMUNICATION=nosuch: exit $status, want 2"; }
grep -q "^chorus-info: CHORUS_COMMUNICATION=nosuch names a collective 'nosuch'.* Available: .*core_ring" \
  <<<"$output" || { echo "$output"; fail "no error naming 'nosuch' and the collectives there are"; }

run CHORUS_CROSS_DEVICE_OPS=nosuch
(( status == 2 )) || { echo "$output"; fail "CHORUS_CROSS_DEVICE_OPS=nosuch: exit $status, want 2"; }
grep -q "^chorus-info: CHORUS_CROSS_DEVICE_OPS names cross-device ops 'nosuch'.* Available: " \
  <<<"$output" || { echo "$output"; fail "no error naming 'nosuch' and the cross-device ops"; }
echo "chorus-info named each selection and refused unknown names with exit 2"
