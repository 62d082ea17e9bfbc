//go:build unix

package jfasttest_test

import (
	"errors"
	"net"
	"syscall"
	"testing"

	"github.com/jfastframework/jfast/jfasttest"
)

// A refused address refuses, and no server can take its port while the test
// runs: neither by naming it nor by asking for any port.
func TestRefusedAddrRefusesAndKeepsItsPort(t *testing.T) {
	addr := jfasttest.RefusedAddr(t)
	for range 3 {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
			t.Fatalf("dial %s succeeded, want connection refused", addr)
		}
		if !errors.Is(err, syscall.ECONNREFUSED) {
			t.Fatalf("dial %s = %v, want connection refused", addr, err)
		}
	}
	if ln, err := net.Listen("tcp", addr); err == nil {
		ln.Close()
		t.Fatalf("listen on %s succeeded while the refused address holds it", addr)
	}
	// Servers on port 0 never get it: the kernel skips a bound port.
	for range 200 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		got := ln.Addr().String()
		ln.Close()
		if got == addr {
			t.Fatalf("a listener on 127.0.0.1:0 got %s, the refused address's port", got)
		}
	}
}
