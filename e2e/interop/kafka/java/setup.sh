#!/usr/bin/env bash
# Resolves the pinned Apache Kafka Java client (kafka-clients 4.4.0, pom.xml)
# into the project-local Maven repository <repo>/.cache/m2 (Central only:
# bench/pulsar/settings.xml) and compiles the Kafka scenario runner into
# <repo>/.cache/kafka-interop-java. Idempotent: when pom.xml and the sources
# hash to the recorded stamp, the classes are there and every jar of the
# recorded classpath exists, nothing runs. Progress goes to stderr; prints
# the runner's classpath last, so callers can do:
#   cp=$(e2e/interop/kafka/java/setup.sh | tail -1)
#   KAFKA_BOOTSTRAP=127.0.0.1:9092 java -cp "$cp" lakegate.kafkainterop.Main
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../../../.." && pwd)"
m2="${LAKEGATE_M2:-$repo/.cache/m2}"
out="$repo/.cache/kafka-interop-java"

want="$(cd "$here" && find pom.xml src -type f | LC_ALL=C sort | xargs sha256sum | sha256sum | cut -d' ' -f1)"
mkdir -p "$out"
exec 9>"$out/.lock"
flock 9
stamp="$out/.stamp"
cp_ok() {
  [[ -s "$out/classpath.txt" ]] || return 1
  local IFS=: j
  for j in $(cat "$out/classpath.txt"); do [[ -e $j ]] || return 1; done
}
if [[ -f "$stamp" && "$(cat "$stamp")" == "$want" && -d "$out/target/classes" ]] && cp_ok; then
  echo "kafka java setup: $out is up to date" >&2
else
  echo "kafka java setup: resolving kafka-clients and compiling the scenarios into $out" >&2
  mkdir -p "$m2"
  rm -rf "$out/target" "$out/classpath.txt"
  mvn -q -B -Dstyle.color=never -s "$repo/bench/pulsar/settings.xml" -Dmaven.repo.local="$m2" \
    -Dlakegate.out="$out" -f "$here/pom.xml" compile >&2
  cp_ok || { echo "kafka java setup: $out/classpath.txt missing or incomplete after mvn" >&2; exit 1; }
  echo "$want" > "$stamp"
fi
echo "$out/target/classes:$(cat "$out/classpath.txt")"
