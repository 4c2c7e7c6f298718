#!/usr/bin/env bash
# Apache Kafka 4.4.0's command-line tools against a Kafka listener (Apache
# Kafka or lakegate), each run as its Java main class from the classpath that
# setup.sh resolves (no tarball, no bin/*.sh):
#   kafka-topics            org.apache.kafka.tools.TopicCommand
#   kafka-console-producer  org.apache.kafka.tools.ConsoleProducer
#   kafka-console-consumer  org.apache.kafka.tools.consumer.ConsoleConsumer
#   kafka-consumer-groups   org.apache.kafka.tools.consumer.group.ConsumerGroupCommand
#   kafka-get-offsets       org.apache.kafka.tools.GetOffsetShell
#   kafka-producer-perf-test org.apache.kafka.tools.ProducerPerformance
# (the 4.x class names; 4.x renamed several options: --reader-property,
# --formatter-property, --command-property replace --property and
# --producer-props, which still work but are deprecated).
#
# Scenarios (each prints `PASS name (T s)` or `FAIL name: reason`):
#   topics           --create a 2-partition topic, --list has it, --describe
#                    shows PartitionCount: 2 and a leader for each partition
#   console          ConsoleProducer sends 100 key:value lines (acks=all);
#                    GetOffsetShell's end offsets add up to 100;
#                    ConsoleConsumer --from-beginning --max-messages 100
#                    --group G prints exactly those 100 lines
#   consumer-groups  --list has G; --describe --group G: CURRENT-OFFSET =
#                    LOG-END-OFFSET on every partition (they add up to 100),
#                    LAG 0; --reset-offsets --to-earliest --execute, then
#                    CURRENT-OFFSET 0 and LAG = LOG-END-OFFSET (runs `console`
#                    first if it did not run)
#   producer-perf    ProducerPerformance: 20 000 records of 100 bytes,
#                    unthrottled, acks=all; its summary line says 20000
#                    records sent
#
# Usage: KAFKA_BOOTSTRAP=host:port[,…] e2e/interop/kafka/tools.sh
# Environment: KAFKA_TOPIC_PREFIX (default tk-RANDOM-), SCENARIOS=a,b,
# TOOL_TIMEOUT (seconds per tool run, default 120), KAFKA_TOOLS_LOG (the
# tools' stderr, default a temporary file removed at exit unless a scenario
# failed), TOOL_JAVA_OPTS (more JVM options for every tool run, e.g. a log
# level). Prints `kafka-tools: N/M scenarios passed`; exits 1 if one failed,
# 2 on a usage error.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
say() { echo "kafka-tools: $*" >&2; }
[[ -n ${KAFKA_BOOTSTRAP:-} ]] || { say "KAFKA_BOOTSTRAP (host:port[,host:port...]) is required"; exit 2; }
bootstrap=$KAFKA_BOOTSTRAP
prefix=${KAFKA_TOPIC_PREFIX:-tk-$(od -An -N3 -tx1 /dev/urandom | tr -d ' \n')-}
cp="$(cat "$("$here/setup.sh" jars | tail -1)")"
work="$(mktemp -d "${TMPDIR:-/tmp}/lakegate-kafka-tools.XXXXXX")"
log=${KAFKA_TOOLS_LOG:-$work/tools.log}
failed=0
cleanup() {
  if [[ $failed == 0 ]]; then rm -rf "$work"; else say "kept $work (tool output, $log)"; fi
}
trap cleanup EXIT

# tool CLASS ARGS…: one tool run, stdout to stdout, stderr appended to $log,
# bounded by TOOL_TIMEOUT.
tool() {
  local cls=$1
  shift
  echo "--- $cls $*" >>"$log"
  # shellcheck disable=SC2086 # TOOL_JAVA_OPTS: words
  timeout "${TOOL_TIMEOUT:-120}" java -Xmx512m -Dorg.slf4j.simpleLogger.defaultLogLevel=warn ${TOOL_JAVA_OPTS:-} \
    -cp "$cp" "$cls" "$@" 2>>"$log"
}
TOPICS=org.apache.kafka.tools.TopicCommand
PRODUCER=org.apache.kafka.tools.ConsoleProducer
CONSUMER=org.apache.kafka.tools.consumer.ConsoleConsumer
GROUPS_CMD=org.apache.kafka.tools.consumer.group.ConsumerGroupCommand
OFFSETS=org.apache.kafka.tools.GetOffsetShell
PERF=org.apache.kafka.tools.ProducerPerformance

