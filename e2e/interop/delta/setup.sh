#!/usr/bin/env bash
# Creates <repo>/.cache/venv with the pinned delta-rs reader (deltalake) and
# pyarrow from requirements.txt. Idempotent: a venv whose recorded
# requirements hash matches is left as is. Prints the venv's python path last,
# so callers can do: LAKEGATE_PYTHON=$(e2e/interop/delta/setup.sh | tail -1)
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../../.." && pwd)"
venv="${LAKEGATE_DELTA_VENV:-$repo/.cache/venv}"
req="$here/requirements.txt"
python="${PYTHON:-python3}"

want="$(sha256sum "$req" | cut -d' ' -f1)"
stamp="$venv/.lakegate-delta-requirements"
if [[ -x "$venv/bin/python" && -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then
  echo "setup.sh: $venv is up to date" >&2
else
  if [[ ! -x "$venv/bin/python" ]]; then
    "$python" -m venv "$venv"
  fi
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r "$req"
  "$venv/bin/python" -c 'import deltalake, pyarrow' 
  echo "$want" > "$stamp"
fi
echo "$venv/bin/python"
