#!/usr/bin/env bash
# Runs the Kafka interop suites (issue #29) against one Kafka listener:
#   java    the Apache Kafka Java client 4.4.0 (java/: produce/consume with
#           keys, headers, timestamps and every codec, a consumer group's
#           hand-off, the admin client)
#   python  confluent-kafka (librdkafka; scenarios.py)
#   tools   Apache Kafka's CLI tools as Java main classes (tools.sh)
# Each suite prints one line per scenario (PASS/FAIL) and its own summary;
# run.sh then prints the suites' summaries, their times and
# `kafka-interop: N passed, M failed` (scenarios), and exits non-zero if a
# scenario failed, a suite did not finish, or the server did not start or
# stop cleanly.
#
# Targets (KAFKA_TARGET):
#   lakegate (default)  builds lakegate (.cache/bin/lakegate) and starts it
#                       with ../nodes.sh: `start_lakegate .cache/bin/lakegate
#                       --kafka-addr 127.0.0.1:0`; each node's Kafka address
#                       is the `kafka=` key of its `lakegate node ready` log
#                       line. LAKEGATE_NODES=3: a three-node cluster, the
#                       bootstrap then names every node (comma-separated)
#   apache              a single-node Apache Kafka 4.4.0 in KRaft combined
#                       mode (kraft.sh) in .cache/kraft-XXXXXX
#   external            an already running listener at KAFKA_BOOTSTRAP
# Before the suites, probe.py waits (60 s bound) until every bootstrap
# address answers ApiVersions and Metadata.
#
# Usage: KAFKA_TARGET=apache e2e/interop/kafka/run.sh
# Environment:
#   KAFKA_SUITES        suites to run (default java,python,tools)
#   JAVA_SCENARIOS, PYTHON_SCENARIOS, TOOLS_SCENARIOS
#                       a comma-separated selection within one suite (passed
#                       to it as SCENARIOS)
#   KAFKA_TOPIC_PREFIX  prefix of every topic and group (default ki-RANDOM-;
#                       each suite adds java-, py-, tools-)
#   SUITE_TIMEOUT       seconds a suite may take (default 300)
#   KAFKA_CLIENT_DEBUG=1  the Java client and the tools log
#                       org.apache.kafka.clients.NetworkClient at DEBUG (each
#                       request's API key and version), librdkafka logs
#                       debug=protocol; the logs stay in the kept directory
#                       (implies KEEP=1)
#   KAFKA_FSYNC=1       (apache) fsync every append; see kraft.sh
#   LAKEGATE_NODES, LAKEGATE_BIN  (lakegate) as for the other interop runners
#   KEEP=1              keep the temporary directory (server data and logs,
#                       client logs)
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../../.." && pwd)"
cd "$repo"
say() { echo "kafka-interop: $*" >&2; }
target=${KAFKA_TARGET:-lakegate}
suites=${KAFKA_SUITES:-java,python,tools}
debug=${KAFKA_CLIENT_DEBUG:-0}
[[ $debug == 1 ]] && KEEP=1
prefix=${KAFKA_TOPIC_PREFIX:-ki-$(od -An -N3 -tx1 /dev/urandom | tr -d ' \n')-}
t_start=$(date +%s.%N)
elapsed() { printf '%.1f' "$(echo "$(date +%s.%N) - $1" | bc)"; }

# --- 1. clients and tools, pinned (idempotent) ------------------------------------
setup_out="$("$here/setup.sh")"
py="$(sed -n 2p <<<"$setup_out")"
java_cp=
[[ ,$suites, == *,java,* ]] && java_cp="$("$here/java/setup.sh" | tail -1)"

tmp="$(mktemp -d "${TMPDIR:-/tmp}/lakegate-kafka-interop.XXXXXX")"
server_logs=()
stop_server() { :; }
cleanup() {
  stop_server >/dev/null 2>&1 || true
  if [[ ${KEEP:-0} == 1 ]]; then say "kept $tmp"; else rm -rf "$tmp"; fi
}
trap cleanup EXIT

