#!/usr/bin/env bash
# Runs the Java interop scenarios (issue #6): the unmodified Apache Pulsar
# Java client and pulsar-client-admin (versions pinned in pom.xml) against a
# fresh `lakegate standalone` on free loopback ports in a temporary data
# directory. Prints one line per scenario (PASS/FAIL/SKIP with the reason)
# and the summary `java: N/M scenarios passed`; exits non-zero if any
# scenario failed or was skipped, or lakegate did not start or stop cleanly.
#
# Environment:
#   JAVA_SCENARIOS  a regex: run only the scenarios whose name matches
#   KEEP=1          keep the temporary directory (lakegate data, logs)
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../../.." && pwd)"
cp="$("$here/setup.sh" | tail -1)"
cd "$repo"
mkdir -p .cache/bin
go build -o .cache/bin/lakegate ./cmd/lakegate

tmp="$(mktemp -d "${TMPDIR:-/tmp}/lakegate-java.XXXXXX")"
lg_pid=
cleanup() {
  if [[ -n $lg_pid ]] && kill -0 "$lg_pid" 2>/dev/null; then
    kill -TERM "$lg_pid" 2>/dev/null || true
    wait "$lg_pid" 2>/dev/null || true
  fi
  if [[ ${KEEP:-0} == 1 ]]; then echo "java interop: kept $tmp" >&2; else rm -rf "$tmp"; fi
}
trap cleanup EXIT

# 127.0.0.1:0 for both listeners: the real addresses come from the ready
# line, so no port can be raced for.
.cache/bin/lakegate standalone --data-dir "$tmp/data" --pulsar-addr 127.0.0.1:0 --http-addr 127.0.0.1:0 \
  2>"$tmp/lakegate.log" &
lg_pid=$!
ready=
for _ in $(seq 1 600); do
  ready="$(grep -m1 'pulsar_url=' "$tmp/lakegate.log" || true)"
  [[ -n $ready ]] && break
  kill -0 "$lg_pid" 2>/dev/null || { cat "$tmp/lakegate.log" >&2; echo "java interop: lakegate exited before it was ready" >&2; exit 1; }
  sleep 0.1
done
[[ -n $ready ]] || { echo "java interop: lakegate not ready after 60 s" >&2; exit 1; }
url="$(sed -E 's/.*pulsar_url=([^ ]+).*/\1/' <<<"$ready")"
http="http://$(sed -E 's/.* http=([^ ]+).*/\1/' <<<"$ready")"
for _ in $(seq 1 100); do
  curl -fsS "$http/readyz" >/dev/null 2>&1 && break
  sleep 0.1
done
curl -fsS "$http/readyz" >/dev/null || { echo "java interop: $http/readyz not answering" >&2; exit 1; }
echo "java interop: lakegate pid $lg_pid at $url, admin $http" >&2

rc=0
java -Dorg.slf4j.simpleLogger.defaultLogLevel=warn -Dorg.slf4j.simpleLogger.logFile="$tmp/client.log" \
  -cp "$cp" lakegate.interop.Main "$url" "$http" ${JAVA_SCENARIOS:+"$JAVA_SCENARIOS"} || rc=$?

kill -TERM "$lg_pid"
lg_rc=0
wait "$lg_pid" || lg_rc=$?
lg_pid=
if [[ $rc -ne 0 ]]; then
  echo "java interop: client log (WARN and above), last lines:" >&2
  tail -n 40 "$tmp/client.log" >&2 || true
  echo "java interop: lakegate log, WARN/ERROR lines:" >&2
  grep -E 'level=(WARN|ERROR)' "$tmp/lakegate.log" | tail -n 40 >&2 || true
fi
[[ $lg_rc -eq 0 ]] || { echo "java interop: lakegate exited with status $lg_rc after SIGTERM" >&2; exit 1; }
exit "$rc"