fail_reason=
fail() { fail_reason=$*; return 1; }

scenario_topics() {
  local t=${prefix}topics out
  out=$(tool $TOPICS --bootstrap-server "$bootstrap" --create --topic "$t" --partitions 2 --replication-factor 1) ||
    fail "kafka-topics --create failed: $out" || return 1
  grep -q "Created topic $t" <<<"$out" || fail "kafka-topics --create said: $out" || return 1
  out=$(tool $TOPICS --bootstrap-server "$bootstrap" --list) || fail "kafka-topics --list failed" || return 1
  grep -qxF "$t" <<<"$out" || fail "kafka-topics --list lacks $t" || return 1
  out=$(tool $TOPICS --bootstrap-server "$bootstrap" --describe --topic "$t") ||
    fail "kafka-topics --describe failed: $out" || return 1
  grep -qE "PartitionCount: 2\b" <<<"$out" || fail "kafka-topics --describe: no PartitionCount: 2 in: $(head -1 <<<"$out")" || return 1
  local leaders
  leaders=$(grep -cE "Partition: [01]\s+Leader: [0-9]+" <<<"$out" || true)
  [[ $leaders == 2 ]] || fail "kafka-topics --describe: $leaders of 2 partitions have a leader: $out" || return 1
}

console_topic=
console_group=
console_n=100
scenario_console() {
  local t=${prefix}console g=${prefix}console-g out sum
  tool $TOPICS --bootstrap-server "$bootstrap" --create --topic "$t" --partitions 3 --replication-factor 1 >/dev/null ||
    fail "kafka-topics --create $t failed" || return 1
  for i in $(seq 1 $console_n); do echo "key-$i:value-$i"; done >"$work/console.in"
  tool $PRODUCER --bootstrap-server "$bootstrap" --topic "$t" --command-property acks=all \
    --reader-property parse.key=true --reader-property key.separator=: <"$work/console.in" >/dev/null ||
    fail "kafka-console-producer failed (exit $?)" || return 1
  out=$(tool $OFFSETS --bootstrap-server "$bootstrap" --topic "$t" --time -1) || fail "GetOffsetShell failed" || return 1
  # Lines TOPIC:PARTITION:OFFSET.
  sum=$(awk -F: '{s += $NF} END {print s + 0}' <<<"$out")
  [[ $sum == "$console_n" ]] || fail "GetOffsetShell end offsets add up to $sum, want $console_n: $out" || return 1
  tool $CONSUMER --bootstrap-server "$bootstrap" --topic "$t" --from-beginning --max-messages $console_n \
    --group "$g" --timeout-ms 30000 --formatter-property print.key=true --formatter-property key.separator=: \
    >"$work/console.out" || fail "kafka-console-consumer failed (exit $?; read $(wc -l <"$work/console.out") lines)" || return 1
  if ! diff <(sort "$work/console.in") <(sort "$work/console.out") >"$work/console.diff"; then
    fail "kafka-console-consumer printed $(wc -l <"$work/console.out") lines, not the $console_n sent: $(head -c 300 "$work/console.diff")"
    return 1
  fi
  console_topic=$t console_group=$g
}

# describe_group: the --describe table's rows for console_topic as
# "PARTITION CURRENT LOG-END LAG", by the header's column names.
describe_group() {
  local out
  out=$(tool $GROUPS_CMD --bootstrap-server "$bootstrap" --describe --group "$console_group") || return 1
  awk -v t="$console_topic" '
    $1 == "GROUP" { for (i = 1; i <= NF; i++) col[$i] = i; next }
    ("TOPIC" in col) && $col["TOPIC"] == t {
      print $col["PARTITION"], $col["CURRENT-OFFSET"], $col["LOG-END-OFFSET"], $col["LAG"]
    }' <<<"$out"
}

