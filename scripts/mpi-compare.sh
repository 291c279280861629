#!/usr/bin/env bash
# Open MPI's own MPI_Allreduce against chorus's mpi collective, side by side in one run:
# mpi-allreduce-baseline (a plain MPI program) and `chorus-bench --backends mpi,shm` alternate
# under mpirun, ROUNDS times for each process count, on the same sizes and iterations; then the
# medians over the rounds of each row's busbw, and chorus mpi's as a share of MPI_Allreduce's.
# The VM's speed drifts and other work loads it: only figures of one run compare.
#   scripts/mpi-compare.sh                      # 2 and 4 processes, 5 rounds, 4K..64M
#   ROUNDS=3 PROCS="2" scripts/mpi-compare.sh -b 4K -e 1M
# BEFORE_PLUGIN_PATH=<folder holding another build's libchorus-mpi.so> adds a third program per
# round, chorus-bench with that plugin (CHORUS_PLUGIN_PATH: first found wins), as 'mpi-before'.
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
    if [ -n "${BEFORE_PLUGIN_PATH:-}" ]; then order+=(before); fi
    if [ $((round % 2)) -eq 0 ]; then order=("${order[@]:1}" baseline); fi
    for program in "${order[@]}"; do
      if [ "$program" = baseline ]; then
        out=$("${mpirun[@]}" "$bin/mpi-allreduce-baseline" "${sweep[@]}")
      elif [ "$program" = chorus ]; then
        out=$("${mpirun[@]}" "$bin/chorus-bench" --backends mpi,shm "${sweep[@]}" 2>/dev/null)
      else
        out=$("${mpirun[@]}" -x CHORUS_PLUGIN_PATH="$BEFORE_PLUGIN_PATH" "$bin/chorus-bench" \
          --backends mpi "${sweep[@]}" 2>/dev/null | sed 's/^  mpi /  mpi-before /')
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
    if (n == 0) return -1
    for (i = 1; i <= n; ++i) for (j = i + 1; j <= n; ++j) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
    return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
  }
  function cells(m, key,   b, c, o, s) {
    b = median(m[key, "MPI_Allreduce"]); c = median(m[key, "mpi"])
    o = median(m[key, "mpi-before"]); s = median(m[key, "shm"])
    return sprintf(" | %8.3f %8.3f %5.2f %8s %5s %8s", b, c, (b > 0 ? c / b : 0),
                   (o < 0 ? "-" : sprintf("%.3f", o)), (o < 0 ? "-" : sprintf("%.2f", o / b)),
                   (s < 0 ? "-" : sprintf("%.3f", s)))
  }
  { key = $1 " " $4; out[key, $3] = out[key, $3] " " $5; inp[key, $3] = inp[key, $3] " " $6
    wrong += $7; if (!(key in seen)) { seen[key] = 1; keys[++k] = key } }
  END {
    printf "%5s %10s | %-47s | %-47s\n", "", "", "out of place", "in place"
    h = sprintf(" | %8s %8s %5s %8s %5s %8s", "MPI", "mpi", "ratio", "before", "ratio", "shm")
    printf "%5s %10s%s%s\n", "procs", "size(B)", h, h
    for (i = 1; i <= k; ++i) {
      split(keys[i], f, " ")
      printf "%5d %10d%s%s\n", f[1], f[2], cells(out, keys[i]), cells(inp, keys[i])
    }
    printf "# MPI: MPI_Allreduce (mpi-allreduce-baseline); mpi: chorus-bench --backends mpi; "
    printf "before: the same with BEFORE_PLUGIN_PATH'"'"'s plugin; shm: chorus'"'"'s shm collective; "
    printf "ratio: of MPI'"'"'s busbw\n# wrong elements over every row: %d\n", wrong
  }' "$rows"
