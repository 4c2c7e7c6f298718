#!/usr/bin/env bash
# Runs the delta-rs interop check: makes the venv (setup.sh), then the Go test
# that writes a lakegate Delta table and reads it back with delta-rs.
# Exits non-zero if delta-rs cannot read the table or counts differ.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../../.." && pwd)"
py="$("$here/setup.sh" | tail -1)"
cd "$repo"
LAKEGATE_PYTHON="$py" go test -p 1 -count=1 -run 'TestDeltaRS' -v ./lakehouse/delta/
# The engine's compaction into a Delta table (WAL → Parquet → _delta_log), read by delta-rs.
LAKEGATE_PYTHON="$py" go test -p 1 -count=1 -run 'TestCompactToTableDeltaRS' -v ./engine/
