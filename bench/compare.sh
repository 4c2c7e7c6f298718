#!/usr/bin/env bash
# bench/compare.sh — `make bench-compare`: lakegate standalone and Apache
# Pulsar 4.0.8 standalone on the same machine, one server at a time, a fresh
# server (fresh data directory) for every run, driven by the same loads in
# alternating repeats; and, the same way, lakegate's Kafka listener beside
# Apache Kafka 4.4.0. See docs/benchmarks.md, "lakegate and Apache Pulsar side
# by side" and "Kafka listener and Apache Kafka side by side".
#
# Targets (servers):
#   lakegate        lakegate standalone (Pulsar protocol)
#   pulsar          Apache Pulsar 4.0.8 standalone (journalSyncData=true)
#   pulsar-nofsync  the same with journalSyncData=false
#   lakegate-kafka  lakegate standalone with its Kafka listener
#                   (--kafka-addr; the lakegate target's flags and LAKEGATE_*)
#   kafka           Apache Kafka 4.4.0, one KRaft node (broker and controller
#                   in one JVM, heap 1 GiB, jars from Maven Central:
#                   bench/kafka/kafka-server.sh), Kafka's default flush
#                   settings: no fsync on the produce path (an acknowledged
#                   record is in the page cache)
#   kafka-fsync     the same with log.flush.interval.messages=1: an fsync
#                   after every append, before the acknowledgement, as
#                   lakegate acknowledges after its WAL's fsync
# A Pulsar load runs only against the Pulsar targets (lakegate, pulsar,
# pulsar-nofsync), a Kafka load (k…) only against the Kafka targets.
#
# Pulsar loads (name = tool kind partitions rate):
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
#   txn1     pulsar-perf produce in transactions (-txn, 50 messages per
#            transaction, each committed), 1 partition: the cost of
#            transactions beside max1 (Pulsar started with
#            transactionCoordinatorEnabled=true for these loads only)
#   txn8     the same, 8 partitions
# Every pulsar-perf run: 1 KiB messages, batching on (the tool's defaults),
# -o 1000 outstanding messages.
#
# Kafka loads (topics created with Kafka's kafka-topics, TopicCommand):
#   kmax1     kafka-producer-perf-test (ProducerPerformance, through
#             bench/kafka/producer-perf.sh), unthrottled, 1 partition:
#             COMPARE_KWARMUP_RECORDS warm-up records, then
#             COMPARE_KRECORDS measured ones (a fixed count: the tool has no
#             duration option)
#   kmax8     the same, 8 partitions
#   kmax100   the same, 100 partitions
#   kfixed20k the same tool at --throughput 20000, 1 partition: publish
#             latency and server CPU at a fixed rate; COMPARE_KWARMUP s of
#             warm-up, then COMPARE_DURATION s measured
#   ke2e10k   bench/tools/kafkae2e (lakegate-kafka-e2e, franz-go): a producer
#             at 10 000 records/s and a consumer in one process, the send
#             time in the record, latency on one clock; warm-up and
#             measured time as kfixed20k (Kafka's own EndToEndLatency tool
#             sends one record at a time, so it cannot hold a rate)
# Every Kafka run: 1 KiB records without keys, acks=all, idempotence on (the
# clients' default), linger.ms=5, batch.size=16384, no compression. The
# warm-up (both JVMs, server and producer, start cold on every run) is left
# out of the throughput and the latency percentiles; the server CPU is
# counted from the tool's "In steady state." line (lakegate-kafka-e2e prints
# it where the warm-up ends, kafka-producer-perf-test at the end of its
# first 1 s reporting window after it); client CPU, peak RSS and the other
# CPU cover the whole run. lakegate-kafka-e2e sends one priming record (and
# waits for its acknowledgement) before its clock starts.
#
# Per run it records throughput, latency percentiles, the server's CPU
# (utime+stime of its process over the run, in % of one core), its peak
# RSS (VmHWM: the server is fresh each run, so this is the run's peak), and
# the pulsar-perf processes' CPU over the run (client CPU: on 2 shared cores
# the client can be the bottleneck), the other CPU (the machine's user and
# system time over the run less the server's and the measured clients': a
# build or test running beside the benchmark shows here) and the load
# average at its end. Before every run it waits (up to COMPARE_QUIET_MAX s)
# until the machine is quiet: less than COMPARE_QUIET_BUSY % of its CPU busy
# over 2 s.
# Results: $OUT/results.tsv (one line per run, with a status column: ok or
# failed), $OUT/summary.md (medians and the ratio tables, also printed),
# $OUT/latency.png (percentile plot of the Pulsar loads), and every run's
# server log, $OUT/<load>-<target>-<rep>.server.log.
#
# Environment:
#   COMPARE_REPEATS   repeats of every (load, target) pair (default 2); the
#                     order of targets alternates between repeats
#   COMPARE_LOADS     loads to run (default "max1 max8 max100 max1000 fixed20k e2e10k goe2e10k drain godrain godrain2 godrainp2 gomax1")
#   COMPARE_TARGETS   servers (default "lakegate pulsar"; add pulsar-nofsync for
#                     Pulsar with journalSyncData=false; the Kafka targets:
#                     "lakegate-kafka kafka kafka-fsync")
#   COMPARE_DURATION  seconds of producing per pulsar-perf run, and measured
#                     seconds of kfixed20k and ke2e10k (default 15)
#   COMPARE_KWARMUP   seconds of warm-up before that in kfixed20k, ke2e10k
#                     (default 5)
#   COMPARE_KRECORDS  measured records of kmax1/kmax8/kmax100 (default
#                     600000 for kmax1 and kmax8, 1200000 for kmax100: about
#                     15 s at Apache Kafka's rates on 2 cores; a slower
#                     server takes longer)
#   COMPARE_KWARMUP_RECORDS  warm-up records before them (default a quarter
#                     of the measured ones)
#   COMPARE_QUIET_BUSY  busy % of the machine under which a run starts
#                     (default 15); COMPARE_QUIET_MAX: the most seconds to
#                     wait for it (default 120; then the run starts anyway)
#   COMPARE_DRAIN     messages of the drain load (default 1000000)
#   COMPARE_OUT       output directory (default .cache/compare/<time>)
#   COMPARE_DOC=1     write the summary and the plot into docs/benchmarks.md
#                     (between the bench-compare markers) and docs/img/
#   LAKEGATE_BIN      lakegate binary to measure (default: built from this tree)
#   LAKEGATE_ARGS     extra flags for `lakegate standalone`
#   LAKEGATE_PROFILE=1  CPU profile of every lakegate run into $OUT (pprof)
# Every lakegate run also leaves its /metrics at the end of the run in
# $OUT/<load>-lakegate-<rep>.metrics (the publish, WAL flush and etcd
# transaction histograms); so does every lakegate-kafka run.
#   LAKEGATE_M2       Maven repository (default .cache/m2)
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
REPEATS=${COMPARE_REPEATS:-2}
LOADS=${COMPARE_LOADS:-"max1 max8 max100 max1000 fixed20k e2e10k goe2e10k drain godrain godrain2 godrainp2 gomax1"}
TARGETS=${COMPARE_TARGETS:-"lakegate pulsar"}
DURATION=${COMPARE_DURATION:-15}
DRAIN=${COMPARE_DRAIN:-1000000}
KWARMUP=${COMPARE_KWARMUP:-5}
KRECORDS=${COMPARE_KRECORDS:-}
KWARMUP_RECORDS=${COMPARE_KWARMUP_RECORDS:-}
QUIET_BUSY=${COMPARE_QUIET_BUSY:-15}
QUIET_MAX=${COMPARE_QUIET_MAX:-120}
SIZE=1024
OUTSTANDING=1000
OUT=${COMPARE_OUT:-$ROOT/.cache/compare/$(date -u +%Y%m%dT%H%M%SZ)}
M2=${LAKEGATE_M2:-$ROOT/.cache/m2}
HZ=$(getconf CLK_TCK)

