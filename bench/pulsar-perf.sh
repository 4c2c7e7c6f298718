#!/usr/bin/env bash
# bench/pulsar-perf.sh — the upstream Go perf tool (pulsar-client-go/perf,
# pinned below and in bench/tools/go.mod) against a fresh `lakegate
# standalone`. Progress (the perf tool's log lines) goes to stderr, the
# Markdown table to stdout. See docs/benchmarks.md, "Pulsar perf tool".
#
# Environment:
#   PERF_DURATION  seconds per run (default 22). The tool prints its stats
#                  every 10 s, fixed, and nothing at exit; the table reports
#                  the LAST complete 10 s window, so 22 s = one warm-up
#                  window (0–10 s) + one measured window (10–20 s).
#   PERF_RUNS      space-separated runs, each kind:partitions:rate
#                  kind = produce | consume (a consumer, started first, plus a
#                  producer on the same topic); rate 0 = unthrottled.
#                  Default: "produce:1:0 produce:16:0 consume:1:20000 consume:16:20000"
#   PERF_SIZE      message bytes (default 1024)
#   PERF_PRODUCE_FLAGS  extra `produce` flags (default: the tool's batching
#                  defaults: -b 1 ms, 128 KiB, 1000 msgs, queue 1000)
#   PERF_GRACE     seconds the perf process gets to exit after SIGINT before
#                  it is dumped (SIGQUIT) and killed (default 3)
#   KEEP=1         keep the temporary directory (lakegate data + logs)
set -euo pipefail

PERF_MODULE=github.com/apache/pulsar-client-go
PERF_VERSION=v0.19.0

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
BIN=$ROOT/.cache/bin
PERF=$BIN/pulsar-perf-go
LAKEGATE=$BIN/lakegate
DURATION=${PERF_DURATION:-22}
RUNS=${PERF_RUNS:-"produce:1:0 produce:16:0 consume:1:20000 consume:16:20000"}
SIZE=${PERF_SIZE:-1024}
GRACE=${PERF_GRACE:-3}
PRODUCE_FLAGS=${PERF_PRODUCE_FLAGS:-}

say() { echo "pulsar-perf: $*" >&2; }
die() { say "FAIL: $*"; exit 1; }

# --- 1. the perf tool, pinned -------------------------------------------------
pinned=$(awk -v m="$PERF_MODULE" '$1==m {print $2}' bench/tools/go.mod)
[[ $pinned == "$PERF_VERSION" ]] || die "bench/tools/go.mod pins $PERF_MODULE ${pinned:-nothing}, this script $PERF_VERSION"
mkdir -p "$BIN"
have=$( (go version -m "$PERF" 2>/dev/null || true) | awk -v m="$PERF_MODULE" '$1=="mod" && $2==m {print $3}')
if [[ $have != "$PERF_VERSION" ]]; then
  say "building $PERF_MODULE/perf@$PERF_VERSION -> $PERF (bench/tools, go.sum-verified)"
  (cd bench/tools && go build -trimpath -o "$PERF" "$PERF_MODULE/perf")
fi

# --- 2. lakegate ----------------------------------------------------------------
say "building lakegate -> $LAKEGATE"
go build -o "$LAKEGATE" ./cmd/lakegate

TMP=$(mktemp -d "${TMPDIR:-/tmp}/lakegate-perf.XXXXXX")
LG_PID=
PIDS=()
cleanup() {
  local p
  for p in "${PIDS[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
  if [[ -n $LG_PID ]] && kill -0 "$LG_PID" 2>/dev/null; then kill -TERM "$LG_PID" 2>/dev/null; wait "$LG_PID" 2>/dev/null || true; fi
  if [[ ${KEEP:-0} == 1 ]]; then say "kept $TMP"; else rm -rf "$TMP"; fi
}
trap cleanup EXIT

# Ports: 127.0.0.1:0 everywhere (embedded etcd picks its own); the real
# addresses come from the ready line, so nothing can race for a port.
"$LAKEGATE" standalone --data-dir "$TMP/data" --pulsar-addr 127.0.0.1:0 --http-addr 127.0.0.1:0 \
  2>"$TMP/lakegate.log" &
LG_PID=$!
for _ in $(seq 1 600); do
  grep -q 'pulsar_url=' "$TMP/lakegate.log" && break
  kill -0 "$LG_PID" 2>/dev/null || { cat "$TMP/lakegate.log" >&2; die "lakegate exited before it was ready"; }
  sleep 0.1
