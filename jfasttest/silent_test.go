package jfasttest

import (
	"errors"
	"net"
	"testing"
	"time"
)

func TestSilentServerAcceptsAndNeverAnswers(t *testing.T) {
	addr := SilentServer(t)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(100 * time.Millisecond))
	if _, err := c.Write([]byte("EHLO x\r\n")); err != nil {
		t.Fatal(err)
	}
	var ne net.Error
	if _, err := c.Read(make([]byte, 1)); !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("read from a silent server: want a timeout, got %v", err)
	}
}
