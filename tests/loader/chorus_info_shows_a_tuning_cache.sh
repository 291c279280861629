#!/usr/bin/env bash
# chorus-info --tuning-cache: a cache's decisions with every candidate's time, and why a job would
# not use it (here: cut short); a file that is no cache is bad input (exit 2).
set -uo pipefail
info=${1:?usage: chorus_info_shows_a_tuning_cache.sh CHORUS_INFO}
fail() { echo "chorus_info_shows_a_tuning_cache: FAILED: $*" >&2; exit 1; }
export CHORUS_LOG_LEVEL=off
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
# A cache as autotuning writes it, without its last line '#! end'.
cat >"$dir/cache" <<'CACHE'
#! chorus-tuning-cache 1
#! chorus 1.0.0
#! job workers=2 hosts=1 ranks_per_host=2
#! candidates shm (shm 1.1.0, ABI 1.5), core_ring (core 1.0.0, ABI 1.5)
#! fingerprint 0000000000000000
#! band 4096 16384 shm shm=1.5 core_ring=40.25
[workers=2 hosts=1]
allreduce:4K-16K=shm
CACHE
chmod 0644 "$dir/cache"
out=$("$info" --tuning-cache "$dir/cache") || fail "exit $? for a cache"
grep -qF "job: workers=2 hosts=1 ranks_per_host=2" <<<"$out" || { echo "$out"; fail "no job"; }
grep -qF "all_reduce 4K-16K: shm 1.5 us, core_ring 40.2 us -> shm" <<<"$out" ||
  { echo "$out"; fail "no decision with its figures"; }
grep -qF "not used: " <<<"$out" && grep -qF "is cut short" <<<"$out" ||
  { echo "$out"; fail "a truncated cache is not said to be unusable"; }
echo "no cache" >"$dir/other"
"$info" --tuning-cache "$dir/other" >"$dir/out" 2>&1
[[ $? == 2 ]] || fail "a file that is no cache did not exit 2"
grep -qF "not a chorus tuning cache" "$dir/out" || fail "$(cat "$dir/out")"
