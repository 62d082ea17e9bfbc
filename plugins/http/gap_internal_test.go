package http

import (
	"errors"
	"net"
	"os"
	"testing"
)

// The read deadline an attempt leaves on its connection is not cleared when
// the attempt ends: a read that hits it with no attempt on the connection
// (the transport's reader, parked on an idle pooled connection) clears it
// and goes on waiting; one that hits it while an attempt is on the
// connection fails. A 1 ns gap makes every deadline pass at once.
func TestGapDeadlineLeftByAnAttempt(t *testing.T) {
	t.Parallel()
	client, server := net.Pipe()
	t.Cleanup(func() { _ = client.Close(); _ = server.Close() })
	g := newGapConn(client, 1, 1<<40)

	g.arm(nil, 0)
	g.disarm(nil) // the deadline stays, and has passed
	got := make(chan error, 1)
	go func() {
		b := make([]byte, 1)
		n, err := g.Read(b)
		if err == nil && (n != 1 || b[0] != 'x') {
			err = errors.New("read something else than the byte written")
		}
		got <- err
	}()
	go func() { _, _ = server.Write([]byte("x")) }() // until the read takes it, or the pipe closes
	if err := <-got; err != nil {
		t.Fatalf("an idle connection's read past the deadline its last attempt left: %v, want it to wait for the byte", err)
	}

	g.arm(nil, 0)
	_, err := g.Read(make([]byte, 1))
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("a read past an armed attempt's deadline: %v, want the deadline error", err)
	}
	g.disarm(nil)
}