# --- 2. the server ------------------------------------------------------------------
t_server=$(date +%s.%N)
case $target in
apache)
  # shellcheck source=kraft.sh
  source "$here/kraft.sh"
  stop_server() { stop_kraft; }
  start_kraft
  bootstrap=$kafka_bootstrap
  server_logs=("$kraft_dir/kafka.log")
  ;;
lakegate)
  lakegate="${LAKEGATE_BIN:-}"
  if [[ -z $lakegate ]]; then
    mkdir -p .cache/bin
    say "building lakegate"
    go build -o .cache/bin/lakegate ./cmd/lakegate
    lakegate=.cache/bin/lakegate
  fi
  # shellcheck source=../nodes.sh
  source "$here/../nodes.sh"
  stop_server() { stop_lakegate; }
  start_lakegate "$lakegate" --kafka-addr 127.0.0.1:0
  addrs=()
  for log in "${lg_logs[@]}"; do
    ready=$(grep -m1 'lakegate node ready' "$log" || true)
    a=$(attr "$ready" kafka)
    [[ -n $a ]] || { say "no kafka= address in the ready line of $log: $ready"; exit 1; }
    addrs+=("$a")
  done
  bootstrap=$(IFS=,; echo "${addrs[*]}")
  server_logs=("${lg_logs[@]}")
  ;;
external)
  [[ -n ${KAFKA_BOOTSTRAP:-} ]] || { say "KAFKA_TARGET=external needs KAFKA_BOOTSTRAP"; exit 2; }
  bootstrap=$KAFKA_BOOTSTRAP
  ;;
*)
  say "unknown KAFKA_TARGET=$target (lakegate, apache or external)"
  exit 2
  ;;
esac
python3 "$here/probe.py" wait "$bootstrap" 60 || { say "target $target at $bootstrap not ready"; exit 1; }
say "target $target at $bootstrap, ready in $(elapsed "$t_server") s"
python3 "$here/probe.py" apiversions "${bootstrap%%,*}" >"$tmp/server-apiversions.txt" || true

# --- 3. the suites --------------------------------------------------------------------
netdebug=()
[[ $debug == 1 ]] && netdebug=(-Dorg.slf4j.simpleLogger.log.org.apache.kafka.clients.NetworkClient=debug)
summaries=()
rc=0
total_pass=0
total_fail=0

# suite NAME SUMMARY_PREFIX CMD…: runs a suite under SUITE_TIMEOUT, its output
# teed to $tmp/NAME.out; adds its PASS/FAIL counts and summary.
suite() {
  local name=$1 tag=$2 t0 src=0 summary p f
  shift 2
  t0=$(date +%s.%N)
  say "suite $name"
  timeout -k 10 "${SUITE_TIMEOUT:-300}" "$@" </dev/null | tee "$tmp/$name.out" || src=$?
  p=$(grep -c '^PASS ' "$tmp/$name.out" || true)
  f=$(grep -c '^FAIL ' "$tmp/$name.out" || true)
  total_pass=$((total_pass + p)) total_fail=$((total_fail + f))
  summary=$(grep -E "^$tag: [0-9]+/[0-9]+ scenarios passed" "$tmp/$name.out" | tail -1 || true)
  if [[ $src == 124 ]]; then
    summary="$tag: did not finish within ${SUITE_TIMEOUT:-300} s ($p passed, $f failed by then)"
  elif [[ -z $summary ]]; then
    summary="$tag: exited $src without a summary ($p passed, $f failed)"
  fi
  [[ $src == 0 ]] || rc=1
  summaries+=("$summary ($(elapsed "$t0") s)")
}

