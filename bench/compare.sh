#!/usr/bin/env bash
# bench/compare.sh — `make bench-compare`: lakegate standalone and Apache
# Pulsar 4.0.8 standalone on the same machine, one server at a time, a fresh
# server (fresh data directory) for every run, driven by the same loads in
# alternating repeats. See docs/benchmarks.md, "lakegate and Apache Pulsar
# side by side".
#
# Loads (name = tool kind partitions rate):
#   max1     pulsar-perf produce, 1 partition, as fast as -o allows
#   max8     pulsar-perf produce, 8 partitions
#   max100   pulsar-perf produce, 100 partitions
#   max1000  pulsar-perf produce, 1000 partitions
#   fixed20k pulsar-perf produce, 1 partition, 20 000 msg/s (publish latency)
#   e2e10k   pulsar-perf consume + produce, 1 partition, 10 000 msg/s
#            (end-to-end latency: publish time to receive)
#   goe2e10k the same with the Go client (bench/tools/e2e, lakegate-e2e): a
#            producer and a consumer in one process, latency on one clock,
#            no client JIT warming up inside the measured window
#   drain    pulsar-perf produce 1 000 000 messages (a subscription exists
#            first, so they are backlog), then a consumer reads them from the
#            start: the catch-up read path
#   godrain  the same, read by the Go client (lakegate-e2e -drain): less CPU
#            per message than pulsar-perf's consumer, which bounds drain
#   godrain2 the same read by two Go consumers (Shared subscription, one
#            client and connection each): one reader's goroutines bound
#            godrain on lakegate, two show more of the server's read path
#   godrainp2 the same on a topic of two partitions, one Go consumer
#            (Exclusive, its own client) per partition: a consumer group
#   gomax1   the Go perf tool (pulsar-client-go perf) produce, 1 partition,
#            unthrottled (its last complete 10 s window)
# Every pulsar-perf run: 1 KiB messages, batching on (the tool's defaults),
# -o 1000 outstanding messages.
#
# Per run it records throughput, latency percentiles, the server's CPU
# (utime+stime of its process over the run, in % of one core), its peak
# RSS (VmHWM: the server is fresh each run, so this is the run's peak), and
# the pulsar-perf processes' CPU over the run (client CPU: on 2 shared cores
# the client can be the bottleneck) and the load average at its end.
# Results: $OUT/results.tsv (one line per run), $OUT/summary.md (medians and
# the ratio table, also printed), $OUT/latency.png (percentile plot).
#
# Environment:
#   COMPARE_REPEATS   repeats of every (load, target) pair (default 2); the
#                     order of targets alternates between repeats
#   COMPARE_LOADS     loads to run (default "max1 max8 max100 max1000 fixed20k e2e10k goe2e10k drain godrain godrain2 godrainp2 gomax1")
#   COMPARE_TARGETS   servers (default "lakegate pulsar"; add pulsar-nofsync for
#                     Pulsar with journalSyncData=false)
#   COMPARE_DURATION  seconds of producing per pulsar-perf run (default 15)
#   COMPARE_DRAIN     messages of the drain load (default 1000000)
#   COMPARE_OUT       output directory (default .cache/compare/<time>)
#   COMPARE_DOC=1     write the summary and the plot into docs/benchmarks.md
#                     (between the bench-compare markers) and docs/img/
#   LAKEGATE_BIN      lakegate binary to measure (default: built from this tree)
#   LAKEGATE_ARGS     extra flags for `lakegate standalone`
#   LAKEGATE_PROFILE=1  CPU profile of every lakegate run into $OUT (pprof)
# Every lakegate run also leaves its /metrics at the end of the run in
# $OUT/<load>-lakegate-<rep>.metrics (the publish, WAL flush and etcd
# transaction histograms).
#   LAKEGATE_M2       Maven repository (default .cache/m2)
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
REPEATS=${COMPARE_REPEATS:-2}
LOADS=${COMPARE_LOADS:-"max1 max8 max100 max1000 fixed20k e2e10k goe2e10k drain godrain godrain2 godrainp2 gomax1"}
TARGETS=${COMPARE_TARGETS:-"lakegate pulsar"}
DURATION=${COMPARE_DURATION:-15}
DRAIN=${COMPARE_DRAIN:-1000000}
SIZE=1024
OUTSTANDING=1000
OUT=${COMPARE_OUT:-$ROOT/.cache/compare/$(date -u +%Y%m%dT%H%M%SZ)}
M2=${LAKEGATE_M2:-$ROOT/.cache/m2}
HZ=$(getconf CLK_TCK)

