#!/usr/bin/env bash
# bench/tables-cluster.sh (make bench-compaction) — does compaction keep up
# with ingest on a cluster? Three `lakegate serve` nodes and one etcd member
# on this machine (e2e/interop/nodes.sh), the upstream Go perf tool
# producing to a 6-partition topic at fixed rates. Each rate runs twice on a
# fresh cluster: once with the compaction worker off on every node (the CPU
# baseline of ingest alone) and once on (`tables.age` 2 s: compaction runs
# continuously behind the producers). Reported per rate: produced MB/s
# (message bytes), compacted MB/s over the same window (records moved into
# the tables × message size) and Parquet MB/s written, the compaction lag
# when the producer stops and how long the tables take to catch up
# (waited for on the nodes' lakegate_compaction_lag_records, bounded), and
# CPU: the nodes' CPU seconds (utime+stime from /proc) with and without
# compaction, the difference per compacted MB, and the compaction calls'
# own wall time per MB (lakegate_compaction_seconds).
#
# The perf tool's payloads are zero bytes: they compress to almost nothing,
# so Parquet MB/s is small and the CPU is that of decoding and writing the
# rows, not of compressing real data (BenchmarkCompactToTable measures that
# on JSON). Progress goes to stderr, the Markdown table to stdout. See
# docs/benchmarks.md, "Compaction on a cluster".
#
# Environment:
#   RATES     space-separated produce rates, msg/s (default "2000 6000 12000")
#   SIZE      message bytes (default 1024)
#   DURATION  seconds of producing per run (default 40)
#   KEEP=1    keep the temporary directory
set -euo pipefail

PERF_MODULE=github.com/apache/pulsar-client-go
PERF_VERSION=v0.19.0

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"
BIN=$repo/.cache/bin
PERF=$BIN/pulsar-perf-go
LAKEGATE=$BIN/lakegate
RATES=${RATES:-"2000 6000 12000"}
SIZE=${SIZE:-1024}
DURATION=${DURATION:-40}
PARTS=6

say() { echo "tables-cluster: $*" >&2; }
die() { say "FAIL: $*"; exit 1; }
# shellcheck source=../e2e/interop/nodes.sh
source "$repo/e2e/interop/nodes.sh"

pinned=$(awk -v m="$PERF_MODULE" '$1==m {print $2}' bench/tools/go.mod)
[[ $pinned == "$PERF_VERSION" ]] || die "bench/tools/go.mod pins $PERF_MODULE ${pinned:-nothing}, this script $PERF_VERSION"
mkdir -p "$BIN"
have=$( (go version -m "$PERF" 2>/dev/null || true) | awk -v m="$PERF_MODULE" '$1=="mod" && $2==m {print $3}')
if [[ $have != "$PERF_VERSION" ]]; then
  say "building $PERF_MODULE/perf@$PERF_VERSION -> $PERF"
  (cd bench/tools && go build -trimpath -o "$PERF" "$PERF_MODULE/perf")
fi
say "building lakegate -> $LAKEGATE"
go build -o "$LAKEGATE" ./cmd/lakegate

tmp=$(mktemp -d "${TMPDIR:-/tmp}/lakegate-tables-cluster.XXXXXX")
PERF_PID=
cleanup() {
  [[ -n $PERF_PID ]] && kill -KILL "$PERF_PID" 2>/dev/null || true
  stop_lakegate >/dev/null 2>&1 || true
  if [[ ${KEEP:-0} == 1 ]]; then say "kept $tmp"; else rm -rf "$tmp"; fi
}
trap cleanup EXIT

# metric NAME: the sum over every node of a metric's samples.
metric() {
  local h sum=0 v
  for log in "${lg_logs[@]}"; do
    h=http://$(attr "$(grep -m1 'lakegate node ready' "$log")" http)
    v=$(curl -fsS "$h/metrics" | awk -v m="$1" '$1==m || index($1, m"{")==1 {s+=$2} END {printf "%.0f", s+0}')
    sum=$((sum + v))
  done
  echo "$sum"
}
# metricf NAME: the same, as a float.
metricf() {
  local h out=()
  for log in "${lg_logs[@]}"; do
    h=http://$(attr "$(grep -m1 'lakegate node ready' "$log")" http)
    out+=("$(curl -fsS "$h/metrics" | awk -v m="$1" '$1==m {s+=$2} END {printf "%.3f", s+0}')")
  done
  awk 'BEGIN {s=0; for (i=1; i<ARGC; i++) s+=ARGV[i]; printf "%.3f", s}' "${out[@]}"
}
# table_lag TOPIC: records of the topic's partitions not in its tables yet
# (the admin table endpoint: log end − compacted end, read from etcd).
table_lag() {
  curl -fsS "$lg_http_url/admin/v2/persistent/public/default/$1/table" 2>/dev/null |
    python3 -c 'import json,sys
try:
    d = json.load(sys.stdin)
except ValueError:
    print(-1); sys.exit()
print(sum(p.get("lag", 0) for p in d.get("partitions", [])))'
}
# cpu: CPU seconds (user+system) of the lakegate nodes so far.
cpu() {
  local tck pid sum=0 t
  tck=$(getconf CLK_TCK)
  for pid in "${lg_pids[@]}"; do
    t=$(awk '{print $14+$15}' "/proc/$pid/stat")
    sum=$((sum + t))
  done
  awk -v s="$sum" -v t="$tck" 'BEGIN {printf "%.2f", s/t}'
}

