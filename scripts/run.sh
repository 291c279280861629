#!/usr/bin/env bash
# The main job: install what is missing, build, show what chorus finds, and compare the
# cross-device ops backends on 4 virtual CPU replicas.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install-deps.sh
cmake --preset release
cmake --build --preset release -j "$(nproc)"

echo
echo "== chorus-info (CHORUS_CPU_DEVICES=4)"
CHORUS_CPU_DEVICES=4 build/release/bin/chorus-info

echo
echo "== one batch of gradient all-reduces through every cross-device ops backend"
CHORUS_CPU_DEVICES=4 build/release/bin/compare_cross_device_ops --steps 20 --num-packs 2

echo
echo "== the conformance kit on the hierarchical plugin"
build/release/bin/chorus-conformance --plugin build/release/lib/chorus/plugins/libchorus-hierarchical.so \
  --gtest_brief=1
