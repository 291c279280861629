#!/usr/bin/env bash
# Transports point to point (plugin.h interface 5), each beside its native peer tool measured in
# the same run on the same settings (scripts/bench.sh runs this as its last section; it also runs
# alone after a build):
#  - ucx: ucx_perftest tag_lat at 8 B and tag_bw at 1, 4 and 16 MiB (-O WINDOW sends in flight)
#    beside chorus-bench --transports ucx, with UCX_TLS=tcp and again UCX_TLS=sm,self (shared
#    memory);
#  - ofi: fi_pingpong -e rdm -m tagged (tagged messages, as chorus sends) at 8 B, 32 KiB, 64 KiB
#    (above ofi_rxm's eager limit, where chorus sends pieces of it) and 1 MiB with
#    -p "tcp;ofi_rxm" and -p shm beside chorus-bench --transports ofi with FI_PROVIDER set the
#    same; fi_pingpong has no warm-up and its mean includes the first message, which opens the
#    connection (about 12 ms over tcp;ofi_rxm here), so it runs FI_LAT_ITERS (50000) ping-pongs at
#    8 B and FI_BW_ITERS (2000) at the larger sizes, where that weighs little (with 500 at 8 B its
#    mean was 32 us, with 50000 8 us);
#  - tcp (the core's transport) alone: it has no native peer.
# A part whose plugin (chorus-info lists the transports) or native tool is missing is skipped
# with the reason. Latency: ucx_perftest's 50.0%ile and chorus's median are both the median of
# round trip / 2; fi_pingpong's usec/xfer is the mean of round trip / 2, beside chorus's mean
# (its CSV's latency_mean_us). Bandwidth: ucx_perftest and chorus print MB/s with MB = 2^20 B;
# fi_pingpong's MB/sec counts 10^6 B and both directions of its ping-pong (2 x size per round
# trip), so beside it stands chorus's size / mean latency at that size, the same figure. The VM's speed drifts: compare only within one run.
# Figures go to build/release/bench/transports_* (chorus's CSV, the native tools' output).
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${CHORUS_BIN_DIR:-build/release/bin}
out=${CHORUS_BENCH_OUT:-build/release/bench}
mkdir -p "$out"
lat_iters=${LAT_ITERS:-2000}  # ping-pongs at 8 B (chorus and ucx_perftest)
fi_lat_iters=${FI_LAT_ITERS:-50000}  # fi_pingpong's at 8 B and at 1 MiB (see above)
fi_bw_iters=${FI_BW_ITERS:-2000}
bw_iters=${BW_ITERS:-20}      # a stream of BW_ITERS x WINDOW messages per size (both tools)
window=${WINDOW:-16}
# ucx: rounds of chorus-bench and ucx_perftest alternating; each figure is the median over them
# (one run of either swings 2-3x on a shared VM: a single pair of runs compares little).
rounds=${ROUNDS:-3}
# The chorus transports beside ucx_perftest and fi_pingpong (another name measures that one there,
# e.g. UCX_NAME=tcp to try this script's native half without the plugins).
ucx_name=${UCX_NAME:-ucx}
ofi_name=${OFI_NAME:-ofi}
: "${CHORUS_JOB_SECRET:=$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')}"
export CHORUS_JOB_SECRET

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# Whether chorus-bench finds transport $1 (the core's or a plugin's).
have_transport() {
  local answer
  answer=$("$bin/chorus-bench" --transports "$1" 2>&1 >/dev/null || true)
  [[ $answer != *"names a transport"* ]]
}

# chorus-bench --transports $1: latency at 8 B, bandwidth at 1, 4 and 16 MiB; CSV rows in $2.
chorus_run() {
  local transport=$1 csv=$2
  timeout -k 5 120 "$bin/chorus-bench" -n 2 --transports "$transport" -b 8 -e 8 -w 100 \
    -i "$lat_iters" --window "$window" --timeout 60 --csv "$csv.lat" >/dev/null
  timeout -k 5 120 "$bin/chorus-bench" -n 2 --transports "$transport" -b 1M -e 16M -f 4 -w 2 \
    -i "$bw_iters" --window "$window" --timeout 60 --csv "$csv.bw" >/dev/null
  { cat "$csv.lat"; tail -n +2 "$csv.bw"; } >"$csv"
  rm -f "$csv.lat" "$csv.bw"
}