IFS=, read -ra want <<<"$suites"
for s in "${want[@]}"; do
  case $s in
  java)
    suite java java-kafka env KAFKA_BOOTSTRAP="$bootstrap" KAFKA_TOPIC_PREFIX="${prefix}java-" \
      SCENARIOS="${JAVA_SCENARIOS:-}" java -Xmx512m -Dorg.slf4j.simpleLogger.defaultLogLevel=warn \
      -Dorg.slf4j.simpleLogger.showDateTime=true -Dorg.slf4j.simpleLogger.dateTimeFormat=HH:mm:ss.SSS \
      "${netdebug[@]}" -Dorg.slf4j.simpleLogger.logFile="$tmp/java-client.log" \
      -cp "$java_cp" lakegate.kafkainterop.Main
    ;;
  python)
    suite python python-kafka env KAFKA_BOOTSTRAP="$bootstrap" KAFKA_TOPIC_PREFIX="${prefix}py-" \
      SCENARIOS="${PYTHON_SCENARIOS:-}" KAFKA_CLIENT_DEBUG="$debug" \
      sh -c 'exec "$1" "$2" 2>"$3"' sh "$py" "$here/scenarios.py" "$tmp/python-client.log"
    ;;
  tools)
    suite tools kafka-tools env KAFKA_BOOTSTRAP="$bootstrap" KAFKA_TOPIC_PREFIX="${prefix}tools-" \
      SCENARIOS="${TOOLS_SCENARIOS:-}" KAFKA_TOOLS_LOG="$tmp/tools.log" TOOL_JAVA_OPTS="${netdebug[*]}" \
      "$here/tools.sh"
    ;;
  *)
    say "unknown suite $s (java, python, tools)"
    exit 2
    ;;
  esac
done

# --- 4. report, stop ------------------------------------------------------------------
if [[ $rc != 0 ]]; then
  for f in "$tmp/java-client.log" "$tmp/python-client.log" "$tmp/tools.log"; do
    [[ -s $f ]] || continue
    say "last lines of $f:"
    tail -n 20 "$f" >&2
  done
  for f in "${server_logs[@]}"; do
    say "$target log $f, WARN/ERROR lines:"
    grep -hE 'level=(WARN|ERROR)| (WARN|ERROR) ' "$f" 2>/dev/null | tail -n 30 >&2 || true
  done
fi
stop_rc=0
stop_server || stop_rc=$?
stop_server() { :; }
if [[ $stop_rc != 0 ]]; then
  say "the $target server did not stop cleanly (status $stop_rc)"
  rc=1
fi
# KAFKA_CLIENT_DEBUG=1: which API keys and versions each client sent (from
# the Java NetworkClient's "Sending … RequestHeader(apiKey=…, apiVersion=…)"
# lines and librdkafka's "Sent …Request (vN" lines), to api-usage.txt.
if [[ $debug == 1 ]]; then
  {
    for f in java-client tools; do
      [[ -s $tmp/$f.log ]] || continue
      echo "# $f: requests sent (count, API, version)"
      grep -oE "Sending [A-Z_]+ request with header RequestHeader\(apiKey=[A-Z_]+, apiVersion=[0-9]+" "$tmp/$f.log" |
        sed -E 's/.*apiKey=([A-Z_]+), apiVersion=([0-9]+)/\1 v\2/' | sort | uniq -c
    done
    if [[ -s $tmp/python-client.log ]]; then
      echo "# python-client (librdkafka): requests sent (count, API, version)"
      grep -oE "Sent [A-Za-z]+Request \(v[0-9]+" "$tmp/python-client.log" | sed -E 's/Sent ([A-Za-z]+)Request \(v/\1 v/' | sort | uniq -c
    fi
    echo "# the server's ApiVersions (key, name, min..max)"
    cat "$tmp/server-apiversions.txt"
  } >"$tmp/api-usage.txt"
  say "API keys and versions the clients sent: $tmp/api-usage.txt"
fi
echo "kafka-interop ($target at $bootstrap):"
for s in "${summaries[@]}"; do echo "  $s"; done
echo "kafka-interop: $total_pass passed, $total_fail failed"
say "total $(elapsed "$t_start") s"
exit $rc
