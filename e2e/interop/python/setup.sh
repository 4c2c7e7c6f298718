#!/usr/bin/env bash
# Creates <repo>/.cache/venv-pulsar with the pinned Pulsar Python client
# (pulsar-client, fastavro for AvroSchema) from requirements.txt. Idempotent:
# a venv whose recorded requirements hash matches is left as is. Prints the
# venv's python path last: PY=$(e2e/interop/python/setup.sh | tail -1)
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../../.." && pwd)"
venv="${LAKEGATE_PULSAR_VENV:-$repo/.cache/venv-pulsar}"
req="$here/requirements.txt"
python="${PYTHON:-python3}"

want="$(sha256sum "$req" | cut -d' ' -f1)"
stamp="$venv/.lakegate-pulsar-requirements"
if [[ -x "$venv/bin/python" && -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then
  echo "setup.sh: $venv is up to date" >&2
else
  if [[ ! -x "$venv/bin/python" ]]; then
    "$python" -m venv "$venv"
  fi
  # --only-binary: the client is a C++ extension; a source build would need
  # the Pulsar C++ SDK, so fail clearly if no wheel fits this Python.
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --only-binary pulsar-client -r "$req"
  "$venv/bin/python" -c 'import pulsar, fastavro; from pulsar.schema import AvroSchema, JsonSchema'
  echo "$want" > "$stamp"
fi
echo "$venv/bin/python"