say() { echo "bench-compare [$(date -u +%H:%M:%S)]: $*" >&2; }
die() { say "FAIL: $*"; exit 1; }
mkdir -p "$OUT"

# --- 1. tools, pinned and installed into .cache by the project's own files ---
mvn_resolve() { # POM OUTDIR: resolve (and compile) a bench Java module once per content hash
  local pom=$1 out=$2 dir want
  dir=$(dirname "$pom")
  want=$(cd "$dir" && find . -type f | LC_ALL=C sort | xargs sha256sum | sha256sum | cut -d' ' -f1)
  if [[ ! -f $out/.stamp || $(cat "$out/.stamp") != "$want" || ! -s $out/classpath.txt ]]; then
    say "resolving $pom with Maven (repository $M2)"
    mkdir -p "$M2" "$out"
    mvn -q -B -Dstyle.color=never -s bench/pulsar/settings.xml -Dmaven.repo.local="$M2" -f "$pom" compile >&2
    echo "$want" >"$out/.stamp"
  fi
}
mvn_resolve bench/pulsar/pom.xml .cache/pulsar-standalone
mvn_resolve bench/java/pom.xml .cache/pulsar-perf-java
PULSAR_CP=$(cat .cache/pulsar-standalone/classpath.txt)
PERF_CP=.cache/pulsar-perf-java/target/classes:$(cat .cache/pulsar-perf-java/classpath.txt)
GOPERF=.cache/bin/pulsar-perf-go
mkdir -p .cache/bin
if [[ ! -x $GOPERF ]]; then
  say "building the Go perf tool (bench/tools) -> $GOPERF"
  (cd bench/tools && go build -trimpath -o "$ROOT/$GOPERF" github.com/apache/pulsar-client-go/perf)
fi
E2E=.cache/bin/lakegate-e2e
say "building the Go end-to-end tool (bench/tools/e2e) -> $E2E"
(cd bench/tools && go build -o "$ROOT/$E2E" ./e2e)
PLOT=.cache/bin/lakegate-plot
say "building the plotter (bench/tools/plot) -> $PLOT"
(cd bench/tools && go build -o "$ROOT/$PLOT" ./plot)
if [[ -z ${LAKEGATE_BIN:-} ]]; then
  say "building lakegate"
  go build -o .cache/bin/lakegate ./cmd/lakegate
  LAKEGATE_BIN=$ROOT/.cache/bin/lakegate
fi

# --- 2. servers -------------------------------------------------------------------
SRV_PID= SRV_DIR= URL= HTTP=
PIDS=()
cleanup() {
  local p
  for p in "${PIDS[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
  stop_server || true
}
trap cleanup EXIT
freeport() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'; }

start_lakegate() { # RUNNAME
  SRV_DIR=$(mktemp -d "${TMPDIR:-/tmp}/compare-lakegate.XXXXXX")
  local prof=
  [[ ${LAKEGATE_PROFILE:-0} == 1 ]] && prof=$OUT/$1.lakegate.pprof
  # shellcheck disable=SC2086
  LAKEGATE_CPUPROFILE=$prof "$LAKEGATE_BIN" standalone --data-dir "$SRV_DIR/data" \
    --pulsar-addr 127.0.0.1:0 --http-addr 127.0.0.1:0 ${LAKEGATE_ARGS:-} 2>"$SRV_DIR/server.log" &
  SRV_PID=$!
  local ready=
  for _ in $(seq 1 600); do
    ready=$(grep -m1 'pulsar_url=' "$SRV_DIR/server.log" || true)
    [[ -n $ready ]] && break
    kill -0 "$SRV_PID" 2>/dev/null || { tail -20 "$SRV_DIR/server.log" >&2; die "lakegate exited before it was ready"; }
    sleep 0.1
  done
  [[ -n $ready ]] || die "lakegate not ready after 60 s"
  URL=$(sed -E 's/.*pulsar_url=([^ ]+).*/\1/' <<<"$ready")
  HTTP=http://$(sed -E 's/.* http=([^ ]+).*/\1/' <<<"$ready")
}

