#!/usr/bin/env bash
# Resolves pulsar-admin and pulsar-client (org.apache.pulsar:pulsar-client-tools,
# version pinned in pom.xml — the Java client's of ../java) from Maven Central
# into the project-local Maven repository <repo>/.cache/m2 and records their
# classpath in <repo>/.cache/pulsar-tools (LAKEGATE_TOOLS_OUT to use another
# directory). Idempotent: when pom.xml hashes to the recorded stamp and every
# jar of the recorded classpath exists, nothing runs. Prints the classpath
# last:
#   cp=$(e2e/interop/tools/setup.sh | tail -1)
#   java -cp "$cp" org.apache.pulsar.admin.cli.PulsarAdminTool client.conf tenants list
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../../.." && pwd)"
m2="${LAKEGATE_M2:-$repo/.cache/m2}"
out="${LAKEGATE_TOOLS_OUT:-$repo/.cache/pulsar-tools}"

want="$(sha256sum "$here/pom.xml" | cut -d' ' -f1)"
mkdir -p "$out"
exec 9>"$out/.lock"
flock 9
stamp="$out/.lakegate-tools-stamp"
# Every jar must exist: .cache may be shared by several checkouts.
cp_ok() {
  [[ -s "$out/classpath.txt" ]] || return 1
  local IFS=:
  for j in $(cat "$out/classpath.txt"); do [[ -e $j ]] || return 1; done
}
if [[ -f "$stamp" && "$(cat "$stamp")" == "$want" ]] && cp_ok; then
  echo "setup.sh: $out is up to date" >&2
else
  mkdir -p "$m2"
  mvn -q -B -Dstyle.color=never -Dmaven.repo.local="$m2" -Dlakegate.out="$out" -f "$here/pom.xml" generate-resources >&2
  cp_ok || { echo "setup.sh: $out/classpath.txt missing or incomplete after mvn" >&2; exit 1; }
  echo "$want" > "$stamp"
fi
cat "$out/classpath.txt"
