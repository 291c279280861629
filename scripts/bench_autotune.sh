#!/usr/bin/env bash
# One epoch of the tutorial's CNN on Fashion-MNIST under MultiWorkerMirrored(2 workers x 1
# replica, global batch 64), with AUTO as it is (scores), with autotuning (CHORUS_AUTOTUNE=1: a
# fresh cache, then the cache the first run wrote), and with each fixed backend named by
# CHORUS_COMMUNICATION; ROUNDS rounds, the configurations alternating within each. Prints each
# run's epoch time (training and evaluation, as the epoch line says) and the median per
# configuration. The VM's speed drifts: only figures of one run compare.
#   scripts/bench_autotune.sh                        # 2 rounds, backends shm,core_ring,...
#   ROUNDS=3 BACKENDS=shm,rhd@tcp scripts/bench_autotune.sh
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${BIN:-build/release/bin}
rounds=${ROUNDS:-2}
backends=${BACKENDS:-shm,core_ring,ring@ucx,rhd@tcp,gloo}
workers=${WORKERS:-2}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
cache="$out/tuning.cache"

epoch() {  # label, then variables; prints the epoch's seconds
  local label=$1
  shift
  env "$@" "$bin/chorus-launch" -n "$workers" --timeout 1800 -- "$bin/fashion_mnist" \
    --strategy multi_worker_mirrored --replicas 1 --global-batch 64 --epochs 1 --seed 1 \
    --progress lines --checkpoint-dir "$out/ckpt_$label" --checkpoint-dir-takeover \
    >"$out/$label.log" 2>&1 || { cat "$out/$label.log" >&2; echo "FAILED: $label" >&2; exit 1; }
  # "[worker 0] Epoch 1, Loss: ..., Test Accuracy: 86.1  (5.1 s, ...)"
  sed -n 's/^\[worker 0\] Epoch 1, .*(\([0-9.]*\) s.*$/\1/p' "$out/$label.log" | head -1
}

declare -A times
configs=(auto autotune_fresh autotune_cached)
IFS=, read -r -a fixed <<<"$backends"
for b in "${fixed[@]}"; do configs+=("$b"); done
for round in $(seq 1 "$rounds"); do
  rm -f "$cache"
  for config in "${configs[@]}"; do
    case $config in
      auto) t=$(epoch "$config" CHORUS_AUTOTUNE=0) ;;
      autotune_fresh) t=$(epoch "$config" CHORUS_AUTOTUNE=1 CHORUS_TUNING_CACHE="$cache") ;;
      autotune_cached) t=$(epoch "$config" CHORUS_AUTOTUNE=1 CHORUS_TUNING_CACHE="$cache") ;;
      *) t=$(epoch "$config" CHORUS_COMMUNICATION="$config") ;;
    esac
    times[$config]="${times[$config]:-} $t"
    echo "round $round: $config ${t} s" >&2
  done
  [ "$round" = 1 ] && { echo "# the cache autotuning wrote in round 1:"; grep '^#! band\|^allreduce' "$cache" | sed 's/^/#   /'; }
done
echo "| configuration | epoch (s), each round | median |"
echo "|---|---|---|"
for config in "${configs[@]}"; do
  median=$(tr ' ' '\n' <<<"${times[$config]}" | grep . | sort -n |
    awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}')
  echo "| $config |${times[$config]} | $median |"
done
