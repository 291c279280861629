#!/bin/bash
# The gpu-labelled tests and the GPU kernel figures on a bare GPU machine that has CUDA, NCCL,
# cmake and a compiler but not chorus's other build dependencies (the device machine lent to
# some sessions: Ubuntu 24.04, CUDA 13.0, NCCL 2.28 in /usr/include and /usr/lib, no network).
#
#   bash scripts/gpu_check.sh prepare   # here (Debian, network): downloads the .deb files of
#                                       # boost, spdlog, fmt, nlohmann-json, googletest, CLI11
#                                       # into .devdeps/ (add /.devdeps/ to .git/info/exclude)
#   bash scripts/gpu_check.sh run       # there, from the repository root, with .devdeps carried:
#                                       # unpacks them under /tmp/deps (not /), builds the core,
#                                       # plugins/nccl and the tests, runs ctest -L gpu and
#                                       # chorus-bench --kernels --devices cuda (f32 and bf16);
#                                       # then, where JAX's CUDA PJRT plugin is installed
#                                       # (jax-cuda13-pjrt), chorus-info on it, the tpu cross-device
#                                       # ops and kernels through it, and the compiled step on it
#                                       # beside the reference plugin (their losses must agree)
# Output also goes to $OUT/gpu_check.log when $OUT is set. First run: plugins/nccl/README.md.
set -u
case "${1:-}" in
  prepare)
    mkdir -p .devdeps && cd .devdeps &&
      apt-get download libboost1.74-dev libspdlog-dev libspdlog1.10 libfmt-dev libfmt9 \
        nlohmann-json3-dev libgtest-dev libgmock-dev googletest libcli11-dev
    ;;
  run)
    [ -n "${OUT:-}" ] && exec > >(tee "$OUT/gpu_check.log") 2>&1
    nvidia-smi -L; nvcc --version | tail -1
    deps=/tmp/deps
    mkdir -p "$deps"
    for f in .devdeps/*.deb; do dpkg -x "$f" "$deps"; done
    export LD_LIBRARY_PATH=$deps/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    # The exit status says whether configure, build, the gpu tests and the benchmarks all passed
    # (a pipe's status is its first failing command's).
    set -o pipefail
    failed=0
    cmake -S . -B build/gpu -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$deps/usr" \
      -DCHORUS_WITH_CUDA=ON -DCHORUS_BUILD_PARAMETER_SERVER=OFF | tail -12 ||
      { echo "gpu_check: configure failed"; exit 1; }
    cmake --build build/gpu -j "$(nproc)" > build/gpu/build.log 2>&1 ||
      { grep -E "error|warning: " build/gpu/build.log | head -20; echo "gpu_check: build failed"; exit 1; }
    grep -E "warning: " build/gpu/build.log | head -20
    timeout 300 ctest --test-dir build/gpu -L gpu --output-on-failure --timeout 120 | tail -40 ||
      { echo "gpu_check: gpu tests failed"; failed=1; }
    for dtype in f32 bf16; do
      timeout 120 build/gpu/bin/chorus-bench --kernels --devices cuda -b 1M -e 1G -f 4 \
        -d "$dtype" || { echo "gpu_check: chorus-bench --kernels -d $dtype failed"; failed=1; }
    done
    # JAX's CUDA PJRT plugin, with the NVIDIA libraries of the `nvidia` Python packages beside it.
    plugin=$(find / -path /proc -prune -o -name 'xla_cuda_plugin.so' -print 2>/dev/null | head -1)
    if [ -z "$plugin" ]; then
      echo "gpu_check: no xla_cuda_plugin.so (pip package jax-cuda13-pjrt): PJRT checks skipped"
      exit "$failed"
    fi
    site=$(dirname "$(dirname "$(dirname "$plugin")")")
    for lib in "$site"/nvidia/*/lib; do LD_LIBRARY_PATH=$lib:$LD_LIBRARY_PATH; done
    export LD_LIBRARY_PATH
    bin=build/gpu/bin
    echo "== PJRT plugin $plugin"
    CHORUS_PJRT_PLUGIN=$plugin timeout 120 "$bin/chorus-info" | sed -n '/platform pjrt/,/cross-device ops over/p' ||
      { echo "gpu_check: chorus-info on the PJRT plugin failed"; failed=1; }
    CHORUS_PJRT_PLUGIN=$plugin timeout 300 "$bin/chorus-bench" --in-process --devices pjrt \
      --replicas 1 -b 4K -e 64M -f 16 ||
      { echo "gpu_check: chorus-bench --in-process --devices pjrt failed"; failed=1; }
    CHORUS_PJRT_PLUGIN=$plugin timeout 120 "$bin/chorus-bench" --kernels --devices pjrt -b 4K \
      -e 64M -f 16 || { echo "gpu_check: chorus-bench --kernels --devices pjrt failed"; failed=1; }
    # The compiled step on synthetic data (the machine has no data set): the same losses on the
    # GPU as on the reference plugin, within 1e-3 (XLA's reductions and exp differ in order).
    step=(--strategy tpu --loop compiled --synthetic --epochs 1 --train-examples 16000
          --test-examples 2000 --steps-per-execution 10)
    # One replica on each: the reference plugin with one device, the machine's one GPU.
    for which in reference "$plugin"; do
      options=; [ "$which" = reference ] && options=device_count=1
      CHORUS_PJRT_PLUGIN=$which CHORUS_PJRT_OPTIONS=$options timeout 300 "$bin/fashion_mnist" "${step[@]}" \
        2>&1 | tee "build/gpu/compiled_step_$(basename "$which").log" | grep -E "^(Strategy|Epoch)" ||
        { echo "gpu_check: the compiled step on $which failed"; failed=1; }
    done
    python3 - build/gpu/compiled_step_reference.log build/gpu/compiled_step_xla_cuda_plugin.so.log <<'PY' || failed=1
import re, sys
loss = lambda f: float(re.search(r"Epoch 1, Loss: ([0-9.]+)", open(f).read()).group(1))
a, b = loss(sys.argv[1]), loss(sys.argv[2])
print(f"compiled step loss: reference {a:.4f}, CUDA PJRT {b:.4f}, difference {abs(a - b):.2e}")
sys.exit(0 if abs(a - b) <= 1e-3 else 1)
PY
    exit "$failed"
    ;;
  *)
    echo "usage: bash scripts/gpu_check.sh prepare|run" >&2
    exit 2
    ;;
esac
