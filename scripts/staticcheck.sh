#!/bin/sh
# Runs staticcheck, pinned, over the module and the bench module. CI runs it
# (.ci/run) before `make test`; `make lint` runs it by hand. The pinned version
# is installed into $(go env GOPATH)/bin once (about 45 s on 2 cores); after
# that this only checks (a warm run takes well under a minute, a cold one a
# few minutes while it builds its cache).
#
# A finding that is intended (a test that needs a real nil-map panic) carries a
# //lint:ignore directive with its reason next to it; nothing is silenced
# globally.
set -eu
VERSION=v0.8.2
BINDIR="$(go env GOPATH | cut -d: -f1)/bin"
BIN="$BINDIR/staticcheck"
STAMP="$BINDIR/.staticcheck-version"
if [ ! -x "$BIN" ] || [ ! -f "$STAMP" ] || [ "$(cat "$STAMP")" != "$VERSION" ]; then
	echo "installing staticcheck $VERSION into $BINDIR"
	GOFLAGS=-mod=mod go install "honnef.co/go/tools/cmd/staticcheck@$VERSION"
	echo "$VERSION" >"$STAMP"
fi
cd "$(dirname "$0")/.."
"$BIN" ./...
(cd bench && "$BIN" ./...)
echo "staticcheck $VERSION: no findings"
