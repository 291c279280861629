#!/usr/bin/env bash
# Folders of CHORUS_PLUGIN_PATH that exist but cannot be listed (a file, a loop of links, a folder
# without permissions) were skipped silently. chorus-info now marks each, with why, and still
# loads the plugins of the other folders. Root reads a folder of mode 000, so that case runs as
# nobody through setpriv when the tests run as root, and is skipped (with a note) where it cannot.
set -uo pipefail
info=${1:?usage: chorus_info_lists_unreadable_folders.sh CHORUS_INFO FAKE_PLUGIN_DIR}
plugins=${2:?}
dir=$(mktemp -d)
trap 'chmod 700 "$dir/locked" 2>/dev/null; rm -rf "$dir"' EXIT
chmod 755 "$dir"
echo "not a folder" >"$dir/a_file"
ln -s loop "$dir/loop"
mkdir "$dir/locked"
chmod 000 "$dir/locked"

run=()
if (( $(id -u) == 0 )); then
  run=(setpriv --reuid=65534 --regid=65534 --clear-groups)
  if ! command -v setpriv >/dev/null || ! "${run[@]}" test -x "$info" 2>/dev/null; then
    echo "note: cannot run chorus-info as an unprivileged user here; the mode-000 folder is not checked"
    run=()
  fi
fi
check_locked=1
if (( ${#run[@]} == 0 && $(id -u) == 0 )); then check_locked=0; fi

output=$(CHORUS_PLUGIN_PATH="$dir/a_file:$dir/loop:$dir/locked:$plugins" CHORUS_PLUGINS=fake_good \
         CHORUS_LOG_LEVEL=off "${run[@]}" "$info" --plugins-only 2>&1)
status=$?
echo "$output"
fail() { echo "FAIL: $*" >&2; exit 1; }
(( status == 0 )) || fail "chorus-info exited $status"
# chorus-info wraps its lines at 100 columns: compare with runs of blanks and line ends as one space.
flat=$(tr -s ' \n' '  ' <<<"$output")
expect() { grep -qF -- "$(tr -s ' ' <<<"$1")" <<<"$flat" || fail "output lacks: $1"; }
expect "  $dir/a_file  (skipped: it is a file, and CHORUS_PLUGIN_PATH lists folders"
expect "  $dir/loop  (skipped: it cannot be read (Too many levels of symbolic links)"
if (( check_locked )); then
  expect "  $dir/locked  (skipped: it cannot be listed (Permission denied); fix its permissions"
fi
expect "  fake_good  ABI 1.6"
echo "chorus-info marked every unreadable folder with its reason and loaded the others' plugins"
