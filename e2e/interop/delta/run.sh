#!/usr/bin/env bash
# Runs the delta-rs interop check: makes the venv (setup.sh), then the Go test
# that writes a lakegate Delta table and reads it back with delta-rs.
# Exits non-zero if delta-rs cannot read the table or counts differ.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../../.." && pwd)"
py="$("$here/setup.sh" | tail -1)"
cd "$repo"
. "$repo/e2e/interop/gotest.sh"
LAKEGATE_PYTHON="$py" go_test_pass ./lakehouse/delta/ TestDeltaRSReadsOurTable -- -p 1 -count=1
# Compaction into a Delta table (WAL → Parquet → _delta_log), read by delta-rs.
LAKEGATE_PYTHON="$py" go_test_pass ./tables/ TestCompactToTableDeltaRS TestCompactToTableNested -- -p 1 -count=1
# Table retention (by time and size, held by a subscription), read by delta-rs after each step.
LAKEGATE_PYTHON="$py" go_test_pass ./tables/ TestTableRetention -- -p 1 -count=1
# A transaction across partitions: every Delta version holds all of its rows or none, read by delta-rs.
LAKEGATE_PYTHON="$py" go_test_pass ./tables/ TestJointDeltaRS -- -p 1 -count=1
