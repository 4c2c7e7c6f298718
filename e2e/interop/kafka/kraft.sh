#!/usr/bin/env bash
# A single-node Apache Kafka 4.4.0 in KRaft combined mode (one JVM that is
# both broker and controller, node id 1, a static one-voter quorum), started
# from the Maven Central jars that setup.sh resolves (no tarball), on free
# 127.0.0.1 ports, in a fresh directory <repo>/.cache/kraft-XXXXXX (storage
# formatted with kafka.tools.StorageTool, server.properties, kafka.log,
# kafka.pid). The reference server of the Kafka interop lane and of the
# Kafka benchmark (bench/kafka/kafka-server.sh).
#
# Sourced:
#   source e2e/interop/kafka/kraft.sh
#   start_kraft   sets and exports kafka_bootstrap=127.0.0.1:PORT; sets
#                 kraft_pid, kraft_dir; returns once a Metadata request
#                 (probe.py) lists the broker and the controller (bounded:
#                 90 s), non-zero if it does not come up
#   stop_kraft [DIR]
#                 SIGTERM (a controlled shutdown), up to 30 s, then SIGKILL;
#                 removes the directory unless KEEP=1. With DIR: the server
#                 that a start in another process left there (its kafka.pid).
# Run: `e2e/interop/kafka/kraft.sh` starts it, prints `kafka_bootstrap=…` and
# `kraft_dir=…` on stdout and keeps it in the foreground until SIGINT or
# SIGTERM, then stops it.
#
# Flushing, stated explicitly because it decides what a benchmark measures:
# Kafka's defaults (log.flush.interval.messages = Long.MAX_VALUE,
# log.flush.interval.ms unset, so log.flush.scheduler.interval.ms =
# Long.MAX_VALUE) never fsync on the produce path: an acknowledged record
# (acks=all) is in the page cache only, durable by replication. That is the
# default here. KAFKA_FSYNC=1 sets log.flush.interval.messages=1: the log is
# fsynced after every append (each produce request's batch per partition),
# before the acknowledgement, as lakegate acknowledges after its WAL flush.
#
# Environment:
#   KAFKA_FSYNC=1   fsync every append (above); default 0: Kafka's default
#   KRAFT_HEAP      heap (-Xms/-Xmx, default 1g)
#   KRAFT_PARENT    where the kraft-XXXXXX directory goes (default <repo>/.cache)
#   KRAFT_LOG_LEVEL the broker's slf4j-simple level (default info; its log is
#                   kraft_dir/kafka.log)
#   KRAFT_PROPS     extra server.properties lines (newline-separated), last wins
#   KEEP=1          keep the directory after stop_kraft
kraft_here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
kraft_repo="$(cd "$kraft_here/../../.." && pwd)"
kraft_pid=
kraft_dir=
kafka_bootstrap=

kraft_say() { echo "kraft: $*" >&2; }

