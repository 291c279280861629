#!/usr/bin/env bash
# chorus-info says where the core changes a declared score: a pair algorithm@transport scores
# algorithm x transport / 100 (the fake_barrier algorithm's 80 over tcp's 10: 8), a score above
# CHORUS_SCORE_MAX is taken as 0 (the collective fake_score_out_of_range declares 4294967295, the
# transport fake_wire_out_of_range 250 from 1 MiB, which makes its pairs 0 there), and a table
# without capabilities is chosen by name only (fake_scored_plain, fake_abi_1_0) — in the summary,
# --all and --json.
set -uo pipefail
info=${1:?usage: chorus_info_explains_scores.sh CHORUS_INFO FAKE_PLUGIN_DIR FAKE_HOSTILE_DIR}
dir=${2:?}
hostile=${3:?}
fail() { echo "chorus_info_explains_scores: FAILED: $*" >&2; exit 1; }
plugins="fake_scored,fake_barrier,fake_abi_1_0,$hostile/libchorus-fake_score_out_of_range.so"
run() {
  output=$(env -u CHORUS_CROSS_DEVICE_OPS -u CHORUS_COMMUNICATION -u CHORUS_ALGORITHM \
    -u CHORUS_TUNING_FILE CHORUS_LOG_LEVEL=off CHORUS_PLUGIN_PATH="$dir" CHORUS_PLUGINS="$plugins" \
    "$info" --workers 4 --hosts 2 "$@" 2>&1) || { echo "$output"; fail "chorus-info $* exited $?"; }
  # Lines wrap at 100 columns: compare with runs of blanks and line ends as one space.
  flat=$(tr -s ' \n' '  ' <<<"$output")
}
expect() {
  grep -qF -- "$(tr -s ' ' <<<"$1")" <<<"$flat" || { echo "$output"; fail "$what lacks: $1"; }
}

what="the summary"
run
expect "pairs score algorithm x transport / 100: core_ring 5 (= ring 50 x tcp 10 / 100), fake_barrier@tcp 8 (= fake_barrier 80 x tcp 10 / 100)"
expect "fake_score_out_of_range: scores 4294967295 for all_reduce of 4 KiB: above 100, taken as 0 (a plugin bug"
expect "chosen by name only (no capabilities): fake_abi_1_0, fake_scored_plain"
expect "by name: cross_device_ops(fake_scored_ops), collective(fake_scored_plain) declare no capabilities: only a name selects them, never AUTO"
wide=$(sed -n '/^What AUTO picks/,/^$/p' <<<"$output" | awk 'length($0) > 100')
[[ -z $wide ]] || fail "lines over 100 columns in the picks: $wide"

what="--all"
run --all
expect "(fake_barrier@tcp 8 = fake_barrier 80 x tcp 10 / 100)"
expect "(- fake_score_out_of_range: declares the score 4294967295 for all_reduce"
expect "(- fake_scored_plain: declares no capabilities"

what="--json"
run --json
expect '"fake_barrier@tcp": "fake_barrier 80 x tcp 10 / 100"'
expect '"fake_score_out_of_range": "scores 4294967295 for all_reduce of 4 KiB: above 100, taken as 0"'
expect '"by_name_only": [ "fake_abi_1_0", "fake_scored_plain" ]'
# A transport's score taken as 0 makes its pairs 0 there; chorus-info names the half.
plugins="$hostile/libchorus-fake_wire_out_of_range.so"
what="the summary with fake_wire_out_of_range"
run
expect "ring@fake_wire_out_of_range: its transport fake_wire_out_of_range scores 250 for all_reduce of 1 MiB: above 100, taken as 0"
expect "ring@fake_wire_out_of_range 15 (= ring 50 x fake_wire_out_of_range 30 / 100)"
what="--all with fake_wire_out_of_range"
run --all
expect "(- ring@fake_wire_out_of_range: its transport fake_wire_out_of_range scores 250 for all_reduce of 1 MiB: above 100, taken as 0)"

echo "chorus-info explained the pairs' scores, the score taken as 0 and the tables chosen by name"
