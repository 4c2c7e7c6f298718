#!/usr/bin/env bash
# Sets up the Kafka interop lane (issue #29): Apache Kafka 4.4.0's server,
# tools and client jars (pom.xml beside this script: kafka_2.13, kafka-tools,
# kafka-clients, all 4.4.0) resolved with Maven into the project-local
# repository <repo>/.cache/m2 (Central only: bench/pulsar/settings.xml), their
# classpath written to <repo>/.cache/kafka-server/classpath.txt; and the
# Python venv <repo>/.cache/venv-kafka with the pinned confluent-kafka
# (requirements.txt, binary wheel). Idempotent: the classpath is resolved
# again only when pom.xml changed or a jar it names is gone; the venv is
# rebuilt only when requirements.txt changed (../venv.sh).
#
# Usage:
#   e2e/interop/kafka/setup.sh        the jars and the venv
#   e2e/interop/kafka/setup.sh jars   the jars only (kraft.sh, bench/kafka)
#
# Output contract (stdout; progress goes to stderr): with no argument,
# exactly two lines, the classpath FILE (one line: jar paths joined by ':')
# and then the venv's python:
#   out=$(e2e/interop/kafka/setup.sh); cpfile=$(sed -n 1p <<<"$out"); py=$(sed -n 2p <<<"$out")
#   java -cp "$(cat "$cpfile")" kafka.Kafka server.properties
# With `jars`, one line: the classpath file.
#
# Environment: LAKEGATE_M2 (Maven repository, default .cache/m2),
# LAKEGATE_KAFKA_VENV (default .cache/venv-kafka), PYTHON (for the venv).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../../.." && pwd)"
m2="${LAKEGATE_M2:-$repo/.cache/m2}"
out="$repo/.cache/kafka-server"
venv="${LAKEGATE_KAFKA_VENV:-$repo/.cache/venv-kafka}"
say() { echo "kafka setup: $*" >&2; }

mkdir -p "$out"
# One setup at a time (run.sh, kraft.sh and the bench scripts all call this).
exec 9>"$out/.lock"
flock 9

want="$(sha256sum "$here/pom.xml" | cut -d' ' -f1)"
stamp="$out/.stamp"
# Every jar of the recorded classpath must still exist (.cache may be shared
# by several checkouts, and the classpath names the m2 path that resolved it).
cp_ok() {
  [[ -s "$out/classpath.txt" ]] || return 1
  local IFS=: j
  for j in $(cat "$out/classpath.txt"); do [[ -e $j ]] || return 1; done
}
if [[ -f "$stamp" && "$(cat "$stamp")" == "$want" ]] && cp_ok; then
  say "$out/classpath.txt is up to date"
else
  say "resolving Apache Kafka's jars (pom.xml) into $m2"
  mkdir -p "$m2"
  rm -f "$out/classpath.txt"
  mvn -q -B -Dstyle.color=never -s "$repo/bench/pulsar/settings.xml" -Dmaven.repo.local="$m2" \
    -Dlakegate.out="$out" -f "$here/pom.xml" compile >&2
  cp_ok || { say "$out/classpath.txt missing or incomplete after mvn"; exit 1; }
  echo "$want" > "$stamp"
fi

if [[ ${1:-} == jars ]]; then
  echo "$out/classpath.txt"
  exit 0
fi
[[ $# -eq 0 ]] || { say "unknown argument: $1 (usage: setup.sh [jars])"; exit 2; }

# shellcheck source=../venv.sh
source "$here/../venv.sh"
pinned_venv "$venv" "$here/requirements.txt" kafka \
  'import confluent_kafka; from confluent_kafka.admin import AdminClient, NewTopic; print("confluent-kafka", confluent_kafka.version(), "librdkafka", confluent_kafka.libversion()[0])' \
  --only-binary confluent-kafka
echo "$out/classpath.txt"
echo "$venv/bin/python"