scenario_consumer_groups() {
  if [[ -z $console_group ]]; then
    scenario_console || return 1
  fi
  local out rows cur=0 end=0 p c e l
  out=$(tool $GROUPS_CMD --bootstrap-server "$bootstrap" --list) || fail "kafka-consumer-groups --list failed" || return 1
  grep -qxF "$console_group" <<<"$out" || fail "kafka-consumer-groups --list lacks $console_group: $out" || return 1
  rows=$(describe_group) || fail "kafka-consumer-groups --describe failed" || return 1
  [[ $(wc -l <<<"$rows") == 3 ]] || fail "kafka-consumer-groups --describe: want 3 partition rows, got: $rows" || return 1
  while read -r p c e l; do
    [[ $c == "$e" && $l == 0 ]] || fail "partition $p: CURRENT-OFFSET $c LOG-END-OFFSET $e LAG $l, want lag 0" || return 1
    cur=$((cur + c)) end=$((end + e))
  done <<<"$rows"
  [[ $cur == "$console_n" && $end == "$console_n" ]] ||
    fail "committed offsets add up to $cur, log ends to $end; want $console_n" || return 1
  out=$(tool $GROUPS_CMD --bootstrap-server "$bootstrap" --reset-offsets --group "$console_group" \
    --topic "$console_topic" --to-earliest --execute) || fail "kafka-consumer-groups --reset-offsets failed: $out" || return 1
  rows=$(describe_group) || fail "kafka-consumer-groups --describe after the reset failed" || return 1
  while read -r p c e l; do
    [[ $c == 0 && $l == "$e" ]] || fail "after --reset-offsets --to-earliest: partition $p CURRENT-OFFSET $c LAG $l, want 0 and $e" || return 1
  done <<<"$rows"
}

scenario_producer_perf() {
  local t=${prefix}perf n=20000 out summary
  out=$(tool $PERF --topic "$t" --num-records $n --record-size 100 --throughput -1 \
    --command-property bootstrap.servers="$bootstrap" acks=all linger.ms=5) || fail "ProducerPerformance failed (exit $?)" || return 1
  # The last line: "N records sent, R records/sec (M MB/sec), A ms avg latency, X ms max latency, …".
  summary=$(grep -E '^[0-9]+ records sent, .* ms avg latency' <<<"$out" | tail -1)
  [[ -n $summary ]] || fail "no summary line in: $(tail -3 <<<"$out")" || return 1
  [[ ${summary%% *} == "$n" ]] || fail "summary: $summary" || return 1
  say "producer-perf: $summary"
}

all=(topics console consumer-groups producer-perf)
run=()
if [[ -n ${SCENARIOS:-} ]]; then
  IFS=, read -ra want <<<"$SCENARIOS"
  for w in "${want[@]}"; do
    [[ -z $w ]] && continue
    [[ " ${all[*]} " == *" $w "* ]] || { say "unknown scenario $w; known: ${all[*]}"; exit 2; }
    run+=("$w")
  done
else
  run=("${all[@]}")
fi

passed=0
for s in "${run[@]}"; do
  t0=$(date +%s.%N)
  fail_reason=
  if "scenario_${s//-/_}"; then
    passed=$((passed + 1))
    printf 'PASS %s (%.1f s)\n' "$s" "$(echo "$(date +%s.%N) - $t0" | bc)"
  else
    failed=1
    printf 'FAIL %s: %s (%.1f s)\n' "$s" "${fail_reason:-see $log}" "$(echo "$(date +%s.%N) - $t0" | bc)"
  fi
done
echo "kafka-tools: $passed/${#run[@]} scenarios passed"
[[ $passed == "${#run[@]}" ]]
