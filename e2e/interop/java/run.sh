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
#   LAKEGATE_NODES  3: against a three-node cluster (one etcd, three
#                   `lakegate serve`; ../nodes.sh) instead of a standalone node
#   KEEP=1          keep the temporary directory (lakegate data, logs)
#   LAKEGATE_BIN    use this lakegate binary instead of building one
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../../.." && pwd)"
cp="$("$here/setup.sh" | tail -1)"
cd "$repo"
lakegate="${LAKEGATE_BIN:-}"
if [[ -z $lakegate ]]; then
  mkdir -p .cache/bin
  go build -o .cache/bin/lakegate ./cmd/lakegate
  lakegate=.cache/bin/lakegate
fi

tmp="$(mktemp -d "${TMPDIR:-/tmp}/lakegate-java.XXXXXX")"
say() { echo "java interop: $*" >&2; }
# shellcheck source=../nodes.sh
source "$here/../nodes.sh"
cleanup() {
  stop_lakegate >/dev/null 2>&1 || true
  if [[ ${KEEP:-0} == 1 ]]; then say "kept $tmp"; else rm -rf "$tmp"; fi
}
trap cleanup EXIT

# 127.0.0.1:0 for every listener: the real addresses come from the ready
# lines, so no port can be raced for. LAKEGATE_NODES=3: a three-node cluster.
start_lakegate "$lakegate"

rc=0
java -Dorg.slf4j.simpleLogger.defaultLogLevel=warn -Dorg.slf4j.simpleLogger.logFile="$tmp/client.log" \
  -cp "$cp" lakegate.interop.Main "$lg_pulsar_url" "$lg_http_url" ${JAVA_SCENARIOS:+"$JAVA_SCENARIOS"} || rc=$?

lg_rc=0
stop_lakegate || lg_rc=$?
if [[ $rc -ne 0 ]]; then
  say "client log (WARN and above), last lines:"
  tail -n 40 "$tmp/client.log" >&2 || true
  say "lakegate logs, WARN/ERROR lines:"
  grep -hE 'level=(WARN|ERROR)' "${lg_logs[@]}" | tail -n 40 >&2 || true
fi
[[ $lg_rc -eq 0 ]] || { say "lakegate did not stop cleanly after SIGTERM (status $lg_rc)"; exit 1; }
exit "$rc"
