package storage

import (
	"context"
	"errors"
	"io"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jfastframework/jfast/framework/resilience"
)

// endedContext ended without a deadline or a cancellation: a custom context.
type endedContext struct{ context.Context }

func (endedContext) Err() error { return errors.New("stopped") }

func TestSilentCut(t *testing.T) {
	t.Parallel()
	bg := context.Background()
	cancelled, cancel := context.WithCancel(bg)
	cancel()
	cancelledBeforeDeadline, cancel := context.WithTimeout(bg, time.Hour)
	cancel()
	expired, cancel := context.WithDeadline(bg, time.Now().Add(-time.Second))
	defer cancel()
	const connect = 5 * time.Second
	for _, tc := range []struct {
		name    string
		ctx     context.Context
		silence time.Duration
		want    resilience.Outcome
	}{
		{"cancelled after a long silence", cancelled, time.Minute, resilience.Ignore},
		{"cancelled before its deadline", cancelledBeforeDeadline, time.Minute, resilience.Ignore},
		{"deadline after connect_timeout of silence", expired, connect, resilience.Hang},
		{"deadline after more silence", expired, time.Minute, resilience.Hang},
		{"deadline after a little less silence", expired, connect - time.Millisecond, resilience.Ignore},
		{"deadline after 50 ms of silence", expired, 50 * time.Millisecond, resilience.Ignore},
		{"ended without a deadline", endedContext{bg}, time.Minute, resilience.Ignore},
	} {
		if got := silentCut(tc.ctx, tc.silence, connect); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
}

func TestStampMovesForwardByTheGrain(t *testing.T) {
	t.Parallel()
	var a atomic.Int64
	x := int64(time.Hour)
	stamp(&a, x)
	for _, tc := range []struct {
		t, want int64
	}{
		{x + int64(progressGrain) - 1, x}, // within the grain: kept
		{x - int64(time.Second), x},       // earlier: never backwards
		{x + int64(progressGrain), x + int64(progressGrain)},
	} {
		stamp(&a, tc.t)
		if got := a.Load(); got != tc.want {
			t.Fatalf("stamp(%d) left %d, want %d", tc.t, got, tc.want)
		}
	}
}

// The silence runs from the latest of the start, the response and body
// stamps and the connections' stamps, less the grain; a read of the caller's
// body in flight is no silence.
func TestProgressSilence(t *testing.T) {
	t.Parallel()
	start := time.Now()
	_, p := track(context.Background(), start)
	at := start.Add(time.Second)
	check := func(what string, want time.Duration) {
		t.Helper()
		if got := p.silence(at); got != want {
			t.Fatalf("%s: silence %s, want %s", what, got, want)
		}
	}
	check("nothing heard", time.Second-progressGrain)
	stamp(&p.last, stampAt(start.Add(400*time.Millisecond)))
	check("a response began at 400 ms", 600*time.Millisecond-progressGrain)
	c := &gapConn{}
	stamp(&c.lastIO, stampAt(start.Add(700*time.Millisecond)))
	p.conns = append(p.conns, c)
	check("a connection wrote at 700 ms", 300*time.Millisecond-progressGrain)
	p.bodyReadStart()
	check("a read of the caller's body in flight", 0)
	p.reading.Add(-1)
	check("the read ended", 300*time.Millisecond-progressGrain)
	if got := p.silence(start.Add(705 * time.Millisecond)); got != 0 {
		t.Fatalf("5 ms after a write: silence %s, want 0 (within the grain)", got)
	}
}

// A connection stamps the start of every read and write, and the end of each
// write: the silence of an operation runs from the latest.
func TestGapConnStampsItsIO(t *testing.T) {
	t.Parallel()
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	c := &gapConn{Conn: a, gap: time.Minute}
	go func() {
		buf := make([]byte, 4)
		if _, err := io.ReadFull(b, buf); err == nil {
			_, _ = b.Write(buf)
		}
	}()
	for _, tc := range []struct {
		name string
		io   func() error
	}{
		{"write", func() error { _, err := c.Write([]byte("ping")); return err }},
		{"read", func() error { _, err := io.ReadFull(c, make([]byte, 4)); return err }},
	} {
		old := stampAt(time.Now().Add(-time.Hour))
		c.lastIO.Store(old)
		before := stampAt(time.Now())
		if err := tc.io(); err != nil {
			t.Fatal(err)
		}
		if got := c.lastIO.Load(); got < before {
			t.Fatalf("%s: stamp %d, before the call (%d)", tc.name, got, before)
		}
	}
}
