#!/bin/sh
# Installs the tools that regenerate examples/inventory's gRPC code
# (scripts/gen-proto.sh) and that its staleness test runs: Debian's
# protobuf-compiler (protoc 3.21.12 on Debian 12), protoc-gen-go and
# protoc-gen-go-grpc at the versions pinned below, into $(go env GOPATH)/bin.
# Idempotent: does nothing when protoc is on the PATH and both plugins carry a
# stamp of their pinned version. The staleness test skips, naming this script,
# when the tools are missing.
set -eu
PROTOC_GEN_GO=v1.36.12      # google.golang.org/protobuf, the version go.mod requires
PROTOC_GEN_GO_GRPC=v1.6.2   # google.golang.org/grpc/cmd/protoc-gen-go-grpc, a module of its own
BINDIR="$(go env GOPATH | cut -d: -f1)/bin"

if ! command -v protoc >/dev/null 2>&1; then
	if [ "$(id -u)" != 0 ]; then
		echo "install-protoc.sh: protoc is missing and installing protobuf-compiler needs root" >&2
		exit 1
	fi
	export DEBIAN_FRONTEND=noninteractive
	if ! apt-cache policy protobuf-compiler 2>/dev/null | grep -q 'Candidate:.[0-9]'; then
		apt-get update -q || echo "install-protoc.sh: apt-get update failed" >&2
	fi
	apt-get install -y -q --no-install-recommends protobuf-compiler >/dev/null
fi
echo "protoc: $(protoc --version)"

install() { # name module version
	stamp="$BINDIR/.$1-version"
	if [ -x "$BINDIR/$1" ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$3" ]; then
		echo "$1 $3 already installed at $BINDIR/$1"
		return
	fi
	GOFLAGS=-mod=mod go install "$2@$3"
	echo "$3" >"$stamp"
	echo "$1 $3 installed at $BINDIR/$1"
}
install protoc-gen-go google.golang.org/protobuf/cmd/protoc-gen-go "$PROTOC_GEN_GO"
install protoc-gen-go-grpc google.golang.org/grpc/cmd/protoc-gen-go-grpc "$PROTOC_GEN_GO_GRPC"
