#!/bin/sh
# Cross-checks lakegate's frame codec against pulsar-client-go v0.19.0's own
# encoder and decoder (which are internal to that module, so the harness runs
# inside a scratch copy of it). Needs the module and its dependencies in the
# Go module cache. Not part of `go test`; run by hand when the codec changes:
#
#   protocol/testdata/crosscheck.sh            # decode server_frames.txt with the client
#   protocol/testdata/crosscheck.sh -capture   # also rewrite client_frames.txt
set -eu
here=$(cd "$(dirname "$0")" && pwd)
src=$(go env GOMODCACHE)/github.com/apache/pulsar-client-go@v0.19.0
tmp=$(mktemp -d)
trap 'chmod -R u+w "$tmp"; rm -rf "$tmp"' EXIT
cp -r "$src" "$tmp/pcg"
chmod -R u+w "$tmp/pcg"
cp "$here/crosscheck/capture_test.go.txt" "$tmp/pcg/pulsar/internal/zz_lakegate_test.go"
cd "$tmp/pcg"
if [ "${1:-}" = "-capture" ]; then
	LAKEGATE_CAPTURE="$here/client_frames.txt" GOFLAGS=-mod=mod go test -count=1 -run TestLakegateCapture ./pulsar/internal/
fi
LAKEGATE_SERVER_FRAMES="$here/server_frames.txt" GOFLAGS=-mod=mod go test -count=1 -v -run TestLakegateDecode ./pulsar/internal/