say() { echo "bench-compare [$(date -u +%H:%M:%S)]: $*" >&2; }
die() { say "FAIL: $*"; exit 1; }
mkdir -p "$OUT"

# Which kind of server a target is, which kind a load is for.
target_kind() {
  case $1 in
  lakegate | pulsar | pulsar-nofsync) echo pulsar ;;
  lakegate-kafka | kafka | kafka-fsync) echo kafka ;;
  *) die "unknown target $1" ;;
  esac
}
load_kind() {
  case $1 in
  max1 | max8 | max100 | max1000 | fixed20k | e2e10k | goe2e10k | drain | godrain | godrain2 | godrainp2 | gomax1 | txn1 | txn8) echo pulsar ;;
  kmax1 | kmax8 | kmax100 | kfixed20k | ke2e10k) echo kafka ;;
  *) die "unknown load $1" ;;
  esac
}
NEED_PULSAR= NEED_KAFKA= PAIRS=0
for load in $LOADS; do
  lk=$(load_kind "$load")
  for target in $TARGETS; do
    [[ $(target_kind "$target") == "$lk" ]] || continue
    PAIRS=$((PAIRS + 1))
    if [[ $lk == pulsar ]]; then NEED_PULSAR=1; else NEED_KAFKA=1; fi
  done
