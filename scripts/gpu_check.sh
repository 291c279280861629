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
#                                       # chorus-bench --kernels --devices cuda (f32 and bf16)
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
    exit "$failed"
    ;;
  *)
    echo "usage: bash scripts/gpu_check.sh prepare|run" >&2
    exit 2
    ;;
esac
