#!/usr/bin/env bash
# Runs the Pulsar Python client (pulsar-client 3.13.0) scenarios against a
# fresh `lakegate standalone`: makes the venv (setup.sh), builds lakegate and
# the Go cross-language tool into .cache/bin, starts the node on free ports
# (127.0.0.1:0; the real addresses come from its ready line) in a temporary
# data directory, waits for /readyz, runs scenarios.py, stops the node.
# Prints one line per scenario and `python: N/M scenarios passed`; exits
# non-zero if a scenario fails or the node does not start.
#
# Environment: SCENARIOS=a,b (run only these), LAKEGATE_NODES=3 (against a
# three-node cluster: one etcd, three `lakegate serve`; ../nodes.sh), KEEP=1 (keep the temporary
# directory with the node's data and log), LAKEGATE_BIN (use this lakegate
# binary instead of building one), LAKEGATE_CROSSLANG_JAVA=0 (leave out the
# Java cross-language tool, which needs Maven and a JDK).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../../.." && pwd)"
cd "$repo"
say() { echo "python-interop: $*" >&2; }

py="$("$here/setup.sh" | tail -1)"
mkdir -p .cache/bin
lakegate="${LAKEGATE_BIN:-}"
if [[ -z $lakegate ]]; then
  go build -o .cache/bin/lakegate ./cmd/lakegate
  lakegate=.cache/bin/lakegate
fi
go build -o .cache/bin/crosslang ./e2e/interop/crosslang

# The Java side of the cross-language check: CrossLang.java compiled against
# the pinned Java client that e2e/interop/java/setup.sh resolves (Maven,
# .cache/m2). LAKEGATE_CROSSLANG_JAVA=0 leaves Java out (its scenarios are
# then not run, and the summary says so).
java_tool=
if [[ ${LAKEGATE_CROSSLANG_JAVA:-1} != 0 ]]; then
  java_cp="$("$repo/e2e/interop/java/setup.sh" | tail -1)"
  src="$repo/e2e/interop/crosslang/java/lakegate/crosslang/CrossLang.java"
  out="$repo/.cache/crosslang-java"
  want="$( (sha256sum "$src"; echo "$java_cp") | sha256sum | cut -d' ' -f1)"
  if [[ ! -f "$out/.stamp" || "$(cat "$out/.stamp")" != "$want" ]]; then
    rm -rf "$out" && mkdir -p "$out"
    javac -d "$out" -cp "$java_cp" "$src"
    echo "$want" > "$out/.stamp"
  fi
  java_tool="java -Dorg.slf4j.simpleLogger.defaultLogLevel=warn -cp $out:$java_cp lakegate.crosslang.CrossLang"
else
  say "LAKEGATE_CROSSLANG_JAVA=0: Java<->Python/Go cross-language scenarios left out"
fi

tmp="$(mktemp -d "${TMPDIR:-/tmp}/lakegate-pyinterop.XXXXXX")"
# shellcheck source=../nodes.sh
source "$here/../nodes.sh"
cleanup() {
  stop_lakegate >/dev/null 2>&1 || true
  if [[ ${KEEP:-0} == 1 ]]; then say "kept $tmp"; else rm -rf "$tmp"; fi
}
trap cleanup EXIT

start_lakegate "$lakegate"

rc=0
LAKEGATE_PULSAR_URL="$lg_pulsar_url" LAKEGATE_HTTP_URL="$lg_http_url" LAKEGATE_CROSSLANG="$repo/.cache/bin/crosslang" \
  LAKEGATE_CROSSLANG_JAVA="$java_tool" "$py" "$here/scenarios.py" || rc=$?
if ! stop_lakegate; then
  say "lakegate did not shut down cleanly"
  rc=1
fi
if [[ $rc != 0 ]]; then
  say "failed; last lakegate log lines:"
  tail -n 40 "${lg_logs[@]}" >&2
fi
exit $rc
