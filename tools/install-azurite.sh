#!/usr/bin/env bash
# Installs Azurite, the Azure Storage emulator that the Azure tests start
# (internal/testservers/azurite.go), into tools/azurite/node_modules from the
# pinned tools/azurite/package-lock.json (azurite 3.35.0: the last release
# that runs on Node 20). Needs node and npm on $PATH.
#
# Idempotent: does nothing when node_modules holds what the lock file pins
# (npm's own copy of the lock, node_modules/.package-lock.json, is newer than
# package-lock.json and the azurite-blob entry point exists). About 25 s the
# first time.
#
# Usage: tools/install-azurite.sh [-f]     -f reinstalls even if up to date
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dir="$root/tools/azurite"
force=0
if [[ "${1:-}" == "-f" ]]; then force=1; fi

for tool in node npm; do
	if ! command -v "$tool" >/dev/null; then
		echo "install-azurite: $tool not found on \$PATH (Node 20 or newer is needed)" >&2
		exit 1
	fi
done

installed="$dir/node_modules/.package-lock.json"
entry="$dir/node_modules/.bin/azurite-blob"
if [[ $force -eq 0 && -e "$entry" && -f "$installed" && "$installed" -nt "$dir/package-lock.json" ]]; then
	echo "install-azurite: $dir/node_modules is up to date"
	exit 0
fi

echo "install-azurite: npm ci in $dir"
start=$(date +%s)
# npm ci removes node_modules first, so an interrupted install is redone on
# the next run (its .package-lock.json is written last).
(cd "$dir" && npm ci --no-audit --no-fund --loglevel=error)
echo "install-azurite: done in $(( $(date +%s) - start ))s: azurite-blob $(node "$entry" --version)"
