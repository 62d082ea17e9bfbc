package jfasttest

import (
	"net"
	"sync"
	"sync/atomic"
	"testing"
)

// SilentServer listens on a free loopback port, accepts every connection and
// never answers: a dependency that hangs (a paused process, a full accept
// queue's worth of nothing). It returns "127.0.0.1:PORT"; the listener and
// every connection close when the test ends.
func SilentServer(t testing.TB) string {
	t.Helper()
	addr, _ := CountingSilentServer(t)
	return addr
}

// CountingSilentServer is SilentServer that also counts the connections it
// accepted: a test shows that a call never reached the hung dependency.
func CountingSilentServer(t testing.TB) (string, *atomic.Int32) {
	t.Helper()
	addr, _, accepted := WatchedSilentServer(t)
	return addr, accepted
}

// WatchedSilentServer is CountingSilentServer that also signals each
// connection on arrived as it is accepted, so a test can wait for a client
// to be connected (the channel holds 100 signals; more are dropped).
func WatchedSilentServer(t testing.TB) (addr string, arrived <-chan struct{}, accepted *atomic.Int32) {
	t.Helper()
	accepted = new(atomic.Int32)
	signal := make(chan struct{}, 100)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			select {
			case signal <- struct{}{}:
			default:
			}
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		<-done
		mu.Lock()
		for _, c := range conns {
			_ = c.Close()
		}
		mu.Unlock()
	})
	return ln.Addr().String(), signal, accepted
}
