#!/bin/sh
# Regenerates protocol/pb/pulsar_api.pb.go from protocol/pb/pulsar_api.proto.
#
# Pinned tools: the system protoc (Debian, 3.21.x, /usr/bin/protoc) and
# protoc-gen-go at the same version as google.golang.org/protobuf in go.mod,
# installed into .cache/bin of the repository. Running it twice yields the same
# file (idempotent); `git diff --exit-code protocol/pb` after it detects drift.
set -eu

PROTOC_GEN_GO_VERSION=v1.36.12

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

bin="$root/.cache/bin"
plugin="$bin/protoc-gen-go"
if [ ! -x "$plugin" ] || [ "$("$plugin" --version 2>/dev/null)" != "protoc-gen-go $PROTOC_GEN_GO_VERSION" ]; then
	GOBIN="$bin" go install "google.golang.org/protobuf/cmd/protoc-gen-go@$PROTOC_GEN_GO_VERSION"
fi

PROTOC=${PROTOC:-protoc}
case "$("$PROTOC" --version)" in
"libprotoc 3.21."*) ;;
*) echo "gen.sh: want protoc 3.21.x, have: $("$PROTOC" --version)" >&2; exit 1 ;;
esac

# proto_path is the repository root so the file registers as
# "protocol/pb/pulsar_api.proto", a name no other module uses.
"$PROTOC" \
	--plugin=protoc-gen-go="$plugin" \
	--proto_path=. \
	--go_out=. \
	--go_opt=paths=source_relative \
	protocol/pb/pulsar_api.proto