done
[[ $PAIRS -gt 0 ]] || die "no load of \"$LOADS\" runs against a target of \"$TARGETS\" (Pulsar loads need lakegate/pulsar/pulsar-nofsync, Kafka loads (k…) lakegate-kafka/kafka/kafka-fsync)"

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
mkdir -p .cache/bin
GOPERF=.cache/bin/pulsar-perf-go
if [[ -n $NEED_PULSAR ]]; then
  mvn_resolve bench/pulsar/pom.xml .cache/pulsar-standalone
  mvn_resolve bench/java/pom.xml .cache/pulsar-perf-java
  PULSAR_CP=$(cat .cache/pulsar-standalone/classpath.txt)
  PERF_CP=.cache/pulsar-perf-java/target/classes:$(cat .cache/pulsar-perf-java/classpath.txt)
  if [[ ! -x $GOPERF ]]; then
    say "building the Go perf tool (bench/tools) -> $GOPERF"
    (cd bench/tools && go build -trimpath -o "$ROOT/$GOPERF" github.com/apache/pulsar-client-go/perf)
  fi
fi
E2E=.cache/bin/lakegate-e2e
say "building the Go end-to-end tool (bench/tools/e2e) -> $E2E"
(cd bench/tools && go build -o "$ROOT/$E2E" ./e2e)
KE2E=.cache/bin/lakegate-kafka-e2e
if [[ -n $NEED_KAFKA ]]; then
  # Apache Kafka 4.4.0's server, tools and client jars (Maven Central,
  # pinned in e2e/interop/kafka/pom.xml), resolved once.
  KAFKA_CP=$(cat "$(e2e/interop/kafka/setup.sh jars | tail -1)") || die "resolving Apache Kafka's jars (e2e/interop/kafka/setup.sh jars)"
  say "building the Kafka end-to-end tool (bench/tools/kafkae2e) -> $KE2E"
  (cd bench/tools && go build -o "$ROOT/$KE2E" ./kafkae2e)
  # shellcheck source=kafka/kafka-server.sh
  source bench/kafka/kafka-server.sh
fi
PLOT=.cache/bin/lakegate-plot
say "building the plotter (bench/tools/plot) -> $PLOT"
(cd bench/tools && go build -o "$ROOT/$PLOT" ./plot)
if [[ -z ${LAKEGATE_BIN:-} ]]; then
  say "building lakegate"
  go build -o .cache/bin/lakegate ./cmd/lakegate
  LAKEGATE_BIN=$ROOT/.cache/bin/lakegate
fi

# --- 2. servers -------------------------------------------------------------------
SRV_PID= SRV_DIR= SRV_LOG= SRV_KIND= URL= HTTP= BOOT= STEADY_PID= TOPIC=
PIDS=()
cleanup() {
  local p
  for p in "${PIDS[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
  stop_server || true
}
trap cleanup EXIT
freeport() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'; }

start_lakegate() { # RUNNAME [MORE FLAGS...]
  local run=$1; shift
  SRV_DIR=$(mktemp -d "${TMPDIR:-/tmp}/compare-lakegate.XXXXXX") SRV_LOG=server.log SRV_KIND=lakegate
  local prof=
  [[ ${LAKEGATE_PROFILE:-0} == 1 ]] && prof=$OUT/$run.lakegate.pprof
  # shellcheck disable=SC2086
  LAKEGATE_CPUPROFILE=$prof "$LAKEGATE_BIN" standalone --data-dir "$SRV_DIR/data" \
    --pulsar-addr 127.0.0.1:0 --http-addr 127.0.0.1:0 "$@" ${LAKEGATE_ARGS:-} 2>"$SRV_DIR/server.log" &
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
  BOOT=
  if grep -q ' kafka=' <<<"$ready"; then BOOT=$(sed -E 's/.* kafka=([^ ]+).*/\1/' <<<"$ready"); fi
}

