// Package deadline gives the contexts of many calls one runtime timer for
// their deadlines. context.WithDeadline gives every call a runtime timer of
// its own, set when the call begins and stopped when it ends, and a map of
// the contexts derived from it, which a transport adds one to per request:
// on a client's hot path the two are the largest share of what a call costs
// beyond the request itself (docs/performance.md, "HTTP client"). A
// [Timer]'s calls share one timer instead, and a call's [Context] keeps what
// is derived from it in a short list (Context.AfterFunc). The http plugin's
// calls and the queue's enqueues are timed so.
package deadline

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Timer times the calls of one client with one timer. The list is in
// deadline order (a call's deadline is timeout from its start, so nearly
// always after every one listed), and the timer, while armed, is set for
// no later than the first deadline. It is not stopped when the list
// empties, nor set again for each call: when it fires it ends the calls
// whose deadline has passed and is set for the first one left. So a run of
// calls moves the runtime's timer about once per timeout, not twice per
// call.
type Timer struct {
	mu          sync.Mutex
	first, last *Context
	timer       *time.Timer
	armed       bool      // timer is set, to fire at due
	due         time.Time // when the armed timer fires
}

// NewTimer returns a Timer with nothing to time.
func NewTimer() *Timer {
	d := &Timer{}
	d.timer = time.AfterFunc(time.Hour, d.fire)
	d.timer.Stop()
	return d
}

// WithDeadline is the caller's context with deadline on it, as
// context.WithDeadline makes it (a resilience.PolicyOpts.WithDeadline).
func (d *Timer) WithDeadline(parent context.Context, deadline time.Time) (context.Context, context.CancelFunc) {
	c := &Context{Context: parent, deadline: deadline, done: make(chan struct{})}
	c.afters = c.afterBuf[:0]
	if cur, ok := parent.Deadline(); ok && cur.Before(deadline) {
		// The caller's deadline comes first and ends c with the caller.
		c.deadline = cur
	} else {
		// One already passed is ended by the timer, at once.
		c.d = d
		d.add(c)
	}
	if parent.Done() != nil {
		if err := parent.Err(); err != nil {
			c.end(err)
		} else {
			c.stopParent = context.AfterFunc(parent, c.parentEnded)
		}
	}
	return c, c.cancel
}

// add lists c, in deadline order, and sets the timer if it is not set for
// c's deadline or sooner.
func (d *Timer) add(c *Context) {
	d.mu.Lock()
	at := d.last
	for at != nil && at.deadline.After(c.deadline) {
		at = at.prev
	}
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
	if !d.armed || c.deadline.Before(d.due) {
		d.timer.Reset(time.Until(c.deadline))
		d.armed, d.due = true, c.deadline
	}
	d.mu.Unlock()
}

// unlink takes c off the list; d.mu is held.
func (d *Timer) unlink(c *Context) {
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
}

// remove takes c off the list, if it is on it.
func (d *Timer) remove(c *Context) {
	d.mu.Lock()
	if c.listed {
		d.unlink(c)
	}
	d.mu.Unlock()
}

// fire ends the calls whose deadline has passed and sets the timer for the
// first one left.
func (d *Timer) fire() {
	d.mu.Lock()
	now := time.Now()
	var expired *Context // linked through next
	for c := d.first; c != nil && !c.deadline.After(now); c = d.first {
		d.unlink(c)
		c.next, expired = expired, c
	}
	d.armed = false
	if d.first != nil {
		d.timer.Reset(d.first.deadline.Sub(now))
		d.armed, d.due = true, d.first.deadline
	}
	d.mu.Unlock()
	for c := expired; c != nil; {
		next := c.next
		c.next = nil
		c.end(context.DeadlineExceeded)
		c = next
	}
}

// Context is a call's context under its deadline. It answers as
// context.WithDeadline's would: Deadline; Done closed at the deadline, when
// the call ends (cancel) or when the caller's context ends; Err then
// context.DeadlineExceeded, context.Canceled or the caller's error;
// context.Cause the same, or the caller's cause once the caller's context
// was cancelled with one (the context package finds it through the
// caller's values); the caller's values. A context derived from it by the
// context package ends with it: it registers through AfterFunc.
type Context struct {
	context.Context // the caller's
	deadline        time.Time
	done            chan struct{}
	d               *Timer      // the list c is timed by; nil when the caller's deadline times it
	stopParent      func() bool // stops watching the caller's context; nil when it never ends
	ended           atomic.Bool

	mu       sync.Mutex
	err      error
	afters   []afterEntry // the functions AfterFunc registered, in afterBuf while one
	afterBuf [1]afterEntry
	seq      uint64

	// In d's list, under d.mu.
	prev, next *Context
	listed     bool
}

type afterEntry struct {
	id uint64
	f  func()
}

func (c *Context) Deadline() (time.Time, bool) { return c.deadline, true }

func (c *Context) Done() <-chan struct{} { return c.done }

func (c *Context) Err() error {
	if !c.ended.Load() {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// AfterFunc arranges for f to run once c is done, and returns what
// unregisters it (false when f already ran or was stopped): the method
// context.AfterFunc documents, through which a context derived from c (the
// transport's for each request, a hedge's) learns that c ended. f runs on
// the goroutine that ends c, as the context package cancels the contexts
// derived from its own (context.AfterFunc starts a goroutine for its f
// itself); on a goroutine of its own when c has ended already.
func (c *Context) AfterFunc(f func()) func() bool {
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		go f()
		return stopped
	}
	c.seq++
	id := c.seq
	c.afters = append(c.afters, afterEntry{id: id, f: f})
	c.mu.Unlock()
	return func() bool { return c.stopAfter(id) }
}

func stopped() bool { return false }

// stopAfter unregisters the function AfterFunc registered as id.
func (c *Context) stopAfter(id uint64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, a := range c.afters {
		if a.id == id {
			c.afters = slices.Delete(c.afters, i, i+1)
			return true
		}
	}
	return false
}

// parentEnded ends c with the caller's context.
func (c *Context) parentEnded() { c.end(c.Context.Err()) }

// cancel ends c when its call ends.
func (c *Context) cancel() {
	c.end(context.Canceled)
	if c.d != nil {
		c.d.remove(c)
	}
	if c.stopParent != nil {
		c.stopParent()
	}
}

// end records why c ended, closes Done and runs what AfterFunc registered,
// once.
func (c *Context) end(err error) {
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return
	}
	c.err = err
	c.ended.Store(true)
	close(c.done)
	afters := c.afters
	c.afters = nil
	c.mu.Unlock()
	for _, a := range afters {
		a.f()
	}
}

// Timed reports how many contexts d is timing now: those whose deadline has
// not passed and whose call has not ended.
func (d *Timer) Timed() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	n := 0
	for c := d.first; c != nil; c = c.next {
		n++
	}
	return n
}