done
ready=$(grep -m1 'pulsar_url=' "$TMP/lakegate.log") || die "lakegate not ready after 60 s"
URL=$(sed -E 's/.*pulsar_url=([^ ]+).*/\1/' <<<"$ready")
HTTP=http://$(sed -E 's/.* http=([^ ]+).*/\1/' <<<"$ready")
say "lakegate pid $LG_PID ready: $URL, admin $HTTP, data $TMP/data"

admin() { # method path [body]
  local out code
  out=$(curl -sS -X "$1" -H 'Content-Type: application/json' ${3:+--data "$3"} -w '\n%{http_code}' "$HTTP$2") || return 1
  code=${out##*$'\n'}
  if [[ $code != 2?? ]]; then say "admin $1 $2 -> $code ${out%$'\n'*}"; return 1; fi
  printf '%s' "${out%$'\n'*}"
}

# run_perf NAME ARGS...: starts the perf tool in the background (pid in
# PERF_PID); output in $TMP/NAME.log, its log lines mirrored to stderr.
run_perf() {
  local name=$1; shift
  local log=$TMP/$name.log
  "$PERF" --metrics -1 -u "$URL" "$@" >"$log" 2>&1 &
  local pid=$!
  PIDS+=("$pid")
  PERF_PID=$pid
  tail -n +1 -F --pid="$pid" "$log" 2>/dev/null | grep --line-buffered 'level=' | sed -u "s/^/[$name] /" >&2 &
}

# stop_perf NAME PID: SIGINT, then GRACE s; a process still alive is "hung":
# record its socket queues (Recv-Q > 0 = bytes lakegate sent that the client
# never read), dump its goroutines (SIGQUIT) into its log, kill it. The
# outcome, as text for the table, goes to NOTE.
stop_perf() {
  local name=$1 pid=$2 log=$TMP/$1.log note=exited rc
  kill -INT "$pid" 2>/dev/null || true
  for _ in $(seq 1 $((GRACE * 10))); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  if kill -0 "$pid" 2>/dev/null; then
    local rq
    rq=$(ss -tnpH 2>/dev/null | awk -v p="pid=$pid," 'index($0,p) {s+=$2} END {print s+0}')
    kill -QUIT "$pid" 2>/dev/null || true
    sleep 1
    kill -KILL "$pid" 2>/dev/null || true
    note="hung>${GRACE}s, killed; client Recv-Q ${rq} B unread"
    if grep -q 'chan send' "$log" && grep -A30 'chan send' "$log" | grep -q 'readFromConnection'; then
      note+="; its connection reader is blocked in the perf callback (chan send)"
    fi
  fi
  wait "$pid" 2>/dev/null && rc=0 || rc=$?
  local failing fatal
  failing=$(grep -o 'Failing [0-9]* messages on closing producer' "$log" | awk '{s+=$2} END {print s+0}' || true)
  fatal=$(grep -o 'level=fatal msg="[^"]*" error="[^"]*"' "$log" | head -1 | sed -E 's/.*msg="([^"]*)" error="([^"]*)".*/\1: \2/' || true)
  [[ $failing -gt 0 ]] && note+="; failed $failing pending batches on close"
  if [[ -n $fatal ]]; then note+="; exit $rc ($fatal)"; else note+="; exit $rc"; fi
  grep -q 'Failed to close producer' "$log" && note+="; 'Failed to close producer'"
  NOTE=$note
}

# last_stats LOG KIND: fields of the last "Stats - Publish|Consume rate" line.
last_stats() {
  local line
  line=$(grep "Stats - $2 rate" "$1" | tail -1) || true
  [[ -n $line ]] || { echo ""; return; }
  if [[ $2 == Publish ]]; then
    # Publish rate: R msg/s - M Mbps - \n\t\t\t\tLatency ms: 50% a -95% b - 99% c - 99.9% d - max e
    sed -E 's/.*Publish rate: *([0-9.]+) msg\/s.*50% *([0-9.]+) -95% *([0-9.]+) - 99% *([0-9.]+) - 99\.9% *([0-9.]+) - max *([0-9.]+).*/\1 \2 \3 \4 \5 \6/' <<<"$line"
  else
    sed -E 's/.*Consume rate: *([0-9.]+) msg\/s.*/\1/' <<<"$line"
  fi
}
windows() { grep -c "Stats - $2 rate" "$1" || true; }
mbs() { awk -v r="$1" -v s="$SIZE" 'BEGIN {printf "%.1f", r * s / 1e6}'; }

ROWS=()
n=0
for run in $RUNS; do
  IFS=: read -r kind parts rate <<<"$run"
  n=$((n + 1))
  topic=perf-$n-$kind-${parts}p
  if [[ $parts -gt 1 ]]; then
    admin PUT "/admin/v2/persistent/public/default/$topic/partitions" "$parts" >/dev/null || die "creating $topic"
  else
    admin PUT "/admin/v2/persistent/public/default/$topic" >/dev/null || die "creating $topic"
  fi
  say "run $n: $kind on $topic ($parts partition(s)), rate ${rate/#0/unthrottled}, ${SIZE} B, ${DURATION}s"
  cpid=
  if [[ $kind == consume ]]; then
    run_perf "$n-consume" consume -s perf-sub "persistent://public/default/$topic"
    cpid=$PERF_PID
    for _ in $(seq 1 100); do grep -q 'Subscribed\|Connected consumer' "$TMP/$n-consume.log" && break; sleep 0.1; done
    sleep 1
  elif [[ $kind != produce ]]; then
    die "unknown run kind $kind (produce|consume)"
  fi
  # shellcheck disable=SC2086
  run_perf "$n-produce" produce -r "$rate" -s "$SIZE" $PRODUCE_FLAGS "persistent://public/default/$topic"
  ppid_=$PERF_PID
  sleep "$DURATION"
  stop_perf "$n-produce" "$ppid_"
  pnote=$NOTE
  cons=- cmb=- backlog=-
  if [[ -n $cpid ]]; then
    sleep 1 # the consumer's window is aligned 1 s later; let it drain
    stop_perf "$n-consume" "$cpid"
    cnote=$NOTE
    c=$(last_stats "$TMP/$n-consume.log" Consume)
    [[ -n $c ]] && { cons=$c; cmb=$(mbs "$c"); }
    st=$(admin GET "/admin/v2/persistent/public/default/$topic/$([[ $parts -gt 1 ]] && echo partitioned-stats || echo stats)" || true)
    backlog=$(python3 -c 'import json,sys; d=json.load(sys.stdin); print(d.get("subscriptions",{}).get("perf-sub",{}).get("msgBacklog","?"))' <<<"$st" 2>/dev/null || echo "?")
    pnote+=" / consumer: $cnote"
  fi
  s=$(last_stats "$TMP/$n-produce.log" Publish)
  if [[ -z $s ]]; then
    ROWS+=("| $kind | $parts | ${rate/#0/max} | (no stats line: run longer than 10 s) | | | | | | | $cons | $cmb | $backlog | $pnote |")
    continue
  fi
  read -r r p50 p95 p99 p999 pmax <<<"$s"
  ROWS+=("| $kind | $parts | ${rate/#0/max} | $r | $(mbs "$r") | $p50 | $p95 | $p99 | $p999 | $pmax | $cons | $cmb | $backlog | $(windows "$TMP/$n-produce.log" Publish) | $pnote |")
done

# --- 3. stop lakegate, check it went cleanly ------------------------------------
say "stopping lakegate (SIGTERM)"
kill -TERM "$LG_PID"
lg_rc=0
for _ in $(seq 1 600); do kill -0 "$LG_PID" 2>/dev/null || break; sleep 0.1; done
if kill -0 "$LG_PID" 2>/dev/null; then die "lakegate still running 60 s after SIGTERM"; fi
wait "$LG_PID" || lg_rc=$?
LG_PID=
errs=$(grep -c 'level=ERROR' "$TMP/lakegate.log" || true)
warns=$(grep -c 'level=WARN' "$TMP/lakegate.log" || true)

echo "perf $PERF_MODULE/perf@$PERF_VERSION, ${SIZE} B messages, ${DURATION} s per run; figures = last complete 10 s stats window"
echo
echo "| run | partitions | rate msg/s | publish msg/s | MB/s | p50 ms | p95 ms | p99 ms | p99.9 ms | max ms | consume msg/s | consume MB/s | backlog after | windows | perf close |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"
printf '%s\n' "${ROWS[@]}"
echo
echo "end-to-end latency: not reported by perf@$PERF_VERSION (its consumer prints rates only)"
echo "lakegate: exit status $lg_rc after SIGTERM; $errs ERROR and $warns WARN log lines"
[[ $errs -gt 0 ]] && grep 'level=ERROR' "$TMP/lakegate.log" | head -5 >&2
[[ $lg_rc -eq 0 ]] || die "lakegate exited with status $lg_rc"
