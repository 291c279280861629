#!/usr/bin/env bash
# The fashion_mnist example end to end, as the README's main command runs it but shorter and on
# generated data: the default model (the CNN when built with oneDNN) through chorus::Fit under
# Mirrored over 4 virtual cpu replicas, a checkpoint per epoch, the restore without a strategy.
# Passes when the example exits 0, prints the tutorial's line for each epoch, writes the model's
# weights, and the restored model is better than chance. Arguments after the scratch folder
# replace the strategy's ("--strategy tpu" for the PJRT devices).
#   run_fashion_mnist.sh <fashion_mnist executable> <scratch dir> [strategy arguments...]
set -euo pipefail
exe=$1
scratch=$2
shift 2
strategy=("$@")
[[ ${#strategy[@]} -gt 0 ]] || strategy=(--strategy mirrored --replicas 4)
rm -rf "$scratch" && mkdir -p "$scratch"
out=$scratch/output.txt
"$exe" --synthetic "${strategy[@]}" --epochs 2 --train-examples 1280 \
  --test-examples 256 --checkpoint-dir "$scratch/ckpt" --save-weights "$scratch/weights.bin" \
  | tee "$out"

grep -q "^Epoch 2, Loss: " "$out" || { echo "FAILED: no line for epoch 2" >&2; exit 1; }
grep -q "^Epoch 2/2$" "$out" || { echo "FAILED: no progress for epoch 2" >&2; exit 1; }
[[ -f $scratch/ckpt/ckpt-2 ]] || { echo "FAILED: no checkpoint ckpt-2" >&2; exit 1; }
# The CNN has 121930 parameters; the MLP (a build without oneDNN) 101770.
size=$(stat -c %s "$scratch/weights.bin")
if grep -q "model: cnn" "$out"; then expected=121930; else expected=101770; fi
[[ $size == $((expected * 4)) ]] || { echo "FAILED: weights file has $size bytes" >&2; exit 1; }
accuracy=$(sed -n 's/^Restored .*Test Accuracy: \([0-9.]*\)$/\1/p' "$out")
[[ -n $accuracy ]] || { echo "FAILED: no accuracy after the restore" >&2; exit 1; }
awk -v a="$accuracy" 'BEGIN { exit !(a > 20) }' ||
  { echo "FAILED: test accuracy $accuracy% after the restore is no better than chance" >&2; exit 1; }
echo "passed: test accuracy $accuracy% after the restore"
