#!/usr/bin/env bash
# Open MPI's own MPI_Allreduce against chorus's mpi collective, side by side in one run:
# mpi-allreduce-baseline (a plain MPI program) and `chorus-bench --backends mpi,shm` alternate
# under mpirun, size by size, ROUNDS times for each process count, with the same iterations; then
# the medians over the rounds of each row's busbw, and chorus mpi's as a share of MPI_Allreduce's.
# The VM's speed drifts and other work loads it: only figures of one run compare.
#   scripts/mpi-compare.sh                      # 2 and 4 processes, 5 rounds, 4K..64M
#   ROUNDS=3 PROCS="2" scripts/mpi-compare.sh -b 4K -e 1M
# BEFORE_PLUGIN_PATH=<folder holding another build's libchorus-mpi.so> adds a third program per
# round, chorus-bench with that plugin (CHORUS_PLUGIN_PATH: first found wins), as 'mpi-before'.
# THREAD_LEVEL_B=single instead adds chorus-bench with CHORUS_MPI_THREAD_LEVEL set to that
# (plugins/mpi/README.md), in the same column, headed by the level.
# NICE=-10 runs every program at that niceness (as root): on a machine other work loads, spinning
# MPI ranks wait whole time slices for a descheduled peer, and the figures measure the load.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -n "${BEFORE_PLUGIN_PATH:-}" ] && [ -n "${THREAD_LEVEL_B:-}" ]; then
  echo "mpi-compare.sh: set BEFORE_PLUGIN_PATH or THREAD_LEVEL_B, not both (one extra column)" >&2
  exit 2
fi
third=${THREAD_LEVEL_B:-before}
bin=${BIN:-build/release/bin}
rounds=${ROUNDS:-5}
procs=${PROCS:-"2 4"}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
CHORUS_JOB_SECRET=${CHORUS_JOB_SECRET:-$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')}
export CHORUS_JOB_SECRET
# Every row of every run, kept where ROWS names a file.
rows=${ROWS:-$(mktemp)}
[ -n "${ROWS:-}" ] || trap 'rm -f "$rows"' EXIT
: >"$rows"

# Sizes of the sweep, as chorus-bench's: -b, -e and -f only; the other options go to every run.
min=4K max=64M factor=4 rest=()
while [ $# -gt 0 ]; do
  case "$1" in
    -b) min=$2; shift 2 ;;
    -e) max=$2; shift 2 ;;
    -f) factor=$2; shift 2 ;;
    *) rest+=("$1"); shift ;;
  esac