# start_kafka FSYNC(0|1): Apache Kafka 4.4.0, one KRaft node, through
# bench/kafka/kafka-server.sh (its data beside lakegate's, in TMPDIR); it
# returns once a Metadata request lists the broker and the controller.
start_kafka() {
  KAFKA_FSYNC=$1 KRAFT_PARENT=${TMPDIR:-/tmp} kafka_server_start 2>>"$OUT/kafka-server.log" ||
    { tail -20 "$OUT/kafka-server.log" >&2; die "Apache Kafka did not start (log: $OUT/kafka-server.log)"; }
  SRV_PID=$kafka_pid SRV_DIR=$kafka_dir SRV_LOG=kafka.log SRV_KIND=kafka BOOT=$kafka_bootstrap URL=kafka://$kafka_bootstrap HTTP=
  say "Apache Kafka: $kafka_flush"
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
transactionCoordinatorEnabled=${PULSAR_TXN:-false}
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
  URL=pulsar://127.0.0.1:$bp HTTP=http://127.0.0.1:$wp SRV_LOG=server.log SRV_KIND=pulsar
  for _ in $(seq 1 1200); do
    grep -q 'messaging service is ready' "$SRV_DIR/server.log" && curl -fsS "$HTTP/admin/v2/namespaces/public" >/dev/null 2>&1 &&
      curl -fsS "$HTTP/admin/v2/namespaces/public/default" >/dev/null 2>&1 && return 0
    kill -0 "$SRV_PID" 2>/dev/null || { tail -20 "$SRV_DIR/server.log" >&2; die "pulsar exited before it was ready"; }
    sleep 0.1
  done
  die "pulsar not ready after 120 s"
}

stop_server() { # [RUNNAME: keep the server's log as $OUT/RUNNAME.server.log]
  [[ -n $SRV_PID ]] || return 0
  if [[ $SRV_KIND == kafka ]]; then
    [[ -n ${1:-} ]] && cp "$SRV_DIR/$SRV_LOG" "$OUT/$1.server.log" 2>/dev/null
    kafka_server_stop 2>>"$OUT/kafka-server.log" || say "Apache Kafka (pid $SRV_PID) did not stop within 30 s of SIGTERM"
    SRV_PID=
    return 0
  fi
  kill -TERM "$SRV_PID" 2>/dev/null || true
  for _ in $(seq 1 300); do kill -0 "$SRV_PID" 2>/dev/null || break; sleep 0.1; done
  kill -KILL "$SRV_PID" 2>/dev/null || true
  wait "$SRV_PID" 2>/dev/null || true
  SRV_PID=
  [[ -n ${1:-} ]] && cp "$SRV_DIR/$SRV_LOG" "$OUT/$1.server.log" 2>/dev/null
  if [[ ${KEEP:-0} == 1 ]]; then say "kept $SRV_DIR"; else rm -rf "$SRV_DIR"; fi
}