start_pulsar() { # RUNNAME FSYNC(true|false)
  SRV_DIR=$(mktemp -d "${TMPDIR:-/tmp}/compare-pulsar.XXXXXX")
  local bp wp bkp
  bp=$(freeport) wp=$(freeport) bkp=$(freeport)
  mkdir -p "$SRV_DIR/conf"
  cat >"$SRV_DIR/conf/standalone.conf" <<EOF
clusterName=standalone
bindAddress=127.0.0.1
advertisedAddress=127.0.0.1
brokerServicePort=$bp
webServicePort=$wp
managedLedgerDefaultEnsembleSize=1
managedLedgerDefaultWriteQuorum=1
managedLedgerDefaultAckQuorum=1
brokerDeleteInactiveTopicsEnabled=false
functionsWorkerEnabled=false
EOF
  # The bookie turns read-only when its disk is more than 95 % used
  # (diskUsageThreshold, counted as 1 - usable/total: space reserved for
  # root counts as used); topic creation then fails with a bare HTTP 500.
  local used
  used=$(df -P "$SRV_DIR" | awk 'NR == 2 { printf "%.0f", 100 - 100 * $4 / $2 }')
  [[ $used -lt 95 ]] || die "the disk of $SRV_DIR is $used % used (counting reserved blocks); Pulsar's bookie is read-only above 95 %: free some space"
  # The bookie's own settings (PulsarStandalone reads conf/bookkeeper.conf).
  echo "journalSyncData=$2" >"$SRV_DIR/conf/bookkeeper.conf"
  cat >"$SRV_DIR/conf/log4j2.xml" <<'EOF'
<Configuration status="warn">
  <Appenders><Console name="c" target="SYSTEM_OUT"><PatternLayout pattern="%d{HH:mm:ss.SSS} %-5level %c{1} %msg%n"/></Console></Appenders>
  <Loggers><Root level="warn"><AppenderRef ref="c"/></Root>
    <Logger name="org.apache.pulsar.broker.PulsarService" level="info"/></Loggers>
</Configuration>
EOF
  # As the binary distribution's bin/pulsar standalone runs it (its
  # default heap is 2 GiB; 1 GiB here, the machine is small), Java 17.
  (cd "$SRV_DIR" && exec java -Xms1g -Xmx1g -XX:MaxDirectMemorySize=1g -XX:+UseZGC \
    -Dlog4j.configurationFile=conf/log4j2.xml -Dpulsar.allocator.exit_on_oom=true \
    --add-opens java.base/java.io=ALL-UNNAMED --add-opens java.base/java.lang=ALL-UNNAMED \
    --add-opens java.base/java.util=ALL-UNNAMED --add-opens java.base/sun.net=ALL-UNNAMED \
    --add-opens java.management/sun.management=ALL-UNNAMED --add-opens jdk.management/com.sun.management.internal=ALL-UNNAMED \
    --add-opens java.base/jdk.internal.misc=ALL-UNNAMED --add-opens java.base/jdk.internal.platform=ALL-UNNAMED \
    -cp "$PULSAR_CP" org.apache.pulsar.PulsarStandaloneStarter --config conf/standalone.conf -nfw -nss \
    --bookkeeper-port "$bkp" --metadata-dir data/metadata --bookkeeper-dir data/bookkeeper) >"$SRV_DIR/server.log" 2>&1 &
  SRV_PID=$!
  URL=pulsar://127.0.0.1:$bp HTTP=http://127.0.0.1:$wp
  for _ in $(seq 1 1200); do
    grep -q 'messaging service is ready' "$SRV_DIR/server.log" && curl -fsS "$HTTP/admin/v2/namespaces/public" >/dev/null 2>&1 &&
      curl -fsS "$HTTP/admin/v2/namespaces/public/default" >/dev/null 2>&1 && return 0
    kill -0 "$SRV_PID" 2>/dev/null || { tail -20 "$SRV_DIR/server.log" >&2; die "pulsar exited before it was ready"; }
    sleep 0.1
  done
  die "pulsar not ready after 120 s"
}

stop_server() {
  [[ -n $SRV_PID ]] || return 0
  kill -TERM "$SRV_PID" 2>/dev/null || true
  for _ in $(seq 1 300); do kill -0 "$SRV_PID" 2>/dev/null || break; sleep 0.1; done
  kill -KILL "$SRV_PID" 2>/dev/null || true
  wait "$SRV_PID" 2>/dev/null || true
  SRV_PID=
  if [[ ${KEEP:-0} == 1 ]]; then say "kept $SRV_DIR"; else rm -rf "$SRV_DIR"; fi
}

