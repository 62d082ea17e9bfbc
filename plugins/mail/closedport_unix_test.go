//go:build unix

package mail_test

import (
	"syscall"
	"testing"
)

// closedPort returns a loopback port where connections are refused until the
// test ends. A socket is bound to the port and never listens: a connection
// is refused at once, and no server can have the port meanwhile, neither one
// that asks for port 0 nor one that names it (bind fails with "address
// already in use": the socket does not set SO_REUSEADDR).
//
// Taking a port and closing its listener, as this helper did, frees the port
// for the next server anyone on the machine starts on 127.0.0.1:0, and with
// the whole repository's tests running in parallel one can get it. A server
// that accepts and says nothing then makes each delivery attempt wait
// connect_timeout (10 s) for a greeting instead of being refused, and three
// attempts outlast the tests' 20 s wait for the dead letter.
func closedPort(t *testing.T) int {
	t.Helper()
	// As package net does: no child process started meanwhile (mailpit)
	// inherits the socket.
	syscall.ForkLock.RLock()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err == nil {
		syscall.CloseOnExec(fd)
	}
	syscall.ForkLock.RUnlock()
	if err != nil {
		t.Fatalf("closed port: socket: %v", err)
	}
	t.Cleanup(func() { _ = syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatalf("closed port: bind 127.0.0.1:0: %v", err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatalf("closed port: getsockname: %v", err)
	}
	return sa.(*syscall.SockaddrInet4).Port
}