cpu_ticks() { awk '{print $14 + $15}' "/proc/$SRV_PID/stat"; }
# The machine's user + nice + system time, in ticks (all CPUs), and its total.
machine_ticks() { awk '/^cpu / {print $2 + $3 + $4, $2 + $3 + $4 + $5 + $6 + $7 + $8 + $9}' /proc/stat; }
# wait_quiet: until less than QUIET_BUSY % of the machine's CPU was busy over
# 2 s (a build or test beside the benchmark would skew it), at most QUIET_MAX s.
wait_quiet() {
  local t0=$SECONDS b0 a0 b1 a1 busy=0 told=-60 p0 p1
  while ((SECONDS - t0 < QUIET_MAX)); do
    read -r b0 a0 < <(machine_ticks)
    p0=$(ps -eo pid=,times=,comm=)
    sleep 2 # a measuring window, not a wait for readiness
    read -r b1 a1 < <(machine_ticks)
    busy=$(((b1 - b0) * 100 / (a1 - a0 > 0 ? a1 - a0 : 1)))
    ((busy < QUIET_BUSY)) && return 0
    if ((SECONDS - told >= 60)); then
      # The busiest processes of the window (CPU seconds in it).
      p1=$(ps -eo pid=,times=,comm=)
      say "the machine is busy ($busy % of its CPU over 2 s; $(awk 'NR == FNR { t[$1] = $2; next } { d = $2 - t[$1]; if (d > 0) print d, $3 }' <(echo "$p0") <(echo "$p1") |
        sort -rn | head -3 | awk '{ printf "%s %.1f s, ", $2, $1 }')…); waiting for it to be quiet (at most COMPARE_QUIET_MAX=$QUIET_MAX s)"
      told=$SECONDS
    fi
  done
  say "the machine is still busy ($busy %) after $QUIET_MAX s; running anyway (see the other CPU column)"
}
# steady_watch LOG: in the background, records the server's CPU ticks and the
# time when LOG says "In steady state." (the Kafka tools' end of warm-up)
# into LOG.steady ("TICKS TIME").
steady_watch() {
  local log=$1
  (
    for _ in $(seq 1 6000); do
      if grep -q 'In steady state\.' "$log" 2>/dev/null; then
        echo "$(cpu_ticks) $(date +%s.%N)" >"$log.steady"
        exit 0
      fi
      kill -0 "$SRV_PID" 2>/dev/null || exit 0
      sleep 0.05
    done
  ) &
  STEADY_PID=$!
  PIDS+=("$STEADY_PID")
}
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
# kafka_topic NAME PARTITIONS: created with Kafka's own kafka-topics
# (TopicCommand), on Apache Kafka and on lakegate's listener alike.
kafka_topic() {
  java -Xmx256m -Dorg.slf4j.simpleLogger.defaultLogLevel=warn -cp "$KAFKA_CP" org.apache.kafka.tools.TopicCommand \
    --bootstrap-server "$BOOT" --create --topic "$1" --partitions "$2" --replication-factor 1
}
# kafka_perf LOG RECORDS WARMUP THROUGHPUT: kafka-producer-perf-test in the
# foreground (bench/kafka/producer-perf.sh), its CPU into LOG.times; false
# if it failed.
kafka_perf() {
  local log=$1 rc=0
  (PERF_CLASSPATH=$KAFKA_CP PERF_RECORDS=$2 PERF_WARMUP=$3 PERF_THROUGHPUT=$4 PERF_SIZE=$SIZE PERF_ACKS=all \
    PERF_LINGER_MS=5 PERF_BATCH_SIZE=16384 PERF_PROPS= PERF_REPORTING_MS=1000 bench/kafka/producer-perf.sh "$BOOT" "$TOPIC" >"$log" 2>&1 || rc=$?
  times >"$log.times"
  exit $rc) || return 1
}

