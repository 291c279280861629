#!/usr/bin/env bash
# What a strategy itself costs per training step, against a CNN step: chorus::Fit under
# MirroredStrategy(2) with the tutorial's CNN, then with `--model noop` (the CNN's variables,
# zero gradients, no arithmetic: distributing the batch, the gradient all-reduce, Adam's update
# and the metrics remain), alternating ROUNDS times (default 3) on real Fashion-MNIST, STEPS
# steps each (default 1000, global batch 32). Prints ms per step of each and the ratio.
#   ROUNDS=3 STEPS=1000 scripts/bench_fit_overhead.sh
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${ROUNDS:-3}
steps=${STEPS:-1000}
bin=build/release/bin/fashion_mnist
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT

ms_per_step() {  # model; from the images per second, which the example prints to more digits
  "$bin" --strategy mirrored --replicas 2 --model "$1" --epochs 1 --steps "$steps" \
    --global-batch 32 --test-examples 64 --progress none --checkpoint-dir "$scratch/$1" |
    sed -n 's/^Trained [0-9]* steps: .* \([0-9]*\) images\/s.*/\1/p' |
    awk '{ printf "%.4f\n", 32 * 1000 / $1 }'
}

echo "chorus::Fit under MirroredStrategy(2), global batch 32, $steps steps per run"
echo "| round | CNN step (ms) | noop step: the strategy's own cost (ms) | noop / CNN |"
echo "|---|---|---|---|"
cnn_all=() noop_all=()
for ((r = 1; r <= rounds; ++r)); do
  cnn=$(ms_per_step cnn)
  noop=$(ms_per_step noop)
  cnn_all+=("$cnn") noop_all+=("$noop")
  awk -v r="$r" -v c="$cnn" -v n="$noop" 'BEGIN { printf "| %d | %.3f | %.4f | %.1f%% |\n", r, c, n, 100 * n / c }'
done
median() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
awk -v c="$(median "${cnn_all[@]}")" -v n="$(median "${noop_all[@]}")" \
  'BEGIN { printf "| median | %.3f | %.4f | %.1f%% |\n", c, n, 100 * n / c }'
