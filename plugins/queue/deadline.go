package queue

import (
	"context"
	"sync"
	"time"
)

// deadlines times the enqueue_timeout of the enqueues whose caller's context
// never ends (context.Background(), context.WithoutCancel...), on a backend
// that takes it ([sharedTimerBackend]), with one timer shared by those in
// flight instead of a timer context each. On a redis enqueue, a new
// context.WithTimeout per call measured as the largest share of the plugin's
// overhead over bare asynq, far more than its own processor time; re-arming
// one timer costs a fraction of it (docs/performance.md). A caller's context
// that can end keeps context.WithDeadline, so that its end reaches the enqueue
// as the context package passes it on.
//
// The list is in deadline order, and the timer is pending at or before the
// first deadline whenever the list is not empty.
type deadlines struct {
	mu          sync.Mutex
	first, last *enqueueContext
	timer       *time.Timer
	armed       bool // timer is pending
}

func newDeadlines() *deadlines {
	d := &deadlines{}
	d.timer = time.AfterFunc(time.Hour, d.fire)
	d.timer.Stop()
	return d
}

// sharedTimerBackend is a backend whose Enqueue may run under an
// [enqueueContext]: its client derives no context from the enqueue's on its
// usual path. A context derived from one the context package did not make
// (also through a context.WithValue on top of it) is watched by a goroutine
// of its own; pgx watches every query's context so, which on the postgres
// backend cost more than the shared timer saved.
type sharedTimerBackend interface {
	Backend
	// derivesNoContext marks the backend.
	derivesNoContext()
}

// enqueueContext is the context one enqueue runs under: the caller's (which
// never ends), ended at its deadline or when the enqueue returns. It answers
// as context.WithTimeout's would: Deadline; Done closed at the deadline or the
// end; Err then context.DeadlineExceeded or context.Canceled, and
// context.Cause the same; the caller's values; a context derived from it ends
// with it (the context package watches a parent it did not make with a
// goroutine per derived context: see [sharedTimerBackend]).
type enqueueContext struct {
	context.Context // the caller's
	d               *deadlines
	deadline        time.Time
	done            chan struct{}

	mu  sync.Mutex
	err error

	// In d's list, under d.mu.
	prev, next *enqueueContext
	listed     bool
}

// start returns the context of one enqueue, which ends at deadline; end it
// with cancel when the enqueue returns. parent.Done() must be nil.
func (d *deadlines) start(parent context.Context, deadline time.Time) *enqueueContext {
	c := &enqueueContext{Context: parent, d: d, deadline: deadline, done: make(chan struct{})}
	d.mu.Lock()
	// In deadline order: after the last deadline not later than c's (nearly
	// always the last: deadlines are made enqueue_timeout from now).
	at := d.last
	for at != nil && at.deadline.After(deadline) {
		at = at.prev
	}
	d.insertAfter(at, c)
	if !d.armed {
		d.armed = true
		d.timer.Reset(time.Until(deadline))
	} else if d.first == c {
		// Sooner than the deadline the timer is set for.
		d.timer.Reset(time.Until(deadline))
	}
	d.mu.Unlock()
	return c
}

// insertAfter puts c after at in the list (first when at is nil); d.mu is
// held.
func (d *deadlines) insertAfter(at, c *enqueueContext) {
	c.prev, c.listed = at, true
	if at != nil {
		c.next, at.next = at.next, c
	} else {
		c.next, d.first = d.first, c
	}
	if c.next != nil {
		c.next.prev = c
	} else {
		d.last = c
	}
}

// fire ends the contexts whose deadline has passed and sets the timer for the
// next one.
func (d *deadlines) fire() {
	d.mu.Lock()
	now := time.Now()
	var expired *enqueueContext // linked through next
	for c := d.first; c != nil && !c.deadline.After(now); c = d.first {
		d.unlink(c)
		c.next, expired = expired, c
	}
	if d.first != nil {
		d.timer.Reset(time.Until(d.first.deadline))
	} else {
		d.armed = false
	}
	d.mu.Unlock()
	for c := expired; c != nil; {
		next := c.next
		c.next = nil
		c.end(context.DeadlineExceeded)
		c = next
	}
}

// unlink removes c from the list; d.mu is held. With the list empty the timer
// is stopped, unless it already fired (fire then finds nothing to end).
func (d *deadlines) unlink(c *enqueueContext) {
	if c.prev != nil {
		c.prev.next = c.next
	} else {
		d.first = c.next
	}
	if c.next != nil {
		c.next.prev = c.prev
	} else {
		d.last = c.prev
	}
	c.prev, c.next, c.listed = nil, nil, false
	if d.first == nil && d.armed && d.timer.Stop() {
		d.armed = false
	}
}

// cancel ends c when its enqueue returns.
func (c *enqueueContext) cancel() {
	c.end(context.Canceled)
	c.d.mu.Lock()
	if c.listed {
		c.d.unlink(c)
	}
	c.d.mu.Unlock()
}

// end records why c ended and closes Done, once.
func (c *enqueueContext) end(err error) {
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return
	}
	c.err = err
	close(c.done)
	c.mu.Unlock()
}

// Deadline implements context.Context.
func (c *enqueueContext) Deadline() (time.Time, bool) { return c.deadline, true }

// Done implements context.Context.
func (c *enqueueContext) Done() <-chan struct{} { return c.done }

// Err implements context.Context.
func (c *enqueueContext) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}
