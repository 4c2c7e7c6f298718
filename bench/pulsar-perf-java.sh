#!/usr/bin/env bash
# bench/pulsar-perf-java.sh — Pulsar's own Java load tool (pulsar-perf:
# org.apache.pulsar:pulsar-testclient, pinned in bench/java/pom.xml, run
# through bench/java's PerfLauncher: the stock tool with only its produce/
# consume/read commands registered) against a fresh `lakegate standalone` on
# free loopback ports. Progress goes to stderr, the Markdown table to stdout.
# See docs/benchmarks.md, "Pulsar's Java perf tool".
#
# Invocation of the tool, per run (CONF = a client.conf with brokerServiceUrl
# and webServiceUrl of the node):
#   java -cp <classes:deps> lakegate.bench.PerfLauncher CONF produce -r RATE -s SIZE -o OUTSTANDING -time SECS TOPIC
#   java -cp <classes:deps> lakegate.bench.PerfLauncher CONF consume -s SUB -time SECS TOPIC
#
# Environment:
#   PERF_DURATION     seconds of producing per run (default 15)
#   PERF_RUNS         space-separated runs, each kind:partitions:rate
#                     kind = produce | consume (a consumer, started first,
#                     plus a producer on the same topic). Default:
#                     "produce:1:1000000 produce:4:1000000 consume:1:5000"
#                     (1000000 ≈ as fast as the outstanding bound allows)
#   PERF_SIZE         message bytes (default 1024)
#   PERF_OUTSTANDING  producer's max outstanding messages (-o, default 1000):
#                     bounds the client queue, so latency is the broker's
#   KEEP=1            keep the temporary directory (lakegate data + logs)
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
M2=${LAKEGATE_M2:-$ROOT/.cache/m2}
OUT=$ROOT/.cache/pulsar-perf-java
DURATION=${PERF_DURATION:-15}
RUNS=${PERF_RUNS:-"produce:1:1000000 produce:4:1000000 consume:1:5000"}
SIZE=${PERF_SIZE:-1024}
OUTSTANDING=${PERF_OUTSTANDING:-1000}

say() { echo "pulsar-perf-java: $*" >&2; }
die() { say "FAIL: $*"; exit 1; }

# --- 1. the tool, pinned (idempotent: skipped when pom + sources are unchanged)
want=$(cd bench/java && find pom.xml src -type f | LC_ALL=C sort | xargs sha256sum | sha256sum | cut -d' ' -f1)
if [[ ! -f $OUT/.stamp || $(cat "$OUT/.stamp") != "$want" || ! -s $OUT/classpath.txt ]]; then
  say "resolving pulsar-testclient and compiling the launcher (Maven, repository $M2)"
  mkdir -p "$M2"
  mvn -q -B -Dstyle.color=never -Dmaven.repo.local="$M2" -f bench/java/pom.xml compile >&2
  echo "$want" > "$OUT/.stamp"
fi
CP=$OUT/target/classes:$(cat "$OUT/classpath.txt")
version=$(sed -n 's:.*<pulsar.version>\(.*\)</pulsar.version>.*:\1:p' bench/java/pom.xml)

# --- 2. lakegate ------------------------------------------------------------------
mkdir -p .cache/bin
say "building lakegate"
go build -o .cache/bin/lakegate ./cmd/lakegate
TMP=$(mktemp -d "${TMPDIR:-/tmp}/lakegate-perf-java.XXXXXX")
LG_PID=
PIDS=()
cleanup() {
  local p
  for p in "${PIDS[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
  if [[ -n $LG_PID ]] && kill -0 "$LG_PID" 2>/dev/null; then kill -TERM "$LG_PID" 2>/dev/null; wait "$LG_PID" 2>/dev/null || true; fi
  if [[ ${KEEP:-0} == 1 ]]; then say "kept $TMP"; else rm -rf "$TMP"; fi
}
trap cleanup EXIT
.cache/bin/lakegate standalone --data-dir "$TMP/data" --pulsar-addr 127.0.0.1:0 --http-addr 127.0.0.1:0 \
  2>"$TMP/lakegate.log" &
LG_PID=$!
ready=
for _ in $(seq 1 600); do
  ready=$(grep -m1 'pulsar_url=' "$TMP/lakegate.log" || true)
  [[ -n $ready ]] && break
  kill -0 "$LG_PID" 2>/dev/null || { cat "$TMP/lakegate.log" >&2; die "lakegate exited before it was ready"; }
  sleep 0.1
done
[[ -n $ready ]] || die "lakegate not ready after 60 s"
URL=$(sed -E 's/.*pulsar_url=([^ ]+).*/\1/' <<<"$ready")
HTTP=http://$(sed -E 's/.* http=([^ ]+).*/\1/' <<<"$ready")
printf 'brokerServiceUrl=%s\nwebServiceUrl=%s\n' "$URL" "$HTTP" >"$TMP/client.conf"
say "lakegate pid $LG_PID ready: $URL, admin $HTTP"

