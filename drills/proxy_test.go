package drills

import (
	"bufio"
	"errors"
	"io"
	"net"
	"os"
	"syscall"
	"testing"
	"time"
)

// echoServer answers every line with the same line.
func echoServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				io.Copy(c, c)
			}()
		}
	}()
	t.Cleanup(func() { ln.Close(); <-done })
	return ln.Addr().String()
}

func setupProxy(t *testing.T) *Proxy {
	t.Helper()
	p, err := StartProxy(echoServer(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// roundTrip sends a line and waits up to wait for it to come back.
func roundTrip(c net.Conn, wait time.Duration) error {
	c.SetDeadline(time.Now().Add(wait))
	if _, err := c.Write([]byte("ping\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	if line != "ping\n" {
		return errors.New("wrong echo: " + line)
	}
	return nil
}

func TestProxyPassBlackholeAndBack(t *testing.T) {
	t.Parallel()
	p := setupProxy(t)
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := roundTrip(c, 2*time.Second); err != nil {
		t.Fatalf("pass: %v", err)
	}
	p.Blackhole()
	// The existing connection stays open and answers nothing.
	var ne net.Error
	if err := roundTrip(c, 200*time.Millisecond); !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("blackhole, existing connection: want a timeout, got %v", err)
	}
	// A new connection is accepted and answers nothing.
	c2, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatalf("blackhole must accept connections: %v", err)
	}
	defer c2.Close()
	if err := roundTrip(c2, 200*time.Millisecond); !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("blackhole, new connection: want a timeout, got %v", err)
	}
	p.Pass()
	c3, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c3.Close()
	if err := roundTrip(c3, 2*time.Second); err != nil {
		t.Fatalf("pass after blackhole: %v", err)
	}
}

func TestProxyRefuseThenListenAgainOnTheSameAddress(t *testing.T) {
	t.Parallel()
	p := setupProxy(t)
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := roundTrip(c, 2*time.Second); err != nil {
		t.Fatal(err)
	}
	p.Refuse()
	if err := roundTrip(c, 2*time.Second); err == nil {
		t.Fatal("an existing connection survived Refuse")
	}
	if _, err := net.DialTimeout("tcp", p.Addr(), time.Second); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("refuse: want connection refused, got %v", err)
	}
	if err := p.Pass(); err != nil {
		t.Fatal(err)
	}
	c2, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	if err := roundTrip(c2, 2*time.Second); err != nil {
		t.Fatalf("pass after refuse: %v", err)
	}
}

func TestProxyLatency(t *testing.T) {
	t.Parallel()
	p := setupProxy(t)
	p.Latency(150 * time.Millisecond)
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	start := time.Now()
	if err := roundTrip(c, 3*time.Second); err != nil {
		t.Fatal(err)
	}
	// Each direction waits once: at least 300 ms for the round trip.
	if took := time.Since(start); took < 300*time.Millisecond {
		t.Fatalf("round trip took %v, want ≥ 300ms", took)
	}
}

func TestProxyReset(t *testing.T) {
	t.Parallel()
	p := setupProxy(t)
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := roundTrip(c, 2*time.Second); err != nil {
		t.Fatal(err)
	}
	p.Reset()
	if err := roundTrip(c, 2*time.Second); !errors.Is(err, syscall.ECONNRESET) && !errors.Is(err, io.EOF) && !errors.Is(err, syscall.EPIPE) {
		t.Fatalf("existing connection after Reset: %v", err)
	}
	c2, err := net.Dial("tcp", p.Addr())
	if err == nil {
		defer c2.Close()
		err = roundTrip(c2, 2*time.Second)
	}
	if err == nil {
		t.Fatal("a new connection worked while resetting")
	}
	if os.Getenv("JFAST_DEBUG") != "" {
		t.Log(err)
	}
}

// readN reads exactly n bytes within wait.
func readN(c net.Conn, n int, wait time.Duration) (string, error) {
	c.SetReadDeadline(time.Now().Add(wait))
	buf := make([]byte, n)
	_, err := io.ReadFull(c, buf)
	return string(buf), err
}

func TestProxyHoldKeepsBytesAndPassDeliversThem(t *testing.T) {
	t.Parallel()
	p := setupProxy(t)
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := roundTrip(c, 2*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := p.Hold(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write([]byte("held\n")); err != nil {
		t.Fatal(err)
	}
	var ne net.Error
	if _, err := readN(c, 5, 200*time.Millisecond); !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("hold, existing connection: want a timeout, got %v", err)
	}
	// A new connection is accepted while holding but not connected.
	c2, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	if _, err := c2.Write([]byte("new\n")); err != nil {
		t.Fatal(err)
	}
	if _, err := readN(c2, 4, 200*time.Millisecond); !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("hold, new connection: want a timeout, got %v", err)
	}
	if err := p.Pass(); err != nil {
		t.Fatal(err)
	}
	if got, err := readN(c, 5, 2*time.Second); err != nil || got != "held\n" {
		t.Fatalf("held bytes after Pass: %q %v", got, err)
	}
	if got, err := readN(c2, 4, 2*time.Second); err != nil || got != "new\n" {
		t.Fatalf("connection accepted while holding, after Pass: %q %v", got, err)
	}
}

func TestProxyHangExistingLeavesNewConnectionsWorking(t *testing.T) {
	t.Parallel()
	p := setupProxy(t)
	old, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	if err := roundTrip(old, 2*time.Second); err != nil {
		t.Fatal(err)
	}
	p.HangExisting()
	if err := roundTrip(old, 200*time.Millisecond); err == nil {
		t.Fatal("a hung connection still forwards")
	}
	fresh, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer fresh.Close()
	if err := roundTrip(fresh, 2*time.Second); err != nil {
		t.Fatalf("new connection after HangExisting: %v", err)
	}
}

func TestProxyCloseWhileHolding(t *testing.T) {
	t.Parallel()
	p, err := StartProxy(echoServer(t))
	if err != nil {
		t.Fatal(err)
	}
	p.Hold()
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Write([]byte("x\n"))
	done := make(chan struct{})
	go func() { p.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Close hung on a held connection")
	}
}
