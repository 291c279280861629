#!/usr/bin/env bash
# Open MPI's own MPI_Allreduce against chorus's mpi collective, side by side in one run:
# mpi-allreduce-baseline (a plain MPI program) and `chorus-bench --backends mpi,shm` alternate
# under mpirun, ROUNDS times for each process count, on the same sizes and iterations; then the
# medians over the rounds of each row's busbw, and chorus mpi's as a share of MPI_Allreduce's.
# The VM's speed drifts and other work loads it: only figures of one run compare.
#   scripts/mpi-compare.sh                      # 2 and 4 processes, 5 rounds, 4K..64M
#   ROUNDS=3 PROCS="2" scripts/mpi-compare.sh -b 4K -e 1M
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${BIN:-build/release/bin}
rounds=${ROUNDS:-5}
procs=${PROCS:-"2 4"}
sweep=("$@")
if [ ${#sweep[@]} -eq 0 ]; then sweep=(-b 4K -e 64M -f 4 -w 5 -i 20 -R 1); fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
CHORUS_JOB_SECRET=${CHORUS_JOB_SECRET:-$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')}
export CHORUS_JOB_SECRET
# Every row of every run, kept where ROWS names a file.
rows=${ROWS:-$(mktemp)}
[ -n "${ROWS:-}" ] || trap 'rm -f "$rows"' EXIT
: >"$rows"

for n in $procs; do
  mpirun=(mpirun -n "$n" --oversubscribe --bind-to none -x CHORUS_JOB_SECRET)
  for round in $(seq 1 "$rounds"); do
    # Alternate which program runs first.
    order=(baseline chorus)
    if [ $((round % 2)) -eq 0 ]; then order=(chorus baseline); fi
    for program in "${order[@]}"; do
      if [ "$program" = baseline ]; then
        out=$("${mpirun[@]}" "$bin/mpi-allreduce-baseline" "${sweep[@]}")
      else
        out=$("${mpirun[@]}" "$bin/chorus-bench" --backends mpi,shm "${sweep[@]}" 2>/dev/null)
      fi
      # A row: backend size count type redop root, then time algbw busbw #wrong out of place and
      # in place.
      awk -v n="$n" -v round="$round" '/^  / && NF == 14 {
        print n, round, $1, $2, $9, $13, $10 + $14 }' <<<"$out" >>"$rows"
      echo "# $n processes, round $round/$rounds: $program done" >&2
    done
  done
done

echo
echo "# MPI_Allreduce (mpi-allreduce-baseline) against chorus-bench's mpi and shm collectives:"
echo "# busbw in GB/s, medians over $rounds alternating rounds (${sweep[*]});"
echo "# ratio = chorus mpi / MPI_Allreduce, out of place and in place"
awk '
  function median(list,   n, a, i, j, t) {
    n = split(list, a, " ")
    for (i = 1; i <= n; ++i) for (j = i + 1; j <= n; ++j) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
    return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
  }
  { key = $1 " " $4; out[key, $3] = out[key, $3] " " $5; in_[key, $3] = in_[key, $3] " " $6
    wrong += $7; if (!(key in seen)) { seen[key] = 1; keys[++k] = key } }
  END {
    printf "%5s %10s | %9s %9s %6s %9s | %9s %9s %6s %9s\n", "procs", "size(B)", "MPI oop", "mpi oop",
           "ratio", "shm oop", "MPI inpl", "mpi inpl", "ratio", "shm inpl"
    for (i = 1; i <= k; ++i) {
      key = keys[i]; split(key, f, " ")
      bo = median(out[key, "MPI_Allreduce"]); mo = median(out[key, "mpi"]); so = median(out[key, "shm"])
      bi = median(in_[key, "MPI_Allreduce"]); mi = median(in_[key, "mpi"]); si = median(in_[key, "shm"])
      printf "%5d %10d | %9.3f %9.3f %6.2f %9.3f | %9.3f %9.3f %6.2f %9.3f\n", f[1], f[2], bo, mo,
             (bo > 0 ? mo / bo : 0), so, bi, mi, (bi > 0 ? mi / bi : 0), si
    }
    printf "# wrong elements over every row: %d\n", wrong
  }' "$rows"
