#!/bin/sh
# Installs versitygw, the S3-compatible server the plugins/storage tests start on a free port.
# Idempotent: does nothing when the pinned version is already in $(go env GOPATH)/bin.
set -eu
VERSION=v1.8.0
BIN="$(go env GOPATH)/bin/versitygw"
STAMP="$(go env GOPATH)/bin/.versitygw-version"
if [ -x "$BIN" ] && [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$VERSION" ]; then
	echo "versitygw $VERSION already installed at $BIN"
	exit 0
fi
echo "installing versitygw $VERSION into $(go env GOPATH)/bin (about 70 s on 2 cores)"
GOFLAGS=-mod=mod go install "github.com/versity/versitygw/cmd/versitygw@$VERSION"
echo "$VERSION" >"$STAMP"
echo "versitygw $VERSION installed at $BIN"
