package tcpproxy

import (
	"io"
	"net"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// echo starts a loopback echo server and returns its address.
func echo(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	conns := make(chan net.Conn, 16)
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns <- c
			go func() { _, _ = io.Copy(c, c); c.Close() }()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-done
		close(conns)
		for c := range conns {
			c.Close()
		}
	})
	return ln.Addr().String()
}

func roundTrip(c net.Conn, msg string, wait time.Duration) (string, error) {
	if _, err := c.Write([]byte(msg)); err != nil {
		return "", err
	}
	_ = c.SetReadDeadline(time.Now().Add(wait))
	buf := make([]byte, len(msg))
	_, err := io.ReadFull(c, buf)
	return string(buf), err
}

func TestPauseHoldsAndResumeDelivers(t *testing.T) {
	p, err := Start(echo(t))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if got, err := roundTrip(c, "hello", 2*time.Second); err != nil || got != "hello" {
		t.Fatalf("forwarding: %q %v", got, err)
	}
	p.Pause()
	if _, err := roundTrip(c, "held", 200*time.Millisecond); err == nil {
		t.Fatal("bytes went through a paused proxy")
	}
	// A new connection is accepted while paused but not forwarded.
	c2, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	if _, err := roundTrip(c2, "new", 200*time.Millisecond); err == nil {
		t.Fatal("a new connection was forwarded while paused")
	}
	p.Resume()
	_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
	buf := make([]byte, 4)
	if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "held" {
		t.Fatalf("held bytes after resume: %q %v", buf, err)
	}
	_ = c2.SetReadDeadline(time.Now().Add(2 * time.Second))
	buf = make([]byte, 3)
	if _, err := io.ReadFull(c2, buf); err != nil || string(buf) != "new" {
		t.Fatalf("new connection after resume: %q %v", buf, err)
	}
}

func TestHangExistingLeavesNewConnectionsWorking(t *testing.T) {
	p, err := Start(echo(t))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	old, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	if _, err := roundTrip(old, "a", 2*time.Second); err != nil {
		t.Fatal(err)
	}
	p.HangExisting()
	if _, err := roundTrip(old, "b", 200*time.Millisecond); err == nil {
		t.Fatal("a hung connection still forwards")
	}
	fresh, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer fresh.Close()
	if got, err := roundTrip(fresh, "c", 2*time.Second); err != nil || got != "c" {
		t.Fatalf("new connection: %q %v", got, err)
	}
}