# A field of chorus's CSV row of size $2: $3 = latency_us (median), latency_mean_us or
# bandwidth_MBps; WRONG when that row has wrong bytes.
chorus_figure() {
  awk -F, -v bytes="$2" -v column="$3" '
    NR == 1 { for (i = 1; i <= NF; ++i) index_of[$i] = i; next }
    $2 == bytes { if ($6 != 0) { print "WRONG" } else { printf "%.2f", $index_of[column] } }' "$1"
}

# A native server in the background on a free port, then its client on 127.0.0.1; the client's
# output goes to $log. Usage: native_pair LOG SERVER_COMMAND... -- CLIENT_COMMAND... (the words
# PORT in both are replaced by the port).
native_pair() {
  local log=$1
  shift
  local server=() client=() port
  while [ "$1" != "--" ]; do server+=("$1"); shift; done
  shift
  client=("$@")
  port=$(free_port)
  server=("${server[@]//PORT/$port}")
  client=("${client[@]//PORT/$port}")
  timeout -k 5 90 "${server[@]}" >"$log.server" 2>&1 &
  local server_pid=$!
  local status=0 attempt
  for attempt in 1 2 3; do  # the server listens before the client connects; a loaded VM is slow
    sleep "0.$((attempt * 3))"
    status=0
    timeout -k 5 90 "${client[@]}" >"$log" 2>&1 || status=$?
    [ $status -eq 0 ] || ! kill -0 "$server_pid" 2>/dev/null || continue
    break
  done
  if [ $status -ne 0 ]; then
    kill "$server_pid" 2>/dev/null || true
  fi
  wait "$server_pid" 2>/dev/null || true
  rm -f "$log.server"
  return $status
}

# ucx_perftest's final line (-f): iterations, latency 50.0%ile/average/overall (us), bandwidth
# average/overall (MB/s), message rate average/overall.
ucx_final() { awk 'NF == 8 && $1 ~ /^[0-9]+$/ { line = $0 } END { print line }' "$1"; }

row() { printf "  %-22s %8s %14s %14s %16s %16s\n" "$@"; }

echo "== transports point to point: native peer and chorus-bench --transports, same settings"
echo "   (2 processes on 127.0.0.1; chorus: $lat_iters ping-pongs at 8 B, a stream of $bw_iters" \
  "x $window messages per size, $window sends in flight; see tools/chorus-bench/README.md," \
  "'--transports')"

# ---- ucx ----------------------------------------------------------------------------------------
echo
echo "== ucx: ucx_perftest tag_lat / tag_bw beside chorus-bench --transports $ucx_name"
if ! command -v ucx_perftest >/dev/null; then
  echo "   skipped: ucx_perftest is not installed (ucx-utils)"
elif ! have_transport "$ucx_name"; then
  echo "   skipped: no transport '$ucx_name' (the ucx plugin is not built or not in CHORUS_PLUGIN_PATH)"
