#!/usr/bin/env bash
# The fashion_mnist example end to end, as the README's main command runs it but shorter:
# Mirrored over 4 virtual cpu replicas, a checkpoint, the restore without a strategy. Passes when
# the example exits 0 and prints a test accuracy above chance after the restore.
#   run_fashion_mnist.sh <fashion_mnist executable> <scratch dir>
set -euo pipefail
exe=$1
scratch=$2
rm -rf "$scratch" && mkdir -p "$scratch"
out=$scratch/output.txt
"$exe" --strategy mirrored --replicas 4 --epochs 2 --train-examples 1280 --test-examples 256 \
  --checkpoint-dir "$scratch/ckpt" --save-weights "$scratch/weights.bin" | tee "$out"

grep -q "^Epoch 2, Loss: " "$out" || { echo "FAILED: no line for epoch 2" >&2; exit 1; }
[[ -f $scratch/ckpt/ckpt-2 ]] || { echo "FAILED: no checkpoint ckpt-2" >&2; exit 1; }
# kernel1 784x128, bias1 128, kernel2 128x10, bias2 10: 101770 floats.
size=$(stat -c %s "$scratch/weights.bin")
[[ $size == $((101770 * 4)) ]] || { echo "FAILED: weights file has $size bytes" >&2; exit 1; }
accuracy=$(sed -n 's/^Restored .*Test Accuracy: \([0-9.]*\)$/\1/p' "$out")
[[ -n $accuracy ]] || { echo "FAILED: no accuracy after the restore" >&2; exit 1; }
awk -v a="$accuracy" 'BEGIN { exit !(a > 20) }' ||
  { echo "FAILED: test accuracy $accuracy% after the restore is no better than chance" >&2; exit 1; }
echo "passed: test accuracy $accuracy% after the restore"
