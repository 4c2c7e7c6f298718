#!/usr/bin/env bash
# bench/kafka/kafka-server.sh — Apache Kafka 4.4.0 (single node, KRaft
# combined broker+controller, from the Maven Central jars) as a benchmark
# baseline beside lakegate: a thin wrapper of e2e/interop/kafka/kraft.sh
# (which see), on free 127.0.0.1 ports, its data in a fresh
# <repo>/.cache/kraft-XXXXXX (KRAFT_PARENT moves it), heap 1 GiB.
#
# Flushing is stated, not left implicit (a benchmark must say it):
#   KAFKA_FSYNC=0 (default)  Kafka's default: log.flush.interval.messages =
#                            Long.MAX_VALUE, no timed flush: acknowledged
#                            records are in the page cache, never fsynced on
#                            the produce path (Kafka relies on replication)
#   KAFKA_FSYNC=1            log.flush.interval.messages=1: an fsync after
#                            every append, before the acknowledgement (what
#                            lakegate does with its WAL)
#
# Run:
#   bench/kafka/kafka-server.sh start      starts it and returns; stdout:
#       kafka_bootstrap=127.0.0.1:PORT
#       kafka_dir=<repo>/.cache/kraft-XXXXXX
#       kafka_pid=PID
#       kafka_flush=log.flush.interval.messages=…
#   bench/kafka/kafka-server.sh stop DIR   SIGTERM, up to 30 s, then SIGKILL;
#                                          removes DIR (KEEP=1 keeps it)
# Sourced (a benchmark script that keeps the server as its child):
#   source bench/kafka/kafka-server.sh
#   kafka_server_start     sets kafka_bootstrap, kafka_dir, kafka_pid, kafka_flush
#   kafka_server_stop
# Progress goes to stderr; the server's log is DIR/kafka.log, its
# configuration DIR/server.properties.
_kafka_server_here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=../../e2e/interop/kafka/kraft.sh
source "$_kafka_server_here/../../e2e/interop/kafka/kraft.sh"

kafka_server_start() {
  # kraft.sh draws the cluster id as URL-safe base64, which starts with '-'
  # one time in 64; kafka-storage's argument parser then takes `-t -…` for
  # an option ("argument --cluster-id/-t: expected one argument") and the
  # format fails. Until kraft.sh passes --cluster-id=ID, a failed start is
  # tried again (a fresh directory, a fresh id), at most three times.
  local try
  for try in 1 2 3; do
    start_kraft && break
    [[ $try == 3 ]] && return 1
    echo "kafka-server: start $try failed (see above); trying again with a fresh cluster id" >&2
  done
  kafka_dir=$kraft_dir
  kafka_pid=$kraft_pid
  kafka_flush=$(grep -m1 '^log.flush.interval.messages=' "$kraft_dir/server.properties")
}

kafka_server_stop() {
  stop_kraft "$@"
}

if [[ ${BASH_SOURCE[0]} == "$0" ]]; then
  set -euo pipefail
  case ${1:-} in
  start)
    kafka_server_start
    echo "kafka_bootstrap=$kafka_bootstrap"
    echo "kafka_dir=$kafka_dir"
    echo "kafka_pid=$kafka_pid"
    echo "kafka_flush=$kafka_flush"
    ;;
  stop)
    [[ -n ${2:-} && -f $2/kafka.pid ]] || { echo "usage: $0 stop DIR (a kraft-XXXXXX directory with kafka.pid)" >&2; exit 2; }
    kafka_server_stop "$2"
    ;;
  *)
    echo "usage: $0 start | stop DIR" >&2
    exit 2
    ;;
  esac
fi