else
  # chorus's endpoints ask UCX for peer error handling (UCP_ERR_HANDLING_MODE_PEER), so that a
  # dead peer is PEER_LOST; UCX refuses it over shared memory alone, where they go without. The
  # native peer runs both ways over tcp: plain, and with -e (the same error handling), which in
  # UCX 1.13 costs tcp most of its bandwidth. Over sm,self ucx_perftest -e fails as chorus's
  # request does, so plain is the same setting there.
  urow() { printf "  %-8s %9s %11s %11s %11s %12s %12s %12s\n" "$@"; }
  urow "UCX_TLS" "size" "native lat" "native -e" "chorus lat" "native MB/s" "native -e" "chorus MB/s"
  # The median of the figures given (failed runs left out); WRONG when any run had wrong bytes.
  median() {
    if printf '%s\n' "$@" | grep -qx WRONG; then
      echo WRONG
      return
    fi
    printf '%s\n' "$@" | grep -E '^[0-9.]+$' | sort -g |
      awk '{ v[NR] = $1 } END { if (NR == 0) print "failed";
             else if (NR % 2) print v[(NR + 1) / 2]; else printf "%.2f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
  }
  for tls in tcp sm,self; do
    log="$out/transports_ucx_${tls//,/_}"
    modes=("")
    [ "$tls" = tcp ] && modes+=("-e")
    declare -A native=() mine=()
    chorus_failed=0
    for ((round = 1; round <= rounds; ++round)); do
      if ! UCX_TLS=$tls chorus_run "$ucx_name" "$log.csv"; then
        echo "   UCX_TLS=$tls: chorus-bench --transports $ucx_name failed (see above)"
        chorus_failed=1
        break
      fi
      mine[lat]+=" $(chorus_figure "$log.csv" 8 latency_us)"
      for size in 1048576 4194304 16777216; do
        mine[bw$size]+=" $(chorus_figure "$log.csv" "$size" bandwidth_MBps)"
      done
      for mode in "${modes[@]}"; do
        # shellcheck disable=SC2086  # $mode is empty or one flag
        if UCX_TLS=$tls native_pair "$log.tag_lat$mode" ucx_perftest -p PORT $mode -- \
          ucx_perftest 127.0.0.1 -p PORT $mode -t tag_lat -s 8 -n "$lat_iters" -w 100 -f; then
          native[lat$mode]+=" $(ucx_final "$log.tag_lat$mode" | awk '{ print $2 }')"
        fi
        for size in 1048576 4194304 16777216; do
          # shellcheck disable=SC2086
          if UCX_TLS=$tls native_pair "$log.tag_bw_$size$mode" ucx_perftest -p PORT $mode -- \
            ucx_perftest 127.0.0.1 -p PORT $mode -t tag_bw -s "$size" -n $((bw_iters * window)) \
            -w "$window" -O "$window" -f; then
            native[bw$size$mode]+=" $(ucx_final "$log.tag_bw_$size$mode" | awk '{ print $6 }')"
          fi
        done
      done
    done
    if [ $chorus_failed -eq 0 ]; then
      # shellcheck disable=SC2086  # the figures are words
      same() { [ "$tls" = tcp ] && median ${native[$1-e]:-} || echo "(= plain)"; }
      # shellcheck disable=SC2086
      urow "$tls" 8 "$(median ${native[lat]:-})" "$(same lat)" "$(median ${mine[lat]})" "" "" ""
      for size in 1048576 4194304 16777216; do
        # shellcheck disable=SC2086
        urow "$tls" "$size" "" "" "" "$(median ${native[bw$size]:-})" "$(same "bw$size")" \
          "$(median ${mine[bw$size]})"
      done
    fi
    unset native mine
  done
  echo "   medians over $rounds alternating rounds; lat in us: ucx_perftest's 50.0%ile, chorus's" \
    "median of round trip / 2; MB/s:" \
    "bytes / time of a stream with up to $window sends in flight (ucx_perftest -O $window, its" \
    "'overall'; chorus the same way); -e: ucx_perftest with peer error handling, as chorus's" \
    "endpoints over tcp"
fi

# ---- ofi ----------------------------------------------------------------------------------------
echo
echo "== ofi: fi_pingpong -e rdm -m tagged beside chorus-bench --transports $ofi_name"
if ! command -v fi_pingpong >/dev/null; then
  echo "   skipped: fi_pingpong is not installed (libfabric-bin)"
elif ! have_transport "$ofi_name"; then
  echo "   skipped: no transport '$ofi_name' (the ofi plugin is not built or not in CHORUS_PLUGIN_PATH)"
