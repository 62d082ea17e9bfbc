#!/bin/sh
# Regenerates the Go code of every .proto under examples/ (today
# examples/inventory/shoppb/inventory.proto) next to it, with the pinned tools
# scripts/install-protoc.sh installs: Debian's protoc, protoc-gen-go v1.36.12
# and protoc-gen-go-grpc v1.6.2. It refuses other versions, whose output
# differs and would make the staleness test (examples/inventory/shoppb)
# fail.
#
# With JFAST_PROTO_OUT=DIR it writes into DIR instead, keeping the paths
# (the staleness test compares DIR with the committed files).
set -eu
cd "$(dirname "$0")/.."
BINDIR="$(go env GOPATH | cut -d: -f1)/bin"
PATH="$BINDIR:$PATH"
want_go="protoc-gen-go v1.36.12"
want_grpc="protoc-gen-go-grpc 1.6.2"
for tool in protoc protoc-gen-go protoc-gen-go-grpc; do
	command -v "$tool" >/dev/null 2>&1 || { echo "gen-proto.sh: $tool is missing: run scripts/install-protoc.sh" >&2; exit 1; }
done
[ "$(protoc-gen-go --version)" = "$want_go" ] || { echo "gen-proto.sh: $(protoc-gen-go --version) found, $want_go wanted: run scripts/install-protoc.sh" >&2; exit 1; }
[ "$(protoc-gen-go-grpc --version)" = "$want_grpc" ] || { echo "gen-proto.sh: $(protoc-gen-go-grpc --version) found, $want_grpc wanted: run scripts/install-protoc.sh" >&2; exit 1; }
OUT="${JFAST_PROTO_OUT:-.}"
find examples -name '*.proto' | sort | while read -r proto; do
	dir=$(dirname "$proto")
	mkdir -p "$OUT/$dir"
	protoc -I "$dir" \
		--go_out="$OUT/$dir" --go_opt=paths=source_relative \
		--go-grpc_out="$OUT/$dir" --go-grpc_opt=paths=source_relative \
		"$proto"
	echo "generated $OUT/$dir from $proto"
done