# run_load LOAD TARGET REP: one run on a fresh server; appends a line to results.tsv.
run_load() {
  local load=$1 target=$2 rep=$3 name="$1-$2-$3" log t0 t1 c0 c1 ta tb sa sb ma mb status=ok
  log=$OUT/$name
  wait_quiet
  PULSAR_TXN=false
  case $load in txn*) PULSAR_TXN=true ;; esac
  case $target in
  lakegate) start_lakegate "$name" ;;
  lakegate-kafka)
    start_lakegate "$name" --kafka-addr 127.0.0.1:0
    [[ -n $BOOT ]] || die "lakegate's ready line has no kafka= address (log: $SRV_DIR/server.log)"
    URL=kafka://$BOOT
    ;;
  pulsar) start_pulsar "$name" true ;;
  pulsar-nofsync) start_pulsar "$name" false ;;
  kafka) start_kafka 0 ;;
  kafka-fsync) start_kafka 1 ;;
  *) die "unknown target $target" ;;
  esac
  say "run $name: server pid $SRV_PID at $URL"
  local topic=persistent://public/default/$load-$rep parts=1 rate=1000000 thr=- p50=- p95=- p99=- p999=- pmax=- e50=- e99=- e999=- emax=- drain=-
  case $load in max8 | kmax8 | txn8) parts=8 ;; godrainp2) parts=2 ;; max100 | kmax100) parts=100 ;; max1000) parts=1000 ;; fixed20k) rate=20000 ;; e2e10k) rate=10000 ;; esac
  if [[ $(load_kind "$load") == kafka ]]; then
    TOPIC=$load-$rep topic=$load-$rep
    if ! kafka_topic "$topic" "$parts" >"$log.topic.log" 2>&1; then
      status=failed
      say "  creating topic $topic ($parts partitions) on $target failed: $(tail -3 "$log.topic.log" | tr '\n' ' ')"
    fi
  else
    create_topic "$load-$rep" "$parts" || { tail -20 "$SRV_DIR/server.log" >&2; die "creating $topic on $target"; }
  fi
  c0=$(cpu_ticks) t0=$(date +%s.%N)
  sa=$c0 ta=$t0
  read -r ma _ < <(machine_ticks)
  [[ $status == ok ]] && case $load in
  max1 | max8 | max100 | max1000 | fixed20k)
    perf "$log.produce.log" produce -r "$rate" -s $SIZE -o $OUTSTANDING -time "$DURATION" "$topic"
    wait "$PERF_PID" || say "producer exited with status $?"
    read -r sent p50 p95 p99 p999 pmax <<<"$(agg "$log.produce.log")"
    thr=$(awk -v n="$sent" -v d="$DURATION" 'BEGIN { if (n == "-") print "-"; else printf "%.0f", n / d }')
    ;;
  txn1 | txn8)
    perf "$log.produce.log" produce -r "$rate" -s $SIZE -o $OUTSTANDING -time "$DURATION" -txn -nmt 50 "$topic"
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
  kmax1 | kmax8 | kmax100 | kfixed20k)
    local krec=${KRECORDS:-600000} kwarm ktp=-1 line
    [[ $load == kmax100 ]] && krec=${KRECORDS:-1200000}
    kwarm=${KWARMUP_RECORDS:-$((krec / 4))}
    [[ $load == kfixed20k ]] && ktp=20000 krec=$((20000 * DURATION)) kwarm=$((20000 * KWARMUP))
    : >"$log.produce.log"
    steady_watch "$log.produce.log"
    kafka_perf "$log.produce.log" $((krec + kwarm)) "$kwarm" "$ktp" || { status=failed; say "  kafka-producer-perf-test failed: $(grep -v '^\[' "$log.produce.log" | tail -3 | tr '\n' ' ')"; }
    # "N steady state records sent, R records/sec (… MB/sec), A ms avg
    # latency, M ms max latency, P ms 50th, P ms 95th, P ms 99th, P ms 99.9th."
    line=$(grep -m1 -E '^[0-9]+ steady state records sent, ' "$log.produce.log" || true)
    if [[ -n $line ]]; then
      read -r thr pmax p50 p95 p99 p999 <<<"$(sed -E 's/^[0-9]+ steady state records sent, ([0-9.]+) records\/sec .*, ([0-9.]+) ms max latency, ([0-9.]+) ms 50th, ([0-9.]+) ms 95th, ([0-9.]+) ms 99th, ([0-9.]+) ms 99\.9th.*/\1 \2 \3 \4 \5 \6/' <<<"$line")"
      thr=$(printf %.0f "$thr")
    else
      status=failed
    fi
    ;;
  ke2e10k)
    local line rc=0
    : >"$log.ke2e.log.err"
    steady_watch "$log.ke2e.log.err"
    ("$KE2E" -b "$BOOT" -topic "$topic" -r 10000 -s $SIZE -time "$((DURATION + KWARMUP))s" -warmup "${KWARMUP}s" \
      >"$log.ke2e.log" 2>"$log.ke2e.log.err" || rc=$?
    times >"$log.ke2e.log.times"
    exit $rc) || { status=failed; say "  lakegate-kafka-e2e failed: $(tail -2 "$log.ke2e.log.err" | tr '\n' ' ')"; }
    line=$(grep -m1 '^e2e-result' "$log.ke2e.log" || true)
    if [[ -n $line ]]; then
      thr=$(sed -E 's/.* msgps=([0-9]+).*/\1/' <<<"$line")
      IFS=, read -r p50 p95 p99 p999 pmax <<<"$(sed -E 's/.* publish_ms=([^ ]+).*/\1/' <<<"$line")"
      IFS=, read -r e50 _ e99 e999 emax <<<"$(sed -E 's/.* e2e_ms=([^ ]+).*/\1/' <<<"$line")"
    else
      status=failed
    fi
    ;;
  *) die "unknown load $load" ;;
  esac
  c1=$(cpu_ticks) t1=$(date +%s.%N)
  sb=$c1 tb=$t1
  read -r mb _ < <(machine_ticks)
  if [[ $(load_kind "$load") == kafka ]]; then
    # The server's CPU from the end of the warm-up ("In steady state.").
    if [[ -n $STEADY_PID ]]; then
      kill "$STEADY_PID" 2>/dev/null || true
      wait "$STEADY_PID" 2>/dev/null || true
      STEADY_PID=
    fi
    if [[ -s $log.produce.log.steady || -s $log.ke2e.log.err.steady ]]; then
      read -r c0 t0 <"$(ls "$log".*.steady | head -1)"
    elif [[ $status == ok ]]; then
      say "  no \"In steady state.\" line: server CPU over the whole run"
    fi
  fi
  [[ $thr == - ]] && status=failed
  local cpu rss ccpu other=-
  cpu=$(awk -v a="$c0" -v b="$c1" -v s="$t0" -v e="$t1" -v hz="$HZ" 'BEGIN {printf "%.0f", 100 * (b - a) / hz / (e - s)}')
  if [[ $load == kmax* || $load == kfixed20k ]]; then
    ccpu=$(client_cpu "$log.produce.log")
  elif [[ $load == ke2e10k ]]; then
    ccpu=$(client_cpu "$log.ke2e.log")
  elif [[ $load == gomax1 ]]; then
    ccpu=- # the Go perf tool is not measured
  elif [[ $load == goe2e10k ]]; then
    ccpu=$(client_cpu "$log.goe2e.log")
  elif [[ $load == drain || $load == godrain || $load == godrain2 || $load == godrainp2 ]]; then
    ccpu=$(client_cpu "$log.consume.log")
  else
    ccpu=$(client_cpu "$log.produce.log" "$log.consume.log")
  fi
  # The rest of the machine's CPU over the run (user + system: a build or a
  # test beside the benchmark; the Go perf tool of gomax1 is not measured).
  if [[ $load != gomax1 ]]; then
    other=$(awk -v m="$((mb - ma))" -v s="$((sb - sa))" -v c="$(client_cpu "$log".*.log)" -v a="$ta" -v b="$tb" -v hz="$HZ" \
      'BEGIN { v = 100 * ((m - s) / hz - c) / (b - a); printf "%.0f", v < 0 ? 0 : v }')
  fi
  if [[ $(load_kind "$load") == kafka ]]; then
    # The client over the whole run (warm-up included: one JVM, one count).
    [[ $ccpu == - ]] || ccpu=$(awk -v c="$ccpu" -v s="$ta" -v e="$tb" 'BEGIN {printf "%.0f", 100 * c / (e - s)}')
  else
    [[ $ccpu == - ]] || ccpu=$(awk -v c="$ccpu" -v s="$t0" -v e="$t1" 'BEGIN {printf "%.0f", 100 * c / (e - s)}')
  fi
  rss=$(rss_mib)
  # lakegate's own view of the run (publish latency, WAL flush and etcd
  # transaction histograms): where a message's time went.
  [[ $target == lakegate || $target == lakegate-kafka ]] && { curl -fsS "$HTTP/metrics" >"$log.metrics" 2>/dev/null || rm -f "$log.metrics"; }
  if [[ $status != ok ]]; then
    say "  $name FAILED; the server's log: $OUT/$name.server.log; its warnings and errors:"
    grep -E 'level=(WARN|ERROR)| (WARN|ERROR) ' "$SRV_DIR/$SRV_LOG" 2>/dev/null | tail -10 | cut -c1-400 >&2 || true
  fi
  stop_server "$name"
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$load" "$target" "$rep" "$thr" \
    "$p50" "$p95" "$p99" "$p999" "$pmax" "$e50" "$e99" "$e999" "$emax" "$drain" "$cpu" "$rss" "$ccpu" "$other" "$status" >>"$OUT/results.tsv"
  say "  $name ($status): $thr msg/s, publish p50/p99/max $p50/$p99/$pmax ms, e2e p50/p99 $e50/$e99 ms, drain $drain msg/s, server CPU $cpu %, peak RSS $rss MiB, client CPU $ccpu %, other CPU $other %, load average $(cut -d' ' -f1 /proc/loadavg)"
}

