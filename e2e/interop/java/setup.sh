#!/usr/bin/env bash
# Resolves the pinned Pulsar Java client + admin client (pom.xml) into the
# project-local Maven repository <repo>/.cache/m2 and compiles the scenario
# runner into <repo>/.cache/java-interop. Idempotent: when pom.xml and the
# sources hash to the recorded stamp and the classes are there, nothing runs.
# Prints the runner's classpath last, so callers can do:
#   cp=$(e2e/interop/java/setup.sh | tail -1); java -cp "$cp" lakegate.interop.Main ...
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../../.." && pwd)"
m2="${LAKEGATE_M2:-$repo/.cache/m2}"
# LAKEGATE_JAVA_OUT: compile somewhere else than the (shared) .cache.
out="${LAKEGATE_JAVA_OUT:-$repo/.cache/java-interop}"

want="$(cd "$here" && find pom.xml src -type f | LC_ALL=C sort | xargs sha256sum | sha256sum | cut -d' ' -f1)"
# One setup at a time (the Python runner calls this script too).
mkdir -p "$out"
exec 9>"$out/.lock"
flock 9
stamp="$out/.lakegate-java-stamp"
# Every jar of the recorded classpath must still exist: .cache may be shared
# by several checkouts, and the classpath names the m2 path of the one that
# resolved it.
cp_ok() {
  [[ -s "$out/classpath.txt" ]] || return 1
  local IFS=:
  for j in $(cat "$out/classpath.txt"); do [[ -e $j ]] || return 1; done
}
if [[ -f "$stamp" && "$(cat "$stamp")" == "$want" && -d "$out/target/classes" ]] && cp_ok; then
  echo "setup.sh: $out is up to date" >&2
else
  mkdir -p "$m2"
  mvn -q -B -Dstyle.color=never -Dmaven.repo.local="$m2" -Dlakegate.out="$out" -f "$here/pom.xml" compile >&2
  [[ -s "$out/classpath.txt" ]] || { echo "setup.sh: $out/classpath.txt missing after mvn" >&2; exit 1; }
  echo "$want" > "$stamp"
fi
echo "$out/target/classes:$(cat "$out/classpath.txt")"
