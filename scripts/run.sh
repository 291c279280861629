#!/usr/bin/env bash
# The main job: install what is missing (Fashion-MNIST itself comes from Debian's
# dataset-fashion-mnist), build, show what chorus finds, train the tutorial's CNN on it under
# OneDevice, Mirrored and MultiWorkerMirrored (one epoch each, beside TensorFlow's line), measure
# what the strategy costs per step, train with parameter servers, and compare the backends with
# chorus-bench (figures in build/release/bench/: CSV and SVG).
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
echo "== training: the tutorial's CNN on Fashion-MNIST by chorus::Fit, one epoch each under"
echo "   OneDevice (batch 16 and 64), Mirrored(4) and MultiWorkerMirrored(2 workers x 2), beside"
echo "   TensorFlow's first epoch (scripts/fashion_mnist_table.sh 10 prints the 10-epoch table)"
scripts/fashion_mnist_table.sh 1

echo
echo "== what the strategy itself costs per step: the CNN against a no-op model, Mirrored(2)"
ROUNDS=5 scripts/bench_fit_overhead.sh  # five alternating rounds: one round in three or four lands slow on this VM

echo
echo "== parameter servers: chorus-launch --ps 2 --workers 2 --evaluator, ParameterServerStrategy"
echo "   (FitWithParameterServers of the CNN: asynchronous steps on the workers, variables and"
echo "   Adam on the ps tasks, an evaluator following the checkpoints)"
build/release/bin/chorus-launch --ps 2 --workers 2 --evaluator --timeout 600 -- \
  build/release/bin/fashion_mnist --strategy parameter_server --epochs 2 --global-batch 64 \
  --checkpoint-dir build/release/fashion_mnist_ps_ckpt

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
