package storage

import (
	"context"
	"errors"
	"net/http/httptrace"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jfastframework/jfast/framework/resilience"
)

// An S3 disk's own read deadline is a gap between bytes that moves with
// progress, so when a caller's deadline cuts an operation there is no fixed
// deadline of the disk's to compare it with (resilience.CutByCaller's zero
// own). Taken alone that rule ignores every cut, and with the defaults
// (read_timeout 30 s, app.request_timeout 30 s) no request ever waits out a
// gap: a hung S3 under request traffic would never open the breaker. So a
// cut is judged by how long S3 had been silent: connect_timeout is the time
// jfast gives S3 to even accept a connection, and a healthy S3 never goes
// that long without a byte in the middle of an operation.

// silentCut is the breaker outcome of an S3 operation that failed after its
// caller's context ended (resilience.CutByCaller said so), given how long the
// operation had gone without hearing from S3 (silence) and the disk's
// connect_timeout (connect). A cancelled caller is never evidence; a caller's
// deadline is a Hang when S3 had been silent for connect or longer, and no
// evidence after less (a caller with 50 ms left proves nothing).
func silentCut(ctx context.Context, silence, connect time.Duration) resilience.Outcome {
	if errors.Is(ctx.Err(), context.Canceled) {
		return resilience.Ignore
	}
	if _, ok := ctx.Deadline(); !ok {
		return resilience.Ignore // ended by a custom context without a deadline: the caller's doing
	}
	if silence >= connect {
		return resilience.Hang // S3 said nothing for at least connect_timeout
	}
	return resilience.Ignore
}

// progressGrain is how coarse the last-progress stamps are: one is moved only
// when it is this much behind, so a connection moving bytes stores at most
// 100 stamps a second whatever its throughput. The silence computed from the
// stamps is lowered by as much, so the coarseness never makes a cut evidence.
const progressGrain = 10 * time.Millisecond

// epoch is the origin of the stamps. Stamps are durations since epoch taken
// from time.Now's monotonic reading, so a step of the wall clock cannot
// fake silence.
var epoch = time.Now()

// stampAt returns t as a stamp.
func stampAt(t time.Time) int64 { return int64(t.Sub(epoch)) }

// stamp moves a forward to t when t is progressGrain or more ahead of it.
// Stamps only move forward, even when two goroutines stamp at once.
func stamp(a *atomic.Int64, t int64) {
	for old := a.Load(); t-old >= int64(progressGrain); old = a.Load() {
		if a.CompareAndSwap(old, t) {
			return
		}
	}
}

// progress is what one S3 operation knows of when it last heard from S3: its
// start, the connections it used (each stamps its own reads and writes, see
// gapConn), the first byte of each response, the caller's upload body, whose
// reads are the caller's time, not S3's, and for a Get each read of the body
// by the caller, before which the time was the caller's too.
type progress struct {
	start   int64        // stamp of the operation's start
	last    atomic.Int64 // first response bytes, reads of the caller's body that returned, reads of a Get's body that began
	reading atomic.Int32 // reads of the caller's body in flight
	// moved is set at the first read of the request's body (S3 is taking
	// it), when onMove, if set, is called once.
	moved  atomic.Bool
	onMove func()

	mu    sync.Mutex
	conns []*gapConn
}

// track starts following an operation that begins at start: the returned
// context carries the HTTP trace hooks that tell p the connections and
// responses of the operation's requests (every attempt, every part).
func track(ctx context.Context, start time.Time) (context.Context, *progress) {
	p := &progress{start: stampAt(start)}
	return httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		GotConn: func(info httptrace.GotConnInfo) {
			if gc := asGapConn(info.Conn); gc != nil {
				p.mu.Lock()
				p.conns = append(p.conns, gc)
				p.mu.Unlock()
			}
		},
		GotFirstResponseByte: func() { stamp(&p.last, stampAt(time.Now())) },
	}), p
}

// bodyReadStart and bodyReadDone go around each read of the caller's upload
// body.
func (p *progress) bodyReadStart() {
	p.reading.Add(1)
	if !p.moved.Load() && p.moved.CompareAndSwap(false, true) && p.onMove != nil {
		p.onMove()
	}
}

func (p *progress) bodyReadDone() {
	stamp(&p.last, stampAt(time.Now()))
	p.reading.Add(-1)
}

// waiting marks the start of a read of a Get's body by its caller: the time
// since its previous read was the caller's (writing out what it read), not
// S3's silence.
func (p *progress) waiting() { stamp(&p.last, stampAt(time.Now())) }

// silence returns how long the operation had gone, at now, with no byte
// received or sent on its connections, no response begun, and no read of the
// caller's body returned: a lower bound (stamps lag by less than
// progressGrain). It is zero while a read of the caller's body is in flight:
// the caller, not S3, holds the operation up.
func (p *progress) silence(now time.Time) time.Duration {
	if p.reading.Load() > 0 {
		return 0
	}
	last := max(p.start, p.last.Load())
	p.mu.Lock()
	for _, c := range p.conns {
		last = max(last, c.lastIO.Load())
	}
	p.mu.Unlock()
	return max(0, time.Duration(stampAt(now)-last)-progressGrain)
}

// gapFired reports whether the read gap expired on a connection of the
// operation: S3 left it silent that long, whatever error the request then
// failed with.
func (p *progress) gapFired() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		if c.fired.Load() {
			return true
		}
	}
	return false
}
