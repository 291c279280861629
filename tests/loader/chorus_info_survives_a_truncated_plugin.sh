#!/usr/bin/env bash
# A plugin file cut short (an interrupted copy) used to kill chorus-info with SIGBUS inside dlopen,
# with no message. Now chorus-info lists it as rejected, with why, and exits 0.
set -uo pipefail
info=${1:?usage: chorus_info_survives_a_truncated_plugin.sh CHORUS_INFO REAL_PLUGIN_FILE}
plugin=${2:?}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
head -c 4096 "$plugin" >"$dir/libchorus-shm2.so"
output=$(CHORUS_PLUGIN_PATH="$dir" CHORUS_LOG_LEVEL=off "$info" --plugins-only 2>&1)
status=$?
echo "$output"
fail() { echo "FAIL: $*" >&2; exit 1; }
(( status < 128 )) || fail "chorus-info was killed by signal $((status - 128))"
(( status == 0 )) || fail "chorus-info exited $status"
# chorus-info wraps its lines at 100 columns: compare with runs of blanks and line ends as one space.
flat=$(tr -s ' \n' '  ' <<<"$output")
expect() { grep -qF -- "$(tr -s ' ' <<<"$1")" <<<"$flat" || fail "output lacks: $1"; }
expect "  $dir/libchorus-shm2.so"
expect "reason: libchorus-shm2.so is truncated: its loadable segment "
expect " but the file has 4096 bytes; reinstall the plugin or remove it from the plugin folders"
echo "chorus-info listed the truncated plugin with its reason and exited 0"
