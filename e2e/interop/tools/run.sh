#!/usr/bin/env bash
# Runs Apache Pulsar's own command-line tools — pulsar-admin and
# pulsar-client, from the pulsar-client-tools jars of Maven Central (setup.sh;
# the same version as the Java client of ../java) — against a fresh lakegate
# (standalone, or LAKEGATE_NODES=3 for a three-node cluster: ../nodes.sh) on
# free loopback ports in a temporary directory: tenants, namespaces, their
# policies, topics, subscriptions, topic policies, schemas, produce and
# consume, a non-persistent topic, the errors of refused commands, and an
# operator's runbook on a tenant of its own (steps "runbook …": backlog,
# cursors, internal stats, brokers; STEPS='^runbook' runs it alone); each
# command's exit code and output are checked (tools.py). Prints one line per
# command and `tools: N/M commands passed`; exits non-zero if a command
# failed or lakegate did not start or stop cleanly. About 2–4 minutes (one
# JVM per command, starting from a class-data archive the first one writes).
#
# Environment: STEPS=regex (run only the matching steps), KEEP=1 (keep the
# temporary directory), LAKEGATE_BIN (use this lakegate binary instead of
# building one), LAKEGATE_NODES=3.
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

tmp="$(mktemp -d "${TMPDIR:-/tmp}/lakegate-tools.XXXXXX")"
say() { echo "tools interop: $*" >&2; }
# shellcheck source=../nodes.sh
source "$here/../nodes.sh"
cleanup() {
  stop_lakegate >/dev/null 2>&1 || true
  if [[ ${KEEP:-0} == 1 ]]; then say "kept $tmp"; else rm -rf "$tmp"; fi
}
trap cleanup EXIT

# Policies are checked every second, so that the backlog-quota step sees
# its eviction within a few seconds.
start_lakegate "$lakegate" --policies-check-interval 1s
cat >"$tmp/client.conf" <<CONF
webServiceUrl=$lg_http_url
brokerServiceUrl=$lg_pulsar_url
CONF

rc=0
PULSAR_TOOLS_CP="$cp" PULSAR_CLIENT_CONF="$tmp/client.conf" PULSAR_TOOLS_CDS="$tmp/tools.jsa" \
  python3 "$here/tools.py" || rc=$?

lg_rc=0
stop_lakegate || lg_rc=$?
if [[ $rc -ne 0 ]]; then
  say "lakegate logs, WARN/ERROR lines:"
  grep -hE 'level=(WARN|ERROR)' "${lg_logs[@]}" | tail -n 40 >&2 || true
fi
[[ $lg_rc -eq 0 ]] || { say "lakegate did not stop cleanly after SIGTERM (status $lg_rc)"; exit 1; }
exit "$rc"