perf() { # LOG ARGS...: the tool in the background, pid in PERF_PID
  local log=$1; shift
  java -Dorg.slf4j.simpleLogger.defaultLogLevel=info -cp "$CP" lakegate.bench.PerfLauncher "$TMP/client.conf" "$@" >"$log" 2>&1 &
  PERF_PID=$!
  PIDS+=("$PERF_PID")
}
# agg LOG: "records p50 p95 p99 p99.9 max" from the tool's Aggregated lines
# at exit. (Its aggregated msg/s divides by the whole process lifetime,
# client start and close included, so the table derives rates from the
# record count and the producing time instead.)
agg() {
  local t l
  t=$(grep -m1 'Aggregated throughput stats' "$1" | sed -E 's/.* --- ([0-9]+) records (sent|received) .*/\1/') || true
  l=$(grep -m1 'Aggregated latency stats' "$1" |
    sed -E 's/.*med: *([0-9.]+) - 95pct: *([0-9.]+) - 99pct: *([0-9.]+) - 99\.9pct: *([0-9.]+) - .*Max: *([0-9.]+).*/\1 \2 \3 \4 \5/') || true
  echo "${t:-?} ${l:-? ? ? ? ?}"
}
rate() { awk -v n="$1" -v d="$DURATION" 'BEGIN { if (n == "?") print "?"; else printf "%.0f", n / d }'; }
mbs() { awk -v r="$1" -v s="$SIZE" 'BEGIN { if (r == "?") print "?"; else printf "%.1f", r * s / 1e6 }'; }

ROWS=()
n=0
for run in $RUNS; do
  IFS=: read -r kind parts rate <<<"$run"
  n=$((n + 1))
  topic=persistent://public/default/perf-java-$n-$kind-${parts}p
  if [[ $parts -gt 1 ]]; then
    curl -fsS -X PUT -H 'Content-Type: application/json' --data "$parts" \
      "$HTTP/admin/v2/persistent/public/default/perf-java-$n-$kind-${parts}p/partitions" >/dev/null || die "creating $topic"
  fi
  say "run $n: $kind on $topic ($parts partition(s)), rate $rate, ${SIZE} B, ${DURATION}s"
  cpid=
  if [[ $kind == consume ]]; then
    perf "$TMP/$n-consume.log" consume -s perf-sub -time $((DURATION + 8)) "$topic"
    cpid=$PERF_PID
    for _ in $(seq 1 200); do grep -q 'Created.*consumer\|Subscribed' "$TMP/$n-consume.log" && break; sleep 0.1; done
  elif [[ $kind != produce ]]; then
    die "unknown run kind $kind (produce|consume)"
  fi
  perf "$TMP/$n-produce.log" produce -r "$rate" -s "$SIZE" -o "$OUTSTANDING" -time "$DURATION" "$topic"
  wait "$PERF_PID" || say "producer exited with status $?"
  read -r sent p50 p95 p99 p999 pmax <<<"$(agg "$TMP/$n-produce.log")"
  r=$(rate "$sent")
  recv=- e50=- e99=-
  if [[ -n $cpid ]]; then
    wait "$cpid" || say "consumer exited with status $?"
    read -r recv e50 _ e99 _ _ <<<"$(agg "$TMP/$n-consume.log")"
  fi
  ROWS+=("| $kind | $parts | $rate | $sent | $r | $(mbs "$r") | $p50 | $p95 | $p99 | $p999 | $pmax | $recv | $e50 | $e99 |")
done

say "stopping lakegate (SIGTERM)"
kill -TERM "$LG_PID"
lg_rc=0
wait "$LG_PID" || lg_rc=$?
LG_PID=
errs=$(grep -c 'level=ERROR' "$TMP/lakegate.log" || true)

echo "pulsar-perf (org.apache.pulsar:pulsar-testclient:$version), ${SIZE} B messages, ${DURATION} s of producing per run, max outstanding $OUTSTANDING"
echo "msg/s = records sent / ${DURATION} s; latencies = the tool's aggregated percentiles over the whole run; e2e = publish to receive (consumer)"
echo
echo "| run | partitions | rate msg/s | sent | publish msg/s | MB/s | publish p50 ms | p95 ms | p99 ms | p99.9 ms | max ms | received | e2e p50 ms | e2e p99 ms |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
printf '%s\n' "${ROWS[@]}"
echo
echo "lakegate: exit status $lg_rc after SIGTERM; $errs ERROR log lines"
[[ $lg_rc -eq 0 ]] || die "lakegate exited with status $lg_rc"