cpu_ticks() { awk '{print $14 + $15}' "/proc/$SRV_PID/stat"; }
rss_mib() { awk '/^VmHWM/ {printf "%.0f", $2 / 1024}' "/proc/$SRV_PID/status"; }

admin() { # METHOD PATH [BODY]
  curl -fsS -X "$1" -H 'Content-Type: application/json' ${3:+--data "$3"} "$HTTP$2" >/dev/null
}
create_topic() { # NAME PARTITIONS
  if [[ $2 -gt 1 ]]; then
    admin PUT "/admin/v2/persistent/public/default/$1/partitions" "$2"
  else
    admin PUT "/admin/v2/persistent/public/default/$1"
  fi
}

perf() { # LOG ARGS...: pulsar-perf in the background (pid in PERF_PID)
  local log=$1; shift
  printf 'brokerServiceUrl=%s\nwebServiceUrl=%s\n' "$URL" "$HTTP" >"$SRV_DIR/client.conf"
  # `times` in the subshell records the tool's CPU (its children's user
  # and system time) into LOG.times.
  (java -Xmx1g -Dorg.slf4j.simpleLogger.defaultLogLevel=info -cp "$PERF_CP" lakegate.bench.PerfLauncher \
    "$SRV_DIR/client.conf" "$@" >"$log" 2>&1; times >"$log.times") &
  PERF_PID=$!
  PIDS+=("$PERF_PID")
}
e2e_tool() { # LOG ARGS...: lakegate-e2e in the foreground; stdout to LOG, stderr to LOG.err, its CPU to LOG.times
  local log=$1; shift
  ("$E2E" "$@" >"$log" 2>"$log.err" || say "lakegate-e2e exited with status $?: $(tail -1 "$log.err")"; times >"$log.times")
}
# client_cpu LOG...: CPU seconds of the perf tool processes that wrote LOG...
client_cpu() {
  local f total=0 s
  for f in "$@"; do
    [[ -f $f.times ]] || continue
    s=$(sed -n 2p "$f.times" | awk '{ s = 0; for (i = 1; i <= 2; i++) { split($i, a, "m"); sub("s", "", a[2]); s += a[1] * 60 + a[2] } print s }')
    total=$(awk -v a="$total" -v b="$s" 'BEGIN {print a + b}')
  done
  echo "$total"
}
# agg LOG: "records p50 p95 p99 p999 max" from pulsar-perf's Aggregated lines.
agg() {
  local t l
  t=$(grep -m1 'Aggregated throughput stats' "$1" | sed -E 's/.* --- ([0-9]+) records (sent|received) .*/\1/') || true
  l=$(grep -m1 'Aggregated latency stats' "$1" |
    sed -E 's/.*med: *([0-9.]+) - 95pct: *([0-9.]+) - 99pct: *([0-9.]+) - 99\.9pct: *([0-9.]+) - .*Max: *([0-9.]+).*/\1 \2 \3 \4 \5/') || true
  echo "${t:--} ${l:-- - - - -}"
}
# agg_rate LOG: the tool's aggregated msg/s (records over its measuring time).
agg_rate() { grep -m1 'Aggregated throughput stats' "$1" | sed -E 's/.* --- ([0-9.]+) msg\/s.*/\1/' || echo -; }

