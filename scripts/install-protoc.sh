#!/bin/sh
# Installs the tools that regenerate examples/inventory's gRPC code
# (scripts/gen-proto.sh) and that its staleness test runs: Debian's
# protobuf-compiler (protoc 3.21.12 on Debian 12), protoc-gen-go and
# protoc-gen-go-grpc at the versions pinned below, into $(go env GOPATH)/bin.
# Idempotent: does nothing when protoc is on the PATH and both plugins carry a
# stamp of their pinned version. It waits up to 120 s for another apt or dpkg
# process (scripts/apt.sh). The staleness test skips, naming this script, when
# the tools are missing, so a failure here does not fail `make test`: it prints
# a SKIP line naming what is missing and why.
set -eu
. "$(dirname "$0")/apt.sh"
skip() { # why
	echo "SKIP protoc and its Go plugins ($1; examples/inventory/shoppb's TestGeneratedCodeIsFresh skips)"
	exit 0
}
PROTOC_GEN_GO=v1.36.12      # google.golang.org/protobuf, the version go.mod requires
PROTOC_GEN_GO_GRPC=v1.6.2   # google.golang.org/grpc/cmd/protoc-gen-go-grpc, a module of its own
BINDIR="$(go env GOPATH | cut -d: -f1)/bin"

if ! command -v protoc >/dev/null 2>&1; then
	[ "$(id -u)" = 0 ] || skip "apt-get install protobuf-compiler needs root"
	apt_install protobuf-compiler ||
		skip "install-protoc.sh: apt-get install protobuf-compiler failed, see above"
fi
echo "protoc: $(protoc --version)"

install() { # name module version
	stamp="$BINDIR/.$1-version"
	if [ -x "$BINDIR/$1" ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$3" ]; then
		echo "$1 $3 already installed at $BINDIR/$1"
		return
	fi
	GOFLAGS=-mod=mod go install "$2@$3" || skip "install-protoc.sh: go install $2@$3 failed, see above"
	echo "$3" >"$stamp"
	echo "$1 $3 installed at $BINDIR/$1"
}
install protoc-gen-go google.golang.org/protobuf/cmd/protoc-gen-go "$PROTOC_GEN_GO"
install protoc-gen-go-grpc google.golang.org/grpc/cmd/protoc-gen-go-grpc "$PROTOC_GEN_GO_GRPC"
