#!/usr/bin/env bash
# TensorFlow's table beside chorus's: the tutorial's CNN on real Fashion-MNIST (Adam 1e-3, seed 1)
# under OneDevice with the tutorial's batch of 16, and under OneDevice, Mirrored(4) and
# MultiWorkerMirrored(2 workers x 2 replicas) and TPUStrategy over chorus's reference PJRT plugin
# (4 devices) with the same global batch of 64 (16 per replica),
# each trained by chorus::Fit, and OneDevice once more with its gradient in 4 shards summed as the
# replicas' are (which must end with the very weights of Mirrored(4), MultiWorkerMirrored(2x2) and
# TPUStrategy(4):
# the script fails otherwise). Prints the per-epoch lines of epochs 1, 5 and 10 (those that ran)
# and the mean time per epoch (training and evaluation) beside the tutorial's first epoch.
#   scripts/fashion_mnist_table.sh [EPOCHS]     (default 10; the main command runs 1)
# Logs go to build/release/fashion_mnist_table/.
set -euo pipefail
cd "$(dirname "$0")/.."
epochs=${1:-10}
bin=build/release/bin
out=build/release/fashion_mnist_table
mkdir -p "$out"

run() {  # name, then the command
  local name=$1
  shift
  echo "-- $name: $*" >&2
  "$@" > "$out/$name.log" 2>&1 || { cat "$out/$name.log" >&2; echo "FAILED: $name" >&2; exit 1; }
}

common=(--epochs "$epochs" --seed 1 --progress lines)
run one_device_16 "$bin/fashion_mnist" --strategy one_device --global-batch 16 "${common[@]}" \
  --checkpoint-dir "$out/ckpt_one_device_16"
run one_device_64 "$bin/fashion_mnist" --strategy one_device --global-batch 64 "${common[@]}" \
  --checkpoint-dir "$out/ckpt_one_device_64"
# The same as one_device_64, its gradient summed over 4 shards of 16 as Mirrored(4) sums its
# replicas' (chorus::FitOptions::gradient_shards): the same bits as the two runs below.
run one_device_64_shards "$bin/fashion_mnist" --strategy one_device --global-batch 64 \
  --gradient-shards 4 "${common[@]}" --checkpoint-dir "$out/ckpt_one_device_64_shards"
run mirrored_4 "$bin/fashion_mnist" --strategy mirrored --replicas 4 --global-batch 64 \
  "${common[@]}" --checkpoint-dir "$out/ckpt_mirrored_4"
run multi_worker_2x2 "$bin/chorus-launch" -n 2 --timeout 3600 -- "$bin/fashion_mnist" \
  --strategy multi_worker_mirrored --replicas 2 --global-batch 64 "${common[@]}" \
  --checkpoint-dir "$out/ckpt_multi_worker_2x2"
run tpu_4 env CHORUS_PJRT_PLUGIN=reference CHORUS_PJRT_OPTIONS=device_count=4 \
  "$bin/fashion_mnist" --strategy tpu --global-batch 64 "${common[@]}" \
  --checkpoint-dir "$out/ckpt_tpu_4"

# The chief's "Epoch N, Loss: l, Accuracy: a, Test Loss: tl, Test Accuracy: ta  (s s, ...)" lines
# (chorus-launch prefixes them with "[worker 0] ").
epoch_lines() { sed -n 's/^\(\[worker 0\] \)\{0,1\}\(Epoch [0-9]*, Loss: .*\)$/\2/p' "$out/$1.log"; }

row() {
  local name=$1 label=$2
  epoch_lines "$name" | awk -v label="$label" '
    {
      n = $2; sub(/,/, "", n)
      train = $6; sub(/,/, "", train)
      cell[n] = sprintf("%s (%s)", $12, train)
      t = $13; sub(/\(/, "", t); seconds += t; count++
    }
    END {
      printf "| %s |", label
      split("1 5 10", want, " ")
      for (i = 1; i <= 3; i++) printf " %s |", (want[i] in cell) ? cell[want[i]] : "-"
      printf " %.1f s |\n", count ? seconds / count : 0
    }'
}

echo
echo "Fashion-MNIST, the tutorial's CNN, $epochs epoch(s); each cell: Test Accuracy (Accuracy), %"
echo
echo "| run | epoch 1 | epoch 5 | epoch 10 | time per epoch (training and test) |"
echo "|---|---|---|---|---|"
echo "| TensorFlow tutorial: 1 CPU replica, batch 16 | 87.80 (86.63) | - | - | - |"
row one_device_16 "chorus OneDevice, batch 16"
row one_device_64 "chorus OneDevice, batch 64"
row one_device_64_shards "chorus OneDevice, batch 64 as 4 gradient shards"
row mirrored_4 "chorus Mirrored(4), global batch 64"
row multi_worker_2x2 "chorus MultiWorkerMirrored(2 workers x 2), global batch 64"
row tpu_4 "chorus TPUStrategy, 4 reference PJRT devices, global batch 64"

echo
echo "The tutorial's first epoch:  Epoch 1, Loss: 0.3035, Accuracy: 86.63, Test Loss: 0.3301, Test Accuracy: 87.80"
for name in one_device_16 one_device_64 one_device_64_shards mirrored_4 multi_worker_2x2 tpu_4; do
  printf '%-33s %s\n' "chorus $name:" "$(epoch_lines "$name" | head -1)"
done

# The weights after the last epoch, compared byte for byte (the checkpoints hold the variables
# and the optimizer's slots).
echo
last=ckpt-$epochs
for name in mirrored_4 multi_worker_2x2 tpu_4; do
  if cmp -s "$out/ckpt_one_device_64_shards/$last" "$out/ckpt_$name/$last"; then
    echo "Weights after epoch $epochs: $name and one_device_64_shards are the same bits"
  else
    echo "Weights after epoch $epochs: $name and one_device_64_shards DIFFER" >&2
    exit 1
  fi
done
