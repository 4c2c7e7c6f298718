#!/usr/bin/env bash
# Resolves the Apache Iceberg REST catalog fixture server and its runtime
# dependencies (pom.xml, every version pinned) into the project-local Maven
# repository <repo>/.cache/m2, and writes the classpath to
# <repo>/.cache/iceberg-rest/classpath.txt. Nothing is compiled. Idempotent:
# when pom.xml hashes to the recorded stamp and the classpath is there,
# nothing runs. Prints the classpath last, so callers can do:
#   cp=$(e2e/interop/iceberg-rest/setup.sh | tail -1)
#   java -cp "$cp" org.apache.iceberg.rest.RESTCatalogServer
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../../.." && pwd)"
m2="${LAKEGATE_M2:-$repo/.cache/m2}"
out="$repo/.cache/iceberg-rest"

want="$(sha256sum "$here/pom.xml" | cut -d' ' -f1)"
mkdir -p "$out"
exec 9>"$out/.lock"
flock 9
stamp="$out/.lakegate-iceberg-rest-stamp"
if [[ -f "$stamp" && "$(cat "$stamp")" == "$want" && -s "$out/classpath.txt" ]]; then
  echo "setup.sh: $out is up to date" >&2
else
  mkdir -p "$m2"
  rm -f "$out/classpath.txt"
  mvn -q -B -Dstyle.color=never -Dmaven.repo.local="$m2" -f "$here/pom.xml" generate-resources >&2
  [[ -s "$out/classpath.txt" ]] || { echo "setup.sh: $out/classpath.txt missing after mvn" >&2; exit 1; }
  echo "$want" > "$stamp"
fi
cat "$out/classpath.txt"
echo
