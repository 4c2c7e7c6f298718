#!/usr/bin/env bash
# bench/kafka/producer-perf.sh — Apache Kafka's own producer load tool
# (kafka-producer-perf-test: org.apache.kafka.tools.ProducerPerformance of
# kafka-tools 4.4.0, run as a Java main class from the classpath that
# e2e/interop/kafka/setup.sh resolves) against any Kafka listener: Apache
# Kafka (bench/kafka/kafka-server.sh) or lakegate's.
#
# Usage: bench/kafka/producer-perf.sh BOOTSTRAP [TOPIC]
#   BOOTSTRAP  host:port[,host:port…]
#   TOPIC      default perf-RANDOM (created on first use by the server's
#              auto-creation, unless PERF_PARTITIONS creates it first)
# Environment:
#   PERF_RECORDS     --num-records (default 1000000)
#   PERF_SIZE        --record-size in bytes (default 1024)
#   PERF_THROUGHPUT  --throughput records/s, -1 = unthrottled (default -1)
#   PERF_BATCH_SIZE  batch.size (default 16384, the producer's default)
#   PERF_LINGER_MS   linger.ms (default 5, the 4.x producer's default)
#   PERF_ACKS        acks (default all)
#   PERF_PROPS       more producer properties, space-separated k=v
#   PERF_PARTITIONS  create TOPIC first with this many partitions
#                    (kafka-topics --create --if-not-exists); default: not
#   PERF_WARMUP      --warmup-records: the first N records are left out of a
#                    second, steady-state summary (default 0: none)
#   PERF_REPORTING_MS  --reporting-interval: a progress line every so many
#                    ms (default 5000, the tool's); "In steady state." comes
#                    at the end of the first such window after the warm-up
#   PERF_CLASSPATH   the Kafka classpath (default: e2e/interop/kafka/setup.sh
#                    jars resolves it; a caller that runs the tool often
#                    resolves it once and passes it here)
#
# The invocation (--command-property is 4.4's name for --producer-props,
# which still works but is deprecated):
#   java -Xmx1g -cp CP org.apache.kafka.tools.ProducerPerformance --topic TOPIC
#     --num-records N --record-size S --throughput T --command-property
#     bootstrap.servers=BOOTSTRAP acks=all linger.ms=5 batch.size=B [PERF_PROPS]
# Its progress lines (one per 5 s window) go to stderr; stdout gets only the
# final summary line, e.g.
#   1000000 records sent, 101234.5 records/sec (98.86 MB/sec), 250.1 ms avg
#   latency, 900.0 ms max latency, 240 ms 50th, 400 ms 95th, 500 ms 99th, 600 ms 99.9th.
# and, with PERF_WARMUP, then the steady-state one:
#   900000 steady state records sent, 102345.6 records/sec (…), … 99.9th.
# Exits non-zero if the tool fails or prints no summary.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
say() { echo "kafka producer-perf: $*" >&2; }
[[ $# -ge 1 && $# -le 2 ]] || { awk 'NR > 1 && !/^#/ { exit } NR > 1' "$0" >&2; exit 2; }
bootstrap=$1
topic=${2:-perf-$(od -An -N3 -tx1 /dev/urandom | tr -d ' \n')}
cp=${PERF_CLASSPATH:-"$(cat "$("$repo/e2e/interop/kafka/setup.sh" jars | tail -1)")"}
jlog=(-Dorg.slf4j.simpleLogger.defaultLogLevel=warn)

if [[ -n ${PERF_PARTITIONS:-} ]]; then
  say "creating $topic with $PERF_PARTITIONS partitions"
  java -Xmx256m "${jlog[@]}" -cp "$cp" org.apache.kafka.tools.TopicCommand --bootstrap-server "$bootstrap" \
    --create --if-not-exists --topic "$topic" --partitions "$PERF_PARTITIONS" --replication-factor 1 >&2
fi

# shellcheck disable=SC2206 # PERF_PROPS: words
props=(bootstrap.servers="$bootstrap" acks="${PERF_ACKS:-all}" linger.ms="${PERF_LINGER_MS:-5}"
  batch.size="${PERF_BATCH_SIZE:-16384}" ${PERF_PROPS:-})
args=(--topic "$topic" --num-records "${PERF_RECORDS:-1000000}" --record-size "${PERF_SIZE:-1024}"
  --throughput "${PERF_THROUGHPUT:--1}" --reporting-interval "${PERF_REPORTING_MS:-5000}")
[[ ${PERF_WARMUP:-0} -gt 0 ]] && args+=(--warmup-records "$PERF_WARMUP")
args+=(--command-property "${props[@]}")
say "ProducerPerformance ${args[*]}"
out="$(mktemp "${TMPDIR:-/tmp}/kafka-producer-perf.XXXXXX")"
trap 'rm -f "$out"' EXIT
rc=0
java -Xmx1g "${jlog[@]}" -cp "$cp" org.apache.kafka.tools.ProducerPerformance "${args[@]}" 2>&1 | tee "$out" >&2 || rc=$?
summary=$(grep -E '^[0-9]+ records sent, .* ms avg latency' "$out" | tail -1 || true)
[[ $rc == 0 && -n $summary ]] || { say "failed (exit $rc, summary: ${summary:-none})"; exit 1; }
echo "$summary"
if [[ ${PERF_WARMUP:-0} -gt 0 ]]; then
  steady=$(grep -E '^[0-9]+ steady state records sent, ' "$out" | tail -1 || true)
  [[ -n $steady ]] || { say "failed: no steady-state summary"; exit 1; }
  echo "$steady"
fi