printf 'load\ttarget\trep\tmsgps\tp50\tp95\tp99\tp999\tmax\te2e_p50\te2e_p99\te2e_p999\te2e_max\tdrain_msgps\tcpu_pct\trss_mib\tclient_cpu_pct\tother_cpu_pct\tstatus\n' >"$OUT/results.tsv"
say "output in $OUT; loads: $LOADS; targets: $TARGETS; $REPEATS repeats ($((PAIRS * REPEATS)) runs)"
RUN=0
for rep in $(seq 1 "$REPEATS"); do
  order=$TARGETS
  (( rep % 2 == 0 )) && order=$(tr ' ' '\n' <<<"$TARGETS" | tac | tr '\n' ' ')
  for load in $LOADS; do
    for target in $order; do
      [[ $(target_kind "$target") == "$(load_kind "$load")" ]] || continue
      RUN=$((RUN + 1))
      say "run $RUN of $((PAIRS * REPEATS))"
      run_load "$load" "$target" "$rep"
    done
  done
done

# --- 3. summary: medians, ratio tables, plot ---------------------------------------
# The Pulsar loads through bench/tools/plot (summary and latency plot), the
# Kafka loads through bench/kafka/summary.py (summary); summary.md has both.
COMMAND="make bench-compare $(env | grep -E '^COMPARE_(REPEATS|LOADS|TARGETS|DURATION|DRAIN|KWARMUP|KRECORDS|KWARMUP_RECORDS)=' | LC_ALL=C sort | tr '\n' ' ')"
: >"$OUT/summary.md"
if [[ -n $NEED_PULSAR ]]; then
  awk -F'\t' 'NR == 1 || $2 == "lakegate" || $2 == "pulsar" || $2 == "pulsar-nofsync"' "$OUT/results.tsv" >"$OUT/results-pulsar.tsv"
  "$PLOT" -results "$OUT/results-pulsar.tsv" -summary "$OUT/summary-pulsar.md" -png "$OUT/latency.png" -command "$COMMAND"
  cat "$OUT/summary-pulsar.md" >>"$OUT/summary.md"
