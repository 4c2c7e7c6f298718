#!/usr/bin/env bash
# Runs lakegate's Iceberg REST catalog check against a real REST catalog
# server: resolves the server (setup.sh) and pyiceberg's venv
# (e2e/interop/iceberg/setup.sh), starts Apache Iceberg's REST catalog
# fixture server (RESTCatalogServer) on a free port with its JDBC store (a
# sqlite file) and warehouse in a temp dir, waits for GET /v1/config, runs
# the Go tests that compact logs into Delta + Iceberg through it (with
# crash/resume and two racing engines) and read the rows back with
# iceberg-go and pyiceberg's RestCatalog, then stops the server. Exits
# non-zero on any difference. The server's log is printed on failure.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../../.." && pwd)"
cp="$("$here/setup.sh" | tail -1)"
py="$("$repo/e2e/interop/iceberg/setup.sh" | tail -1)"

tmp="$(mktemp -d)"
pid=""
cleanup() {
  if [[ -n "$pid" ]]; then
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  fi
  rm -rf "$tmp"
}
trap cleanup EXIT
port="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
uri="http://127.0.0.1:$port"

# RESTCatalogServer reads its backend catalog's properties from CATALOG_*
# variables (CATALOG_REST_PORT -> rest.port, "__" -> "-", "_" -> ".").
# lakegate sets every table's location itself (in its own store); the
# warehouse only receives what other clients would create without one.
CATALOG_URI="jdbc:sqlite:$tmp/catalog.db" \
CATALOG_JDBC_SCHEMA__VERSION=V1 \
CATALOG_WAREHOUSE="file://$tmp/warehouse" \
CATALOG_REST_PORT="$port" \
  java -Xmx512m -cp "$cp" org.apache.iceberg.rest.RESTCatalogServer >"$tmp/server.log" 2>&1 &
pid=$!

deadline=$((SECONDS + 60))
until curl -sf "$uri/v1/config" >/dev/null; do
  if ! kill -0 "$pid" 2>/dev/null || ((SECONDS > deadline)); then
    echo "run.sh: REST catalog server did not come up on $uri" >&2
    cat "$tmp/server.log" >&2
    exit 1
  fi
  sleep 0.2
done
echo "run.sh: REST catalog server up on $uri" >&2

cd "$repo"
. "$repo/e2e/interop/gotest.sh"
if ! LAKEGATE_ICEBERG_REST_URI="$uri" LAKEGATE_PYICEBERG="$py" \
  go_test_pass ./tables/ TestCompactToTableIcebergREST TestCompactToTableIcebergRESTConcurrent -- -p 1 -count=1; then
  echo "run.sh: failed; server log:" >&2
  tail -n 200 "$tmp/server.log" >&2
  exit 1
fi
