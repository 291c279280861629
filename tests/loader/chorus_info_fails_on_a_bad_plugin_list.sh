#!/usr/bin/env bash
# A CHORUS_PLUGINS entry that names what is not there (a typo after '^', a missing file) was
# ignored or only warned about. chorus-info now fails, naming the entry and the plugins found.
set -uo pipefail
info=${1:?usage: chorus_info_fails_on_a_bad_plugin_list.sh CHORUS_INFO FAKE_PLUGIN_DIR}
dir=${2:?}
fail() { echo "FAIL: $*" >&2; exit 1; }
check() {  # check <CHORUS_PLUGINS> <expected message part>...
  local plugins=$1 output status
  shift
  output=$(CHORUS_PLUGIN_PATH="$dir" CHORUS_PLUGINS="$plugins" CHORUS_LOG_LEVEL=off \
           "$info" --plugins-only 2>&1 >/dev/null)
  status=$?
  echo "CHORUS_PLUGINS=$plugins: exit $status: $output"
  (( status == 2 )) || fail "CHORUS_PLUGINS=$plugins: chorus-info exited $status, not 2"
  for part in "$@"; do
    grep -qF -- "$part" <<<"$output" || fail "CHORUS_PLUGINS=$plugins: stderr lacks: $part"
  done
}
check "^fake_goood" "chorus-info: CHORUS_PLUGINS='^fake_goood' excludes 'fake_goood', but no" \
      "plugins found: " "fake_abi_1_0, " ", fake_good, " "Fix the name after '^' or remove the entry"
check "/missing/path.so" \
      "CHORUS_PLUGINS='/missing/path.so' names the file /missing/path.so, which does not exist" \
      "plugins found: " "fake_abi_1_0, "
echo "chorus-info failed on each bad entry, naming it and the plugins found"
