#!/usr/bin/env bash
# The main job, for a newcomer: install what is missing (Fashion-MNIST itself comes from Debian's
# dataset-fashion-mnist), build the programs this job runs (the tests are built by
# scripts/test.sh), show what chorus finds and what AUTO picks, train the tutorial's CNN on
# Fashion-MNIST under OneDevice, Mirrored and MultiWorkerMirrored (one epoch each, beside
# TensorFlow's line) and with parameter servers, train it under torch DistributedDataParallel over
# chorus (chorus_torch) and over gloo, and compare a representative set of backends with Open
# MPI's own MPI_Allreduce and torch.distributed's all_reduce. The full backend sweep is
# scripts/bench.sh.
# Logs of each step are in build/release/run/.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=build/release/bin
logs=build/release/run
start=$SECONDS

scripts/install-deps.sh

# What this job runs, and the plugins it shows (the GPU and gRPC-ring plugins are built by the
# test command, and by a plain `cmake --build --preset release`).
targets=(chorus-info chorus-launch chorus-plugin-vet chorus-bench mpi-allreduce-baseline
         fashion_mnist chorus-shm chorus-gloo chorus-mpi chorus-ucx chorus-ofi chorus-algorithms
         chorus-hierarchical chorus-tpu chorus-pjrt-reference chorus_torch)
echo "== build: ${targets[*]}"
mkdir -p build/release
cmake --preset release > build/release/configure.log 2>&1 ||
  { tail -40 build/release/configure.log; echo "run.sh: cmake --preset release failed" >&2; exit 1; }
mkdir -p "$logs"
cmake --build --preset release --target "${targets[@]}" > "$logs/build.log" 2>&1 ||
  { tail -60 "$logs/build.log"; echo "run.sh: the build failed (log: $logs/build.log)" >&2; exit 1; }
echo "   built in $((SECONDS - start)) s since the start (log: $logs/build.log)"

echo
echo "== chorus-info: the plugins found (chorus-info prints each with its path and what it provides)"
"$bin/chorus-info" --plugins-only | sed -n 's/^  \([a-z0-9_-]*\)  ABI \([0-9.]*\)  version \(.*\)$/   \1 (ABI \2, \3)/p'
echo
echo "== chorus-info --workers 4 --hosts 2: what AUTO picks for 2 hosts of 2 workers, and why"
"$bin/chorus-info" --workers 4 --hosts 2 |
  sed -n '/^  collectives for a job/,/^$/p' | sed '/^$/d'

echo
echo "== training: the tutorial's CNN on Fashion-MNIST by chorus::Fit, one epoch each under"
echo "   OneDevice (batch 16 and 64), Mirrored(4), MultiWorkerMirrored(2 workers x 2) and"
echo "   TPUStrategy over chorus's reference PJRT plugin (4 devices), beside"
echo "   TensorFlow's first epoch (scripts/fashion_mnist_table.sh 10 prints the 10-epoch table)"
scripts/fashion_mnist_table.sh 1 2>/dev/null

echo
echo "== TPUStrategy's compiled step: softmax regression written in StableHLO"
echo "   (examples/fashion_mnist/softmax_regression_step.mlir, its gradient all-reduce inside),"
echo "   compiled by chorus's reference PJRT plugin for 4 devices, 10 steps per dispatch, 1 epoch"
CHORUS_PJRT_PLUGIN=reference CHORUS_PJRT_OPTIONS=device_count=4 "$bin/fashion_mnist" \
  --strategy tpu --loop compiled --epochs 1 --steps-per-execution 10 > "$logs/compiled_step.log" 2>&1 ||
  { tail -20 "$logs/compiled_step.log"; echo "run.sh: the compiled step failed" >&2; exit 1; }
grep '^Epoch' "$logs/compiled_step.log" | sed 's/^/   /'

echo
echo "== parameter servers: chorus-launch --ps 2 --workers 2, ParameterServerStrategy (asynchronous"
echo "   steps on the workers, variables and Adam on the ps tasks), one epoch; the chief's lines"
"$bin/chorus-launch" --ps 2 --workers 2 --timeout 600 -- \
  "$bin/fashion_mnist" --strategy parameter_server --epochs 1 --global-batch 64 \
  --checkpoint-dir build/release/fashion_mnist_ps_ckpt > "$logs/parameter_servers.log" 2>&1 ||
  { tail -40 "$logs/parameter_servers.log"; echo "run.sh: the parameter-server job failed" >&2; exit 1; }
