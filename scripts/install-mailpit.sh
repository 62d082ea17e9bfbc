#!/bin/sh
# Installs mailpit, the SMTP server the mail plugin's tests and the SMTP drill
# start on a free port (drills.StartSMTP). Idempotent: does nothing when the
# pinned version is already in $(go env GOPATH)/bin. Never run `mailpit version`:
# it tries to reach the internet.
set -eu
VERSION=v1.33.1
BIN="$(go env GOPATH)/bin/mailpit"
STAMP="$(go env GOPATH)/bin/.mailpit-version"
if [ -x "$BIN" ] && [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$VERSION" ]; then
	echo "mailpit $VERSION already installed at $BIN"
	exit 0
fi
echo "installing mailpit $VERSION into $(go env GOPATH)/bin (about 40 s on an idle 2-core machine; 9 min was measured while other builds ran)"
GOFLAGS=-mod=mod go install "github.com/axllent/mailpit@$VERSION"
echo "$VERSION" >"$STAMP"
echo "mailpit $VERSION installed at $BIN"
