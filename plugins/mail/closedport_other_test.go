//go:build !unix

package mail_test

import (
	"net"
	"testing"
)

// closedPort returns a loopback port nothing listens on (connection refused).
// Unlike the unix version it does not hold the port: a server started
// elsewhere on 127.0.0.1:0 may get it before the test ends.
func closedPort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	return port
}
