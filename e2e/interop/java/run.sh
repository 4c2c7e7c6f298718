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
#
# The runner may ask this script to kill a node with SIGKILL and restart it
# (txn-kill9-consume-transform-produce): see the node control below.
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
java_pid=
cleanup() {
  [[ -z $java_pid ]] || kill "$java_pid" 2>/dev/null || true
  stop_lakegate >/dev/null 2>&1 || true
  if [[ ${KEEP:-0} == 1 ]]; then say "kept $tmp"; else rm -rf "$tmp"; fi
}
trap cleanup EXIT

# 127.0.0.1:0 for every listener: the real addresses come from the ready
# lines, so no port can be raced for. LAKEGATE_NODES=3: a three-node cluster.
start_lakegate "$lakegate"

# Node control for the scenarios that kill a node (Nodes.java): the runner
# writes "kill9 I" or "restart I" into ctl.req and reads one answer line from
# ctl.rep. Both FIFOs stay open read-write here, so the runner's opens never
# block and a request is never lost; this shell serves the requests while
# the runner lives, so the nodes stay its children (stop_lakegate waits for
# them, restarted ones too).
mkfifo "$tmp/ctl.req" "$tmp/ctl.rep"
exec {ctl_req}<>"$tmp/ctl.req" {ctl_rep}<>"$tmp/ctl.rep"
rc=0
java -Dorg.slf4j.simpleLogger.defaultLogLevel=warn -Dorg.slf4j.simpleLogger.logFile="$tmp/client.log" \
  -Dlakegate.ctl.req="$tmp/ctl.req" -Dlakegate.ctl.rep="$tmp/ctl.rep" \
  -cp "$cp" lakegate.interop.Main "$lg_pulsar_url" "$lg_http_url" ${JAVA_SCENARIOS:+"$JAVA_SCENARIOS"} &
java_pid=$!
while kill -0 "$java_pid" 2>/dev/null; do
  # The timeout only lets the loop notice the runner's exit.
  read -r -t 1 -u "$ctl_req" cmd arg || continue
  case $cmd in
    kill9) if kill9_node "$arg"; then echo "ok node $arg killed" >&"$ctl_rep"; else echo "error kill9 $arg" >&"$ctl_rep"; fi ;;
    restart) if restart_node "$arg"; then echo "ok node $arg restarted" >&"$ctl_rep"; else echo "error restart $arg" >&"$ctl_rep"; fi ;;
    *) echo "error unknown request: $cmd $arg" >&"$ctl_rep" ;;
  esac
done
wait "$java_pid" || rc=$?
java_pid=

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