done
if [ ${#rest[@]} -eq 0 ]; then rest=(-w 5 -i 20 -R 1); fi
bytes() { numfmt --from=iec "$1"; }
sizes=()
for ((size = $(bytes "$min"); size <= $(bytes "$max"); size *= factor)); do sizes+=("$size"); done

# Each size is its own short run of each program, the programs alternating within a round (the
# order turning every round): the pair compared is measured seconds apart, not minutes.
# chorus-bench's rendezvous store on a port of its own, not the default other jobs may use.
MASTER_PORT=${MASTER_PORT:-$(shuf -i 30000-39999 -n 1)}
export MASTER_PORT
for n in $procs; do
  mpirun=(nice -n "${NICE:-0}" mpirun -n "$n" --oversubscribe --bind-to none -x CHORUS_JOB_SECRET
    -x MASTER_PORT)
  programs=(baseline chorus)
  if [ -n "${BEFORE_PLUGIN_PATH:-}" ]; then programs+=(before); fi
  if [ -n "${THREAD_LEVEL_B:-}" ]; then programs+=(level); fi
  for round in $(seq 1 "$rounds"); do
    for size in "${sizes[@]}"; do
      one=(-b "$size" -e "$size" "${rest[@]}")
      for ((k = 0; k < ${#programs[@]}; ++k)); do
        program=${programs[$(((k + round) % ${#programs[@]}))]}
        case "$program" in
          baseline) out=$("${mpirun[@]}" "$bin/mpi-allreduce-baseline" "${one[@]}") ;;
          chorus) out=$("${mpirun[@]}" "$bin/chorus-bench" --backends mpi,shm "${one[@]}" 2>/dev/null) ;;
          before)
            out=$("${mpirun[@]}" -x CHORUS_PLUGIN_PATH="$BEFORE_PLUGIN_PATH" "$bin/chorus-bench" \
              --backends mpi "${one[@]}" 2>/dev/null | sed 's/^  mpi /  mpi-before /') ;;
          level)
            out=$("${mpirun[@]}" -x CHORUS_MPI_THREAD_LEVEL="$THREAD_LEVEL_B" "$bin/chorus-bench" \
              --backends mpi "${one[@]}" 2>/dev/null | sed 's/^  mpi /  mpi-before /') ;;
        esac
        # A row: backend size count type redop root, then time algbw busbw #wrong out of place
        # and in place.
        awk -v n="$n" -v round="$round" '/^  / && NF == 14 {
          print n, round, $1, $2, $9, $13, $10 + $14 }' <<<"$out" >>"$rows"
      done
    done
    echo "# $n processes, round $round/$rounds done" >&2
  done
done
sweep=(-b "$min" -e "$max" -f "$factor" "${rest[@]}")

echo
echo "# MPI_Allreduce (mpi-allreduce-baseline) against chorus-bench's mpi and shm collectives:"
echo "# busbw in GB/s, medians over $rounds alternating rounds (${sweep[*]}; nice ${NICE:-0});"
awk -v third="$third" '
  function median(list,   n, a, i, j, t) {
    n = split(list, a, " ")
    if (n == 0) return -1
    for (i = 1; i <= n; ++i) for (j = i + 1; j <= n; ++j) if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
    return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
  }
  # The medians over the rounds of MPI_Allreduce, chorus mpi (and mpi-before) and shm, and the
  # median over the rounds of each round'"'"'s ratio (the two programs ran seconds apart).
  function cells(col, key,   b, c, o, s, r, ro, rounds, q) {
    b = median(v[col, key, "MPI_Allreduce"]); c = median(v[col, key, "mpi"])
    o = median(v[col, key, "mpi-before"]); s = median(v[col, key, "shm"])
    r = ""; ro = ""
    for (q in round_seen) {
      if ((col, key, "MPI_Allreduce", q) in x && x[col, key, "MPI_Allreduce", q] > 0) {
        if ((col, key, "mpi", q) in x) r = r " " x[col, key, "mpi", q] / x[col, key, "MPI_Allreduce", q]
        if ((col, key, "mpi-before", q) in x) ro = ro " " x[col, key, "mpi-before", q] / x[col, key, "MPI_Allreduce", q]
      }
    }
    r = median(r); ro = median(ro)
    return sprintf(" | %7.3f %7.3f %5.2f %7s %5s %7s", b, c, r, (o < 0 ? "-" : sprintf("%.3f", o)),
                   (ro < 0 ? "-" : sprintf("%.2f", ro)), (s < 0 ? "-" : sprintf("%.3f", s)))
  }
  { key = $1 " " $4; round_seen[$2] = 1
    v["o", key, $3] = v["o", key, $3] " " $5; x["o", key, $3, $2] = $5
    v["i", key, $3] = v["i", key, $3] " " $6; x["i", key, $3, $2] = $6
    wrong += $7; if (!(key in seen)) { seen[key] = 1; keys[++k] = key } }
  END {
    printf "%5s %10s | %-44s | %-44s\n", "", "", "out of place", "in place"
    h = sprintf(" | %7s %7s %5s %7s %5s %7s", "MPI", "mpi", "ratio", third, "ratio", "shm")
    printf "%5s %10s%s%s\n", "procs", "size(B)", h, h
    for (i = 1; i <= k; ++i) {
      split(keys[i], f, " ")
      printf "%5d %10d%s%s\n", f[1], f[2], cells("o", keys[i]), cells("i", keys[i])
    }
    printf "# MPI: MPI_Allreduce (mpi-allreduce-baseline); mpi: chorus-bench --backends mpi; "
    if (third != "before") printf "%s: the same with CHORUS_MPI_THREAD_LEVEL=%s; shm:", third, third
    else printf "before: the same with BEFORE_PLUGIN_PATH'"'"'s plugin; shm:"
    printf " chorus'"'"'s shm collective (busbw, GB/s, "
    printf "medians over the rounds); ratio: the median over the rounds of that round'"'"'s busbw over "
    printf "MPI'"'"'s\n# wrong elements over every row: %d\n", wrong
  }' "$rows"
