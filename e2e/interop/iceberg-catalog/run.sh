#!/usr/bin/env bash
# pyiceberg and iceberg-go against lakegate's own Iceberg REST catalog on a
# three-node cluster (one etcd, three `lakegate serve`): resolves
# pyiceberg's venv (e2e/interop/iceberg/setup.sh) and runs the Go test
# that starts the cluster, produces to a partitioned topic, waits for its
# tables, and has pyiceberg read the topic table through every node's REST
# endpoint and two pyiceberg processes (through two nodes) append to one
# user table at once, then iceberg-go (two REST clients, two nodes) do the
# same. Exits non-zero on any difference, or if the test skipped.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../../.." && pwd)"
py="$("$repo/e2e/interop/iceberg/setup.sh" | tail -1)"
cd "$repo"
. "$repo/e2e/interop/gotest.sh"
LAKEGATE_PYICEBERG="$py" go_test_pass ./e2e/ TestClusterIcebergCatalogInterop -- -count=1 -timeout 10m
