#!/usr/bin/env bash
# Creates <repo>/.cache/venv-iceberg with the pinned pyiceberg (SqlCatalog on
# sqlite, pyarrow scans) from requirements.txt. Idempotent: a venv whose
# recorded requirements hash matches is left as is. Prints the venv's python
# path last, so callers can do:
#   LAKEGATE_PYICEBERG=$(e2e/interop/iceberg/setup.sh | tail -1)
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../../.." && pwd)"
venv="${LAKEGATE_ICEBERG_VENV:-$repo/.cache/venv-iceberg}"
req="$here/requirements.txt"
python="${PYTHON:-python3}"

want="$(sha256sum "$req" | cut -d' ' -f1)"
stamp="$venv/.lakegate-iceberg-requirements"
if [[ -x "$venv/bin/python" && -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then
  echo "setup.sh: $venv is up to date" >&2
else
  if [[ ! -x "$venv/bin/python" ]]; then
    "$python" -m venv "$venv"
  fi
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r "$req"
  "$venv/bin/python" -c 'import pyiceberg.catalog.sql, pyarrow, sqlalchemy'
  echo "$want" > "$stamp"
fi
echo "$venv/bin/python"
