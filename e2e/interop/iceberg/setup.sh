#!/usr/bin/env bash
# Creates <repo>/.cache/venv-iceberg with the pinned pyiceberg (SqlCatalog on
# sqlite, pyarrow scans) from requirements.txt. Idempotent: a venv whose
# recorded requirements hash matches is left as is. Prints the venv's python
# path last, so callers can do:
#   LAKEGATE_PYICEBERG=$(e2e/interop/iceberg/setup.sh | tail -1)
set -euo pipefail
# shellcheck source=../venv.sh
source "$(dirname "${BASH_SOURCE[0]}")/../venv.sh"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../../.." && pwd)"
venv="${LAKEGATE_ICEBERG_VENV:-$repo/.cache/venv-iceberg}"
req="$here/requirements.txt"

pinned_venv "$venv" "$req" iceberg 'import pyiceberg.catalog.sql, pyarrow, sqlalchemy'
echo "$venv/bin/python"
