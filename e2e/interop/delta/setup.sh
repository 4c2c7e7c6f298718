#!/usr/bin/env bash
# Creates <repo>/.cache/venv with the pinned delta-rs reader (deltalake) and
# pyarrow from requirements.txt. Idempotent: a venv whose recorded
# requirements hash matches is left as is. Prints the venv's python path last,
# so callers can do: LAKEGATE_PYTHON=$(e2e/interop/delta/setup.sh | tail -1)
set -euo pipefail
# shellcheck source=../venv.sh
source "$(dirname "${BASH_SOURCE[0]}")/../venv.sh"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../../.." && pwd)"
venv="${LAKEGATE_DELTA_VENV:-$repo/.cache/venv}"
req="$here/requirements.txt"

pinned_venv "$venv" "$req" delta 'import deltalake, pyarrow'
echo "$venv/bin/python"