# run_load LOAD TARGET REP: one run on a fresh server; appends a line to results.tsv.
run_load() {
  local load=$1 target=$2 rep=$3 name="$1-$2-$3" log t0 t1 c0 c1
  log=$OUT/$name
  case $target in
  lakegate) start_lakegate "$name" ;;
  pulsar) start_pulsar "$name" true ;;
  pulsar-nofsync) start_pulsar "$name" false ;;
  *) die "unknown target $target" ;;
  esac
  say "run $name: server pid $SRV_PID at $URL"
  local topic=persistent://public/default/$load-$rep parts=1 rate=1000000 thr=- p50=- p95=- p99=- p999=- pmax=- e50=- e99=- e999=- emax=- drain=-
  case $load in max8) parts=8 ;; godrainp2) parts=2 ;; max100) parts=100 ;; max1000) parts=1000 ;; fixed20k) rate=20000 ;; e2e10k) rate=10000 ;; esac
  create_topic "$load-$rep" "$parts" || { tail -20 "$SRV_DIR/server.log" >&2; die "creating $topic on $target"; }
  c0=$(cpu_ticks) t0=$(date +%s.%N)
  case $load in
  max1 | max8 | max100 | max1000 | fixed20k)
    perf "$log.produce.log" produce -r "$rate" -s $SIZE -o $OUTSTANDING -time "$DURATION" "$topic"
    wait "$PERF_PID" || say "producer exited with status $?"
    read -r sent p50 p95 p99 p999 pmax <<<"$(agg "$log.produce.log")"
    thr=$(awk -v n="$sent" -v d="$DURATION" 'BEGIN { if (n == "-") print "-"; else printf "%.0f", n / d }')
    ;;
  e2e10k)
    perf "$log.consume.log" consume -s sub -time $((DURATION + 6)) "$topic"
    local cpid=$PERF_PID
    for _ in $(seq 1 300); do grep -q 'Start receiving\|Created.*consumer' "$log.consume.log" && break; sleep 0.1; done
    perf "$log.produce.log" produce -r "$rate" -s $SIZE -o $OUTSTANDING -time "$DURATION" "$topic"
    wait "$PERF_PID" || say "producer exited with status $?"
    wait "$cpid" || say "consumer exited with status $?"
    read -r sent p50 p95 p99 p999 pmax <<<"$(agg "$log.produce.log")"
    thr=$(awk -v n="$sent" -v d="$DURATION" 'BEGIN { if (n == "-") print "-"; else printf "%.0f", n / d }')
    read -r _ e50 _ e99 e999 emax <<<"$(agg "$log.consume.log")"
    ;;
  drain | godrain | godrain2 | godrainp2)
    admin PUT "/admin/v2/persistent/public/default/$load-$rep/subscription/drain" || die "subscription on $target"
    perf "$log.produce.log" produce -r "$rate" -s $SIZE -o $OUTSTANDING -m "$DRAIN" "$topic"
    wait "$PERF_PID" || say "producer exited with status $?"
    read -r sent p50 p95 p99 p999 pmax <<<"$(agg "$log.produce.log")"
    thr=$(agg_rate "$log.produce.log")
    [[ $thr == - ]] || thr=$(printf %.0f "$thr")
    c0=$(cpu_ticks) t0=$(date +%s.%N) # CPU of the read only
    if [[ $load == drain ]]; then
      perf "$log.consume.log" consume -s drain -sp Earliest -m "$DRAIN" -time 300 "$topic"
      wait "$PERF_PID" || say "consumer exited with status $?"
      drain=$(agg_rate "$log.consume.log")
    else
      local readers=(-consumers 1)
      [[ $load == godrain2 ]] && readers=(-consumers 2)
      [[ $load == godrainp2 ]] && readers=(-consumers 2 -per-partition)
      e2e_tool "$log.consume.log" -u "$URL" -topic "$topic" -sub drain -drain "$DRAIN" "${readers[@]}"
      drain=$(sed -nE 's/^drain-result .* msgps=([0-9]+).*/\1/p' "$log.consume.log")
      drain=${drain:--}
    fi
    ;;
  goe2e10k)
    local line
    e2e_tool "$log.goe2e.log" -u "$URL" -topic "$topic" -r 10000 -s $SIZE -time "${DURATION}s"
    line=$(grep -m1 '^e2e-result' "$log.goe2e.log" || true)
    if [[ -n $line ]]; then
      thr=$(awk -v n="$(sed -E 's/.* sent=([0-9]+).*/\1/' <<<"$line")" -v d="$DURATION" 'BEGIN { printf "%.0f", n / d }')
      IFS=, read -r p50 p95 p99 p999 pmax <<<"$(sed -E 's/.* publish_ms=([^ ]+).*/\1/' <<<"$line")"
      IFS=, read -r e50 _ e99 e999 emax <<<"$(sed -E 's/.* e2e_ms=([^ ]+).*/\1/' <<<"$line")"
    fi
    ;;
  gomax1)
    "$GOPERF" --metrics -1 -u "$URL" produce -r 0 -s $SIZE "$topic" >"$log.goperf.log" 2>&1 &
    local gp=$!
    PIDS+=("$gp")
    sleep 22
    kill -INT "$gp" 2>/dev/null || true
    for _ in $(seq 1 30); do kill -0 "$gp" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$gp" 2>/dev/null || true
    wait "$gp" 2>/dev/null || true
    local line
    line=$(grep 'Stats - Publish rate' "$log.goperf.log" | tail -1 || true)
    if [[ -n $line ]]; then
      read -r thr p50 p95 p99 p999 pmax <<<"$(sed -E 's/.*Publish rate: *([0-9.]+) msg\/s.*50% *([0-9.]+) -95% *([0-9.]+) - 99% *([0-9.]+) - 99\.9% *([0-9.]+) - max *([0-9.]+).*/\1 \2 \3 \4 \5 \6/' <<<"$line")"
      thr=${thr%.*}
    fi
    ;;
  *) die "unknown load $load" ;;
  esac
  c1=$(cpu_ticks) t1=$(date +%s.%N)
  local cpu rss ccpu
  cpu=$(awk -v a="$c0" -v b="$c1" -v s="$t0" -v e="$t1" -v hz="$HZ" 'BEGIN {printf "%.0f", 100 * (b - a) / hz / (e - s)}')
  if [[ $load == gomax1 ]]; then
    ccpu=- # the Go perf tool is not measured
  elif [[ $load == goe2e10k ]]; then
    ccpu=$(client_cpu "$log.goe2e.log")
  elif [[ $load == drain || $load == godrain || $load == godrain2 || $load == godrainp2 ]]; then
    ccpu=$(client_cpu "$log.consume.log")
  else
    ccpu=$(client_cpu "$log.produce.log" "$log.consume.log")
  fi
  [[ $ccpu == - ]] || ccpu=$(awk -v c="$ccpu" -v s="$t0" -v e="$t1" 'BEGIN {printf "%.0f", 100 * c / (e - s)}')
  rss=$(rss_mib)
  # lakegate's own view of the run (publish latency, WAL flush and etcd
  # transaction histograms): where a message's time went.
  [[ $target == lakegate ]] && { curl -fsS "$HTTP/metrics" >"$log.metrics" 2>/dev/null || rm -f "$log.metrics"; }
  stop_server
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$load" "$target" "$rep" "$thr" \
    "$p50" "$p95" "$p99" "$p999" "$pmax" "$e50" "$e99" "$e999" "$emax" "$drain" "$cpu" "$rss" "$ccpu" >>"$OUT/results.tsv"
  say "  $name: $thr msg/s, publish p50/p99/max $p50/$p99/$pmax ms, e2e p50/p99 $e50/$e99 ms, drain $drain msg/s, server CPU $cpu %, peak RSS $rss MiB, client CPU $ccpu %, load average $(cut -d' ' -f1 /proc/loadavg)"
}

