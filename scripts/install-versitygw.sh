#!/bin/sh
# Installs versitygw, the S3-compatible server the plugins/storage tests start on
# a free loopback port (posix backend), into $(go env GOPATH)/bin.
# Idempotent: does nothing when the pinned version is already there. About 70 s
# on 2 cores the first time.
set -eu
VERSION=v1.8.0
BINDIR="$(go env GOPATH | cut -d: -f1)/bin"
BIN="$BINDIR/versitygw"
STAMP="$BINDIR/.versitygw-version"
if [ -x "$BIN" ] && [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$VERSION" ]; then
	echo "versitygw $VERSION already installed at $BIN"
	exit 0
fi
echo "installing versitygw $VERSION into $BINDIR"
GOBIN="$BINDIR" go install "github.com/versity/versitygw/cmd/versitygw@$VERSION"
echo "$VERSION" >"$STAMP"
echo "versitygw $VERSION installed at $BIN"