grep '^\[chief 0\] Epoch' "$logs/parameter_servers.log" | sed 's/^/   /'

echo
echo "== PyTorch: the same CNN under torch DistributedDataParallel (examples/pytorch), one epoch"
echo "   with 2 processes over chorus (chorus_torch: what AUTO picks) and then over gloo"
PYTHONPATH=build/release/python /usr/bin/python3 examples/pytorch/fashion_mnist_ddp.py \
  --backends chorus,gloo --workers 2 --epochs 1 > "$logs/fashion_mnist_ddp.log" 2>&1 ||
  { tail -40 "$logs/fashion_mnist_ddp.log"; echo "run.sh: the DDP example failed" >&2; exit 1; }
grep 'epoch time' "$logs/fashion_mnist_ddp.log" | sed 's/^/   /'

echo
echo "== backends: 2 workers (mpirun -n 2), all_reduce f32 sum; first Open MPI's own MPI_Allreduce"
echo "   (a plain MPI program, no chorus), then chorus's auto (what AUTO runs with no variable set),"
echo "   shm, mpi, core_ring (ring@tcp) and ring@ucx in one run, alternating; time in us, busbw in"
echo "   GB/s, and AUTO's regret (its time / the fastest's; scripts/bench.sh runs the full sweep);"
echo "   then torch.distributed's all_reduce over gloo and over chorus (tools/chorus-bench/"
echo "   torch_allreduce.py, 2 spawned ranks, the same flags and timing; in place: torch has no"
echo "   out-of-place all_reduce)"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1  # this job runs as root
CHORUS_JOB_SECRET=$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')
export CHORUS_JOB_SECRET
# A row's out-of-place figures, or its in-place ones where it has none (torch's rows).
table() { awk '/^  [A-Za-z@_]/ && $1 != "all_reduce" {
  t = $7; b = $9; how = ""; if (t == "n/a") { t = $11; b = $13; how = "  (in place)" }
  printf "   %-15s %9s B %12s us %8s GB/s%s\n", $1, $2, t, b, how }'; }
printf "   %-15s %11s %15s %13s\n" backend size time busbw
mpirun -n 2 --bind-to none "$bin/mpi-allreduce-baseline" -b 4K -e 16M -f 16 -w 5 -i 20 -R 3 \
  2> "$logs/mpi_baseline.log" | tee -a "$logs/mpi_baseline.log" | table
mpirun -n 2 --bind-to none -x CHORUS_JOB_SECRET "$bin/chorus-bench" \
  --auto --backends shm,mpi,core_ring,ring@ucx -b 4K -e 16M -f 16 -w 5 -i 20 -R 3 \
  --csv "$logs/allreduce_2_workers.csv" 2> "$logs/chorus_bench.log" |
  tee -a "$logs/chorus_bench.log" | table
PYTHONPATH=build/release/python /usr/bin/python3 tools/chorus-bench/torch_allreduce.py \
  -n 2 --backends gloo,chorus -b 4K -e 16M -f 16 -w 5 -i 20 -R 3 \
  2> "$logs/torch_allreduce.log" | tee -a "$logs/torch_allreduce.log" | table ||
  { tail -20 "$logs/torch_allreduce.log"; echo "run.sh: torch_allreduce.py failed" >&2; exit 1; }
sed -n 's/^# \(torch-chorus: chorus collective [^ ]*\).*/   \1 (what AUTO picked)/p' \
  "$logs/torch_allreduce.log"
awk '/^# op .*regret$/ { on = 1; next } on && /^  all_reduce/ {
       printf "   AUTO at %6s B: ran %-10s regret %s (fastest: %s)\n", $2, $3, $7, $5 }' \
  "$logs/chorus_bench.log"

echo
echo "== done in $((SECONDS - start)) s. Next: scripts/test.sh (the test suite), scripts/bench.sh"
echo "   (every backend, 2 and 4 workers, transports beside ucx_perftest and fi_pingpong),"
echo "   chorus-info --all (every score), README.md (choosing a backend, writing a plugin)"