fi
if [[ -n $NEED_KAFKA ]]; then
  python3 bench/kafka/summary.py "$OUT/results.tsv" "$COMMAND" >"$OUT/summary-kafka.md"
  [[ -z $NEED_PULSAR ]] || printf '\n' >>"$OUT/summary.md"
  cat "$OUT/summary-kafka.md" >>"$OUT/summary.md"
fi
cat "$OUT/summary.md"
# doc_part MARKER FILE [PLOT]: FILE between docs/benchmarks.md's MARKER markers.
doc_part() {
  python3 - "$1" "$2" docs/benchmarks.md "${3:-}" <<'EOF'
import sys
marker, part, path, png = sys.argv[1:5]
summary = open(part).read()
doc = open(path).read()
begin, end = f"<!-- {marker}:begin -->", f"<!-- {marker}:end -->"
i, j = doc.index(begin) + len(begin), doc.index(end)
extra = f"\n![publish and end-to-end latency percentiles]({png})\n" if png else ""
doc = doc[:i] + "\n" + summary.rstrip() + "\n" + extra + doc[j:]
open(path, "w").write(doc)
EOF
}
if [[ ${COMPARE_DOC:-0} == 1 ]]; then
  if [[ -n $NEED_PULSAR ]]; then
    mkdir -p docs/img
    cp "$OUT/latency.png" docs/img/bench-compare-latency.png
    doc_part bench-compare "$OUT/summary-pulsar.md" img/bench-compare-latency.png
    say "docs/benchmarks.md (bench-compare) and docs/img/bench-compare-latency.png updated"
  fi
  if [[ -n $NEED_KAFKA ]]; then
    doc_part bench-compare-kafka "$OUT/summary-kafka.md"
    say "docs/benchmarks.md (bench-compare-kafka) updated"
  fi
fi
say "done: $OUT"
