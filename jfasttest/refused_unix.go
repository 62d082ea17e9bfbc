//go:build unix

package jfasttest

import (
	"net"
	"strconv"
	"syscall"
	"testing"
)

// RefusedAddr returns "127.0.0.1:PORT", a loopback address where a
// connection is refused at once until the test ends: a dependency that is
// down (its process gone, its host up).
//
// A socket is bound to the port and never listens, so a connection is
// refused, and no server can have the port meanwhile: neither one that asks
// for port 0 nor one that names it (bind fails: the socket does not set
// SO_REUSEADDR). The usual way, taking a port and closing its listener at
// once, frees the port for the next server anyone starts on 127.0.0.1:0;
// with many tests running in parallel one can get it, and a server that
// accepts and never answers (a [SilentServer]) turns a refusal into a wait
// for the client's connect or read timeout. The socket closes when the test
// ends.
func RefusedAddr(t testing.TB) string {
	t.Helper()
	// As package net does: no child process started meanwhile inherits
	// the socket.
	syscall.ForkLock.RLock()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err == nil {
		syscall.CloseOnExec(fd)
	}
	syscall.ForkLock.RUnlock()
	if err != nil {
		t.Fatalf("jfasttest: refused address: socket: %v", err)
	}
	t.Cleanup(func() { _ = syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatalf("jfasttest: refused address: bind 127.0.0.1:0: %v", err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatalf("jfasttest: refused address: getsockname: %v", err)
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(sa.(*syscall.SockaddrInet4).Port))
}
