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
// runs (a listener naming it fails; the kernel's port-0 choice skips a bound
// port for the same reason).
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
}
