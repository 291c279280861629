#!/usr/bin/env bash
# The main job: install what is missing, build, show what chorus finds, train the Fashion-MNIST
# example on 4 virtual CPU replicas (on 2 workers, and with parameter servers), and compare the
# backends with chorus-bench (figures in build/release/bench/: CSV and SVG).
# FASHION_MNIST_DIR=<dir with the four IDX files> trains on the real data set; without it the
# example generates data of the same shapes and says so.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install-deps.sh
scripts/build-preset.sh release

echo
echo "== chorus-info (CHORUS_CPU_DEVICES=4): plugins, devices, the scores for 2 workers on 1 host"
CHORUS_CPU_DEVICES=4 build/release/bin/chorus-info

echo
echo "== chorus-info --workers 4 --hosts 2: what AUTO picks for 2 hosts of 2 workers, and why"
build/release/bin/chorus-info --workers 4 --hosts 2 | sed -n '/collectives for a job/,/^$/p'

echo
echo "== training: the custom-training-loop tutorial under MirroredStrategy, 4 replicas"
build/release/bin/fashion_mnist --strategy mirrored --replicas 4 --epochs 4 --global-batch 64 \
  --data-dir "${FASHION_MNIST_DIR:-}" --checkpoint-dir build/release/fashion_mnist_ckpt \
  --save-weights build/release/fashion_mnist_weights.bin

echo
echo "== multi-worker: chorus-launch -n 2, MultiWorkerMirroredStrategy, 2 cpu replicas per worker"
build/release/bin/chorus-launch -n 2 --timeout 600 -- build/release/bin/fashion_mnist \
  --strategy multi_worker_mirrored --replicas 2 --epochs 1 --steps 200 --global-batch 64 \
  --data-dir "${FASHION_MNIST_DIR:-}" --checkpoint-dir build/release/fashion_mnist_mwms_ckpt

echo
echo "== parameter servers: chorus-launch --ps 2 --workers 2 --evaluator, ParameterServerStrategy"
echo "   (asynchronous steps on the workers, variables and Adam on the ps tasks)"
build/release/bin/chorus-launch --ps 2 --workers 2 --evaluator --timeout 600 -- \
  build/release/bin/fashion_mnist --strategy parameter_server --epochs 2 --global-batch 64 \
  --data-dir "${FASHION_MNIST_DIR:-}" --checkpoint-dir build/release/fashion_mnist_ps_ckpt

echo
echo "== chorus-ps-bench: the coordinator with 4 workers, push-pull beside raw gRPC streaming"
build/release/bin/chorus-launch --ps 2 --workers 4 --timeout 300 -- \
  build/release/bin/chorus-ps-bench --rounds 3

echo
echo "== one batch of gradient all-reduces through every cross-device ops backend"
CHORUS_CPU_DEVICES=4 build/release/bin/compare_cross_device_ops --steps 20 --num-packs 2

scripts/bench.sh

echo
echo "== the conformance kit on the hierarchical plugin"
build/release/bin/chorus-conformance --plugin build/release/lib/chorus/plugins/libchorus-hierarchical.so \
  --gtest_brief=1
