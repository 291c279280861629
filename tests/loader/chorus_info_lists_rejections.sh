#!/usr/bin/env bash
# chorus-info pointed at a folder of broken plugins lists each with its reason and exits 0.
set -uo pipefail
info=${1:?usage: chorus_info_lists_rejections.sh CHORUS_INFO FAKE_PLUGIN_DIR}
dir=${2:?}
output=$(CHORUS_PLUGIN_PATH="$dir" CHORUS_LOG_LEVEL=off "$info" 2>&1)
status=$?
echo "$output"
fail() { echo "FAIL: $*" >&2; exit 1; }
(( status == 0 )) || fail "chorus-info exited $status"
# chorus-info wraps its lines at 100 columns: compare with runs of blanks and line ends as one space.
flat=$(tr -s ' \n' '  ' <<<"$output")
expect() { grep -qF -- "$(tr -s ' ' <<<"$1")" <<<"$flat" || fail "output lacks: $1"; }
expect "fake_good  ABI 1.6"
expect "provides: cross_device_ops(fake_good_ops)"
expect "fake_newer_minor  ABI 1.7"
for broken in fake_other_major fake_no_entry fake_init_fails fake_entry_throws fake_entry_null \
              fake_tiny_table fake_null_init fake_misnamed not_a_library; do
  expect "$dir/libchorus-$broken.so"
done
expect "reason: built for chorus ABI 2."
expect "reason: does not export chorus_plugin_get()"
expect "reason: its init() failed with UNAVAILABLE: no fake device on this machine"
expect "reason: libchorus-not_a_library.so is not an ELF file"
expect "Rejected candidates (9)"
echo "chorus-info listed every rejected candidate with its reason and exited 0"
