#!/usr/bin/env bash
# Resolves Apache Pulsar's proxy (org.apache.pulsar:pulsar-proxy, version
# pinned in pom.xml) from Maven Central into the project-local Maven
# repository <repo>/.cache/m2 (Central only: ../../../bench/pulsar/settings.xml)
# and records its classpath in <repo>/.cache/pulsar-proxy
# (LAKEGATE_PROXY_OUT to use another directory). Idempotent: when pom.xml
# hashes to the recorded stamp and every jar of the recorded classpath
# exists, nothing runs. Prints the classpath last:
#   cp=$(e2e/interop/proxy/setup.sh | tail -1)
#   java -cp "$cp" org.apache.pulsar.proxy.server.ProxyServiceStarter -c proxy.conf
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../../.." && pwd)"
m2="${LAKEGATE_M2:-$repo/.cache/m2}"
out="${LAKEGATE_PROXY_OUT:-$repo/.cache/pulsar-proxy}"

want="$(sha256sum "$here/pom.xml" | cut -d' ' -f1)"
mkdir -p "$out"
exec 9>"$out/.lock"
flock 9
stamp="$out/.lakegate-proxy-stamp"
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
  mvn -q -B -Dstyle.color=never -s "$repo/bench/pulsar/settings.xml" -Dmaven.repo.local="$m2" \
    -Dlakegate.out="$out" -f "$here/pom.xml" generate-resources >&2
  cp_ok || { echo "setup.sh: $out/classpath.txt missing or incomplete after mvn" >&2; exit 1; }
  echo "$want" > "$stamp"
fi
cat "$out/classpath.txt"