start_kraft() {
  local cpfile cp ports bport cport cid flush
  kraft_pid=
  cpfile="$("$kraft_here/setup.sh" jars | tail -1)" || return 1
  cp="$(cat "$cpfile")"
  mkdir -p "${KRAFT_PARENT:-$kraft_repo/.cache}"
  kraft_dir="$(mktemp -d "${KRAFT_PARENT:-$kraft_repo/.cache}/kraft-XXXXXX")"
  ports=$(python3 -c 'import socket
s=[socket.socket() for _ in range(2)]
[x.bind(("127.0.0.1",0)) for x in s]
print(" ".join(str(x.getsockname()[1]) for x in s))')
  bport=${ports% *} cport=${ports#* }
  # A cluster id is a Kafka Uuid: 16 random bytes, URL-safe base64, unpadded.
  cid=$(python3 -c 'import base64,os; print(base64.urlsafe_b64encode(os.urandom(16)).decode().rstrip("="))')
  if [[ ${KAFKA_FSYNC:-0} == 1 ]]; then
    flush="log.flush.interval.messages=1"
  else
    flush="log.flush.interval.messages=9223372036854775807"
  fi
  cat >"$kraft_dir/server.properties" <<PROPS
# Written by e2e/interop/kafka/kraft.sh (KAFKA_FSYNC=${KAFKA_FSYNC:-0}).
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:$cport
listeners=PLAINTEXT://127.0.0.1:$bport,CONTROLLER://127.0.0.1:$cport
advertised.listeners=PLAINTEXT://127.0.0.1:$bport
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
log.dirs=$kraft_dir/data
num.partitions=1
default.replication.factor=1
auto.create.topics.enable=true
offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=0
# Flushing (see kraft.sh): the scheduler never flushes on a timer.
$flush
log.flush.scheduler.interval.ms=9223372036854775807
${KRAFT_PROPS:-}
PROPS
  kraft_say "formatting $kraft_dir/data (cluster id $cid)"
  java -Xmx256m -Dorg.slf4j.simpleLogger.defaultLogLevel=warn -cp "$cp" kafka.tools.StorageTool format \
    --cluster-id="$cid" -c "$kraft_dir/server.properties" >"$kraft_dir/format.log" 2>&1 || {
    cat "$kraft_dir/format.log" >&2
    kraft_say "storage format failed"
    stop_kraft
    return 1
  }
  # As bin/kafka-server-start.sh runs it (heap 1 GiB, G1 with its pause
  # goals), logging through slf4j-simple to kafka.log.
  (cd "$kraft_dir" && exec java -Xms"${KRAFT_HEAP:-1g}" -Xmx"${KRAFT_HEAP:-1g}" -server -XX:+UseG1GC -XX:MaxGCPauseMillis=20 \
    -XX:InitiatingHeapOccupancyPercent=35 -XX:+ExplicitGCInvokesConcurrent -Djava.awt.headless=true \
    -Dorg.slf4j.simpleLogger.defaultLogLevel="${KRAFT_LOG_LEVEL:-info}" -Dorg.slf4j.simpleLogger.showDateTime=true \
    -Dorg.slf4j.simpleLogger.dateTimeFormat=HH:mm:ss.SSS -Dorg.slf4j.simpleLogger.logFile=System.out \
    -cp "$cp" kafka.Kafka "$kraft_dir/server.properties") </dev/null >"$kraft_dir/kafka.log" 2>&1 &
  kraft_pid=$!
  echo "$kraft_pid" >"$kraft_dir/kafka.pid"
  echo "127.0.0.1:$bport" >"$kraft_dir/bootstrap"
  if ! python3 "$kraft_here/probe.py" wait "127.0.0.1:$bport" 90 "$kraft_pid"; then
    tail -n 40 "$kraft_dir/kafka.log" >&2
    kraft_say "Apache Kafka did not come up (log: $kraft_dir/kafka.log)"
    stop_kraft
    return 1
  fi
  export kafka_bootstrap="127.0.0.1:$bport"
  kraft_say "Apache Kafka pid $kraft_pid ready at $kafka_bootstrap (controller 127.0.0.1:$cport, $flush, dir $kraft_dir)"
}

stop_kraft() {
  local dir=${1:-$kraft_dir} pid rc=0
  [[ -n $dir ]] || return 0
  pid=$kraft_pid
  [[ -n ${1:-} ]] && pid=$(cat "$dir/kafka.pid" 2>/dev/null || true)
  if [[ -n $pid ]] && kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 1 300); do
      kill -0 "$pid" 2>/dev/null || break
      # A child of this shell stays a zombie until waited for.
      [[ $(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null) == Z ]] && break
      sleep 0.1
    done
    if kill -0 "$pid" 2>/dev/null && [[ $(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null) != Z ]]; then
      kraft_say "pid $pid did not stop within 30 s of SIGTERM; killing it"
      kill -KILL "$pid" 2>/dev/null || true
      rc=1
    fi
    wait "$pid" 2>/dev/null || true
  fi
  kraft_say "stopped pid ${pid:-?}"
  if [[ ${KEEP:-0} == 1 ]]; then kraft_say "kept $dir"; else rm -rf "$dir"; fi
  [[ $dir == "$kraft_dir" ]] && kraft_pid= kraft_dir=
  return $rc
}

# Run as a program: start, report, stay in the foreground until signalled.
if [[ ${BASH_SOURCE[0]} == "$0" ]]; then
  set -euo pipefail
  start_kraft
  echo "kafka_bootstrap=$kafka_bootstrap"
  echo "kraft_dir=$kraft_dir"
  trap 'stop_kraft; exit 0' INT TERM
  kraft_say "running; SIGINT or SIGTERM stops it"
  while kill -0 "$kraft_pid" 2>/dev/null; do sleep 1 & wait $! || true; done
  kraft_say "Apache Kafka exited by itself"
  exit 1
fi
