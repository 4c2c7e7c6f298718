#!/usr/bin/env bash
# Creates <repo>/.cache/venv-pulsar with the pinned Pulsar Python client
# (pulsar-client, fastavro for AvroSchema) from requirements.txt. Idempotent:
# a venv whose recorded requirements hash matches is left as is. Prints the
# venv's python path last: PY=$(e2e/interop/python/setup.sh | tail -1)
set -euo pipefail
# shellcheck source=../venv.sh
source "$(dirname "${BASH_SOURCE[0]}")/../venv.sh"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../../.." && pwd)"
venv="${LAKEGATE_PULSAR_VENV:-$repo/.cache/venv-pulsar}"
req="$here/requirements.txt"

pinned_venv "$venv" "$req" pulsar 'import pulsar, fastavro; from pulsar.schema import AvroSchema, JsonSchema' --only-binary pulsar-client
echo "$venv/bin/python"
