#!/usr/bin/env bash
# Runs the pyiceberg interop check: makes the venv (setup.sh), then the Go
# test that compacts a log into Delta and Iceberg tables on file:// (sqlite
# catalog) and has pyiceberg load the table through SqlCatalog and compare
# the row count and payload checksum. Exits non-zero on any difference.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../../.." && pwd)"
py="$("$here/setup.sh" | tail -1)"
cd "$repo"
. "$repo/e2e/interop/gotest.sh"
LAKEGATE_PYICEBERG="$py" go_test_pass ./tables/ TestCompactToTablePyIceberg TestCompactToTableNested -- -p 1 -count=1
# Table retention (by time and size, held by a subscription), read by pyiceberg after each step.
LAKEGATE_PYICEBERG="$py" go_test_pass ./tables/ TestTableRetention -- -p 1 -count=1
