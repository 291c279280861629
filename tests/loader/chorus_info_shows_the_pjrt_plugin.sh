#!/usr/bin/env bash
# chorus-info shows the PJRT plugin behind the pjrt devices (its path, C API version, platform,
# and that it is chorus's reference plugin), the devices with their coordinates, and what AUTO
# picks on them; without a PJRT plugin it says why there are no devices.
set -uo pipefail
info=${1:?usage: chorus_info_shows_the_pjrt_plugin.sh CHORUS_INFO}
fail() { echo "chorus_info_shows_the_pjrt_plugin: FAILED: $*" >&2; exit 1; }

output=$(CHORUS_PJRT_PLUGIN=reference CHORUS_PJRT_OPTIONS=device_count=2 "$info" 2>&1) ||
  { echo "$output"; fail "chorus-info exited $?"; }
grep -q "^  platform pjrt (plugin tpu): 2 device(s)" <<<"$output" ||
  { echo "$output"; fail "no pjrt platform of 2 devices"; }
grep -q "^    about: PJRT plugin .*libchorus-pjrt-reference.so (from CHORUS_PJRT_PLUGIN), PJRT C API 0\.[0-9]*, platform reference .*chorus's reference PJRT plugin, a test double" \
  <<<"$output" || { echo "$output"; fail "no line about the PJRT plugin"; }
grep -q "^    \[1\] PJRT:1 .* coords (1,0,0)" <<<"$output" ||
  { echo "$output"; fail "device 1 without its coordinates"; }
grep -q "^    cross-device ops over them: tpu  (AUTO: tpu scores 90" <<<"$output" ||
  { echo "$output"; fail "no AUTO pick on the pjrt devices"; }
json=$(CHORUS_PJRT_PLUGIN=reference "$info" --json 2>/dev/null)
grep -q '"about": *"PJRT plugin ' <<<"$json" || { echo "$json"; fail "no about in the JSON"; }

output=$(env -u CHORUS_PJRT_PLUGIN -u TPU_LIBRARY_PATH "$info" 2>&1)
grep -q "^  platform pjrt (plugin tpu): 0 device(s)" <<<"$output" &&
  grep -q "^    about: no PJRT plugin: .*CHORUS_PJRT_PLUGIN.*TPU_LIBRARY_PATH.*libtpu.so" \
    <<<"$output" || { echo "$output"; fail "no reason for the missing PJRT devices"; }
echo "chorus-info showed the PJRT plugin, its devices and AUTO's pick, and why there were none"
