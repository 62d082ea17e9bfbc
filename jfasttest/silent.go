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
	accepted := new(atomic.Int32)
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
	return ln.Addr().String(), accepted
}