printf 'load\ttarget\trep\tmsgps\tp50\tp95\tp99\tp999\tmax\te2e_p50\te2e_p99\te2e_p999\te2e_max\tdrain_msgps\tcpu_pct\trss_mib\tclient_cpu_pct\n' >"$OUT/results.tsv"
say "output in $OUT; loads: $LOADS; targets: $TARGETS; $REPEATS repeats"
for rep in $(seq 1 "$REPEATS"); do
  order=$TARGETS
  (( rep % 2 == 0 )) && order=$(tr ' ' '\n' <<<"$TARGETS" | tac | tr '\n' ' ')
  for load in $LOADS; do
    for target in $order; do
      run_load "$load" "$target" "$rep"
    done
  done
done

# --- 3. summary: medians, ratio table, plot ----------------------------------------
"$PLOT" -results "$OUT/results.tsv" -summary "$OUT/summary.md" -png "$OUT/latency.png" \
  -command "make bench-compare $(env | grep -E '^COMPARE_(REPEATS|LOADS|TARGETS|DURATION|DRAIN)=' | tr '\n' ' ')"
cat "$OUT/summary.md"
if [[ ${COMPARE_DOC:-0} == 1 ]]; then
  mkdir -p docs/img
  cp "$OUT/latency.png" docs/img/bench-compare-latency.png
  python3 - "$OUT/summary.md" docs/benchmarks.md <<'EOF'
import sys
summary = open(sys.argv[1]).read()
doc = open(sys.argv[2]).read()
begin, end = "<!-- bench-compare:begin -->", "<!-- bench-compare:end -->"
i, j = doc.index(begin) + len(begin), doc.index(end)
doc = doc[:i] + "\n" + summary.rstrip() + "\n\n![publish and end-to-end latency percentiles](img/bench-compare-latency.png)\n" + doc[j:]
open(sys.argv[2], "w").write(doc)
EOF
  say "docs/benchmarks.md and docs/img/bench-compare-latency.png updated"
fi
say "done: $OUT"
