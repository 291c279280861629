#!/usr/bin/env bash
# chorus-info's three forms: the summary's table of picks fits 100 columns and names a pick, a
# runner-up and why for every operation; --all prints a column per collective; --json is one
# object with the plugins, the selection and a row per operation and size.
set -uo pipefail
info=${1:?usage: chorus_info_formats.sh CHORUS_INFO}
fail() { echo "chorus_info_formats: FAILED: $*" >&2; exit 1; }
export CHORUS_LOG_LEVEL=off
unset CHORUS_CROSS_DEVICE_OPS CHORUS_COMMUNICATION CHORUS_ALGORITHM CHORUS_TUNING_FILE

summary=$("$info" --workers 4 --hosts 2) || fail "chorus-info exited $?"
picks=$(sed -n '/^What AUTO picks/,/^$/p' <<<"$summary")
[[ -n $picks ]] || { echo "$summary"; fail "no 'What AUTO picks' section"; }
wide=$(awk 'length($0) > 100' <<<"$picks")
[[ -z $wide ]] || fail "lines over 100 columns in the picks: $wide"
for op in all_reduce broadcast all_gather reduce_scatter barrier; do
  grep -qE "^    $op +.* (best score|CHORUS_|tuning)" <<<"$picks" ||
    { echo "$picks"; fail "no pick with its why for $op"; }
done
grep -qE "^    operation +sizes +pick \\(score\\) +runner-up +why$" <<<"$picks" ||
  { echo "$picks"; fail "no header of the picks"; }

all=$("$info" --all) || fail "chorus-info --all exited $?"
grep -qE "^    operation +size +core_ring " <<<"$all" || fail "--all has no column per collective"

json=$("$info" --json) || fail "chorus-info --json exited $?"
[[ ${json:0:1} == "{" && ${json: -1} == "}" ]] || fail "--json is not one object"
for key in '"plugins"' '"selection"' '"collectives"' '"cross_device_ops"' '"chosen"' '"rejected"'; do
  grep -qF "$key" <<<"$json" || fail "--json lacks $key"
done
grep -qE '"name": "core"' <<<"$json" || fail "--json does not list the builtin plugin"
echo "chorus-info's summary fits 100 columns, --all has every column, --json is one object"
