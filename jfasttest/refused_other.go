//go:build !unix

package jfasttest

import (
	"net"
	"testing"
)

// RefusedAddr returns "127.0.0.1:PORT", a loopback address where nothing
// listens, so a connection is refused: a dependency that is down. Unlike the
// unix version it does not hold the port: the port is taken and its listener
// closed at once, so a server started elsewhere on 127.0.0.1:0 may get it
// before the test ends.
func RefusedAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("jfasttest: refused address: %v", err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	return addr
}