# run RATE MODE: one fresh cluster, one produce window; sets R_* results.
run() {
  local rate=$1 mode=$2 flags=(--tables-age 2s --tables-interval 500ms --tables-scan-interval 1s)
  [[ $mode == off ]] && flags+=(--tables-compaction=false)
  tmp_run=$tmp/$rate-$mode
  mkdir -p "$tmp_run"
  local tmp_saved=$tmp
  tmp=$tmp_run
  lg_logs=() # nodes.sh keeps the previous cluster's logs
  LAKEGATE_NODES=3 start_lakegate "$LAKEGATE" "${flags[@]}" >&2
  tmp=$tmp_saved
  local topic=compaction-$rate-$mode
  curl -fsS -X PUT -H 'Content-Type: application/json' --data "$PARTS" \
    "$lg_http_url/admin/v2/persistent/public/default/$topic/partitions" >/dev/null || die "creating $topic"
  local a0 c0 f0 s0 cpu0
  a0=$(metric lakegate_engine_append_bytes_total)
  c0=$(metric lakegate_engine_compacted_records_total)
  f0=$(metric lakegate_engine_compacted_bytes_total)
  s0=$(metricf lakegate_compaction_seconds_sum)
  cpu0=$(cpu)
  say "rate $rate msg/s × $SIZE B, compaction $mode: producing for ${DURATION}s"
  "$PERF" --metrics -1 -u "$lg_pulsar_url" produce -r "$rate" -s "$SIZE" "persistent://public/default/$topic" \
    >"$tmp_run/perf.log" 2>&1 &
  PERF_PID=$!
  # The load runs for DURATION (the measurement window); everything is
  # sampled at its end, before the producer is stopped.
  sleep "$DURATION"
  R_CPU=$(awk -v a="$(cpu)" -v b="$cpu0" 'BEGIN {printf "%.1f", a-b}')
  R_APPEND=$(( $(metric lakegate_engine_append_bytes_total) - a0 ))
  R_REC=$(( $(metric lakegate_engine_compacted_records_total) - c0 ))
  R_FILE=$(( $(metric lakegate_engine_compacted_bytes_total) - f0 ))
  R_SEC=$(awk -v a="$(metricf lakegate_compaction_seconds_sum)" -v b="$s0" 'BEGIN {printf "%.2f", a-b}')
  R_LAG=-
  [[ $mode == on ]] && R_LAG=$(table_lag "$topic")
  local t0=$EPOCHREALTIME
  kill -INT "$PERF_PID" 2>/dev/null || true
  for _ in $(seq 1 50); do kill -0 "$PERF_PID" 2>/dev/null || break; sleep 0.1; done # 5 s to exit
  kill -KILL "$PERF_PID" 2>/dev/null || true
  wait "$PERF_PID" 2>/dev/null || true
  PERF_PID=
  R_MSGS=$(grep 'Stats - Publish rate' "$tmp_run/perf.log" | sed -E 's/.*Publish rate: *([0-9.]+) msg\/s.*/\1/' | tail -1)
  R_DRAIN=-
  if [[ $mode == on ]]; then
    local lag=$R_LAG
    for _ in $(seq 1 600); do # catching up: bounded at 120 s
      lag=$(table_lag "$topic")
      [[ $lag == 0 ]] && break
      sleep 0.2
    done
    [[ $lag == 0 ]] && R_DRAIN=$(awk -v a="$EPOCHREALTIME" -v b="$t0" 'BEGIN {printf "%.1f", a-b}') || R_DRAIN=">120 (lag $lag)"
  fi
  stop_lakegate >&2 || say "a node did not stop cleanly"
}

rows=()
for rate in $RATES; do
  run "$rate" off
  off_cpu=$R_CPU
  run "$rate" on
  mb=$(awk -v r="$R_REC" -v s="$SIZE" 'BEGIN {printf "%.1f", r*s/1e6}')
  rows+=("$(awk -v rate="$rate" -v msgs="${R_MSGS:-?}" -v app="$R_APPEND" -v rec="$R_REC" -v file="$R_FILE" -v d="$DURATION" \
    -v s="$SIZE" -v lag="$R_LAG" -v drain="$R_DRAIN" -v con="$R_CPU" -v coff="$off_cpu" -v sec="$R_SEC" -v mb="$mb" 'BEGIN {
      prod = app / d / 1e6; comp = rec * s / d / 1e6; parq = file / d / 1e6
      extra = con - coff; per = (mb > 0) ? extra / mb : 0; wall = (mb > 0) ? sec / mb : 0
      printf "| %d | %s | %.2f | %.2f | %.2f | %s | %s | %.1f | %.1f | %.3f | %.3f |", rate, msgs, prod, comp, parq, lag, drain, coff, con, per, wall
    }')")
done

echo
echo "| rate (msg/s) | perf publish rate | produced MB/s (entries) | compacted MB/s (messages) | Parquet MB/s | lag at the window's end (records) | all in the tables after (s, from the end) | CPU s, compaction off | CPU s, on | extra CPU s per compacted MB | compaction wall s per MB |"
echo "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
printf '%s\n' "${rows[@]}"