else
  row "FI_PROVIDER" "size" "native us/xfer" "chorus mean us" "native MB/sec" "chorus size/mean"
  for provider in "tcp;ofi_rxm" shm; do
    log="$out/transports_ofi_${provider//;/_}"
    if ! FI_PROVIDER=$provider chorus_run "$ofi_name" "$log.csv"; then
      echo "   FI_PROVIDER=$provider: chorus-bench --transports $ofi_name failed (see above)"
      continue
    fi
    # chorus's 32 KiB, 64 KiB and 1 MiB ping-pongs beside fi_pingpong's: 500 after 20 warm-ups
    # (chorus_run's bandwidth run does only its few, which swing a lot).
    if ! FI_PROVIDER=$provider timeout -k 5 120 "$bin/chorus-bench" -n 2 \
      --transports "$ofi_name" -b 32K -e 64K -f 2 -w 20 -i 500 --timeout 60 \
      --csv "$log.pieces.csv" >/dev/null ||
      ! FI_PROVIDER=$provider timeout -k 5 120 "$bin/chorus-bench" -n 2 \
        --transports "$ofi_name" -b 1M -e 1M -w 20 -i 500 --timeout 60 \
        --csv "$log.pingpong.csv" >/dev/null; then
      echo "   FI_PROVIDER=$provider: chorus-bench --transports $ofi_name's ping-pongs failed" \
        "(see above)"
      continue
    fi
    for size in 8 32768 65536 1048576; do
      iters=$fi_lat_iters
      [ "$size" -gt 8 ] && iters=$fi_bw_iters
      native_us=failed native_mb=failed
      if native_pair "$log.fi_pingpong_$size" fi_pingpong -e rdm -m tagged -p "$provider" -B PORT \
        -I "$iters" -S "$size" -- fi_pingpong -e rdm -m tagged -p "$provider" -P PORT -I "$iters" \
        -S "$size" 127.0.0.1; then
        read -r native_mb native_us < <(awk 'NF == 8 && $1 ~ /^[0-9]/ { v = $6 " " $7 } END { print v }' \
          "$log.fi_pingpong_$size")
      fi
      pingpong_csv=$log.csv
      [ "$size" -gt 8 ] && pingpong_csv=$log.pieces.csv
      [ "$size" -gt 65536 ] && pingpong_csv=$log.pingpong.csv
      chorus_lat=$(chorus_figure "$pingpong_csv" "$size" latency_mean_us)
      chorus_pingpong_mb=$(awk -v b="$size" -v l="$chorus_lat" 'BEGIN { if (l > 0) printf "%.2f", b / l }')
      row "$provider" "$size" "$native_us" "$chorus_lat" "$native_mb" "$chorus_pingpong_mb"
    done
    echo "   $provider: chorus streaming at 1M, 4M, 16M (MB/s, 2^20):" \
      "$(chorus_figure "$log.csv" 1048576 bandwidth_MBps)," \
      "$(chorus_figure "$log.csv" 4194304 bandwidth_MBps)," \
      "$(chorus_figure "$log.csv" 16777216 bandwidth_MBps)"
  done
  echo "   us/xfer: fi_pingpong's mean of round trip / 2, as chorus's mean; MB/sec: 10^6 B/s over" \
    "both directions of the ping-pong, i.e. size / mean (round trip / 2); chorus size/mean is the" \
    "same figure"
fi

# ---- tcp ----------------------------------------------------------------------------------------
echo
echo "== tcp (the core's transport): chorus-bench --transports tcp (no native peer)"
log="$out/transports_tcp"
chorus_run tcp "$log.csv"
row "transport" "size" "" "chorus lat us" "" "chorus MB/s"
for size in 8 1048576 4194304 16777216; do
  row tcp "$size" "" "$(chorus_figure "$log.csv" "$size" latency_us)" "" \
    "$(chorus_figure "$log.csv" "$size" bandwidth_MBps)"
done
