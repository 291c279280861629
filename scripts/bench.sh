#!/usr/bin/env bash
# The backend comparison of the README, in one run (after scripts/run.sh has built):
#  1. 2 worker processes under mpirun, f32 sum all-reduce from 4 KiB to 64 MiB, every collective
#     (shm, mpi, gloo (its default algorithm), ring_grpc, core_ring), alternating backends per size and repeat;
#     then shm and mpi alone: in a run with Gloo, Gloo's device threads spin in epoll_wait
#     (perf) and on 2 cores slow whatever runs next in the process;
#  2. 4 worker processes playing 2 hosts of 2 (--hosts 2): the hierarchical collectives
#     shm+gloo and shm+core_ring against flat gloo and core_ring (and flat shm, which one machine
#     allows);
#  3. in one process, 4 replicas: cross-device ops all-reduce against the host's streaming
#     bandwidth, and the fused batch_reduce of 1000 x 4 KiB against one all-reduce of 4000 KiB;
#  4. the cpu enumerator's copy and reduce kernels (chorus-bench --kernels; on a GPU machine
#     `--kernels --devices cuda` measures the nccl plugin's);
#  5. transports point to point (chorus-bench --transports), each beside its native peer in the
#     same run on the same settings: ucx beside ucx_perftest (UCX_TLS=tcp, then sm,self), ofi
#     beside fi_pingpong (FI_PROVIDER "tcp;ofi_rxm", then shm), and the core's tcp
#     (scripts/bench_transports.sh; a part whose plugin or tool is missing says so and is skipped).
# Run 1 is preceded and its shm-against-mpi sequel followed by mpi-allreduce-baseline, a plain MPI
# program timing MPI_Allreduce the way chorus-bench times (same sizes, iterations, columns), so
# that chorus's mpi rows read against Open MPI's own (scripts/mpi-compare.sh alternates the two
# several times, 2 and 4 processes, and prints medians and ratios).
# --suggest-rules prints, after runs 1 and 2, the CHORUS_ALGORITHM rules of the fastest backends.
# Figures go to build/release/bench/ (CSV and SVG) and to stdout.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=build/release/bin
out=build/release/bench
mkdir -p "$out"
# Open MPI refuses root without these (CI and these machines run as root).
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# A job secret for the mpirun jobs, as chorus-launch makes one for its own (README, "Failures"):
# only these ranks get into the rendezvous store and the transports.
CHORUS_JOB_SECRET=${CHORUS_JOB_SECRET:-$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')}
export CHORUS_JOB_SECRET

echo "== mpi-allreduce-baseline: Open MPI's own MPI_Allreduce, no chorus (a plain MPI program timed"
echo "   as chorus-bench times; compare its rows with chorus-bench's 'mpi' rows below) (mpirun -n 2)"
mpirun -n 2 --bind-to none "$bin/mpi-allreduce-baseline" -b 4K -e 64M -f 4 -w 5 -i 20 -R 3

echo
echo "== chorus-bench: 2 workers, all_reduce f32 sum, every collective (mpirun -n 2)"
mpirun -n 2 --bind-to none -x CHORUS_JOB_SECRET "$bin/chorus-bench" \
  --backends shm,mpi,gloo,ring_grpc,core_ring \
  -b 4K -e 64M -f 4 -w 5 -i 20 -R 3 --suggest-rules --csv "$out/allreduce_2_workers.csv" \
  --plot "$out/allreduce_2_workers.svg"

echo
echo "== chorus-bench: 2 workers, shm against Open MPI alone (no Gloo device thread in the process)"
mpirun -n 2 --bind-to none -x CHORUS_JOB_SECRET "$bin/chorus-bench" --backends shm,mpi \
  -b 4K -e 64M -f 4 -w 5 -i 20 \
  -R 3 --csv "$out/allreduce_2_workers_shm_mpi.csv" --tuning-file "$out/tuning_2_workers.txt"
echo "   (CHORUS_TUNING_FILE=$out/tuning_2_workers.txt runs 2-worker jobs on these measurements;"
echo "    chorus-info shows where they override the plugins' scores)"
echo
echo "== mpi-allreduce-baseline again, right after: Open MPI's MPI_Allreduce without chorus, against"
echo "   the 'mpi' rows of the run above (mpirun -n 2)"
mpirun -n 2 --bind-to none "$bin/mpi-allreduce-baseline" -b 4K -e 64M -f 4 -w 5 -i 20 -R 3

echo
echo "== chorus-bench -n 4 --hosts 2: hierarchical (shm within a host) against flat collectives"
"$bin/chorus-bench" -n 4 --hosts 2 --backends shm+gloo,gloo,shm+core_ring,core_ring,shm \
  -b 256K -e 64M -f 4 -w 3 -i 10 -R 2 --suggest-rules --csv "$out/allreduce_2_hosts_of_2.csv" \
  --plot "$out/allreduce_2_hosts_of_2.svg"

echo
echo "== chorus-bench --in-process: 4 replicas, cross-device ops, host streaming bandwidth"
"$bin/chorus-bench" --in-process --replicas 4 --stream-bandwidth -b 64K -e 64M -f 4 -R 3 \
  --ops all_reduce --csv "$out/in_process_4_replicas.csv" --plot "$out/in_process_4_replicas.svg"

echo
echo "== chorus-bench --in-process: fusion, 1000 x 4 KiB batch_reduce against one 4000 KiB all_reduce"
"$bin/chorus-bench" --in-process --replicas 4 --backends reduction_to_one_device \
  --ops batch_reduce,all_reduce --batch-count 1000 --batch-bytes 4K -b 4000K -e 4000K -R 3 \
  --csv "$out/fusion.csv"

echo
echo "== chorus-bench --kernels: the cpu enumerator's copy and reduce kernels"
"$bin/chorus-bench" --kernels -b 4K -e 64M -f 4 -w 3 -i 10

echo
scripts/bench_transports.sh
