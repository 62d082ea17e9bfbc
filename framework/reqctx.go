package framework

import (
	"context"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/jfastframework/jfast/internal/ctxkey"
	"github.com/jfastframework/jfast/requestid"
)

// requestContext is the context every request is served with: the server's
// context plus the request ID, the request deadline and chi's routing context,
// in one allocation.
//
// context.WithTimeout would cost four allocations per request (the context, its
// timer, the timer's closure and the parent's children map) although most
// handlers never wait on Done. requestContext builds that real deadline context
// only when something needs it — Done, context.Cause, a derived context or
// context.AfterFunc (all of which reach it through Done or Value) — and answers
// Deadline, Err and Value without it. Once built, it answers everything, so
// derived contexts, Cause and AfterFunc behave exactly as with WithTimeout.
//
// Err is consistent across that switch: the first error it reports ("settled")
// is the one the built context reports afterwards, and ending the request
// cancels it as WithTimeout's deferred cancel would.
type requestContext struct {
	parent   context.Context
	deadline time.Time
	id       string
	header   [1]string // the response header's value slice, pointing at id
	idBuf    [requestid.Len]byte
	// route is chi's routing context for this request, until the request ends
	// and it goes back to its pool; nil when the parent carries one.
	route atomic.Pointer[chi.Context]

	built atomic.Bool // inner and cancel are set; read them without mu
	mu    sync.Mutex
	inner context.Context
	stop  context.CancelFunc
	// settled is the error Err reported before inner was built (nil until
	// then), and why: the parent's error, the deadline, or the request's end.
	settled error
	why     settledBy
}

type settledBy uint8

const (
	byParent settledBy = iota + 1
	byDeadline
	byEnd
)

// newRequestContext returns the request's context. inbound is the client's
// request ID (used when [requestid.Valid]); the ID is also set on the response
// header h.
func newRequestContext(parent context.Context, inbound string, h http.Header, start time.Time, timeout time.Duration, route *chi.Context) *requestContext {
	c := &requestContext{parent: parent, deadline: start.Add(timeout)}
	if route != nil {
		c.route.Store(route)
	}
	if d, ok := parent.Deadline(); ok && d.Before(c.deadline) {
		c.deadline = d
	}
	if requestid.Valid(inbound) {
		c.id = inbound
	} else {
		c.id = requestid.Make(&c.idBuf)
	}
	c.header[0] = c.id
	h[canonicalRequestIDHeader] = c.header[:]
	return c
}

// canonicalRequestIDHeader is requestid.Header as net/http stores it, so the
// map write needs no canonicalisation.
var canonicalRequestIDHeader = http.CanonicalHeaderKey(requestid.Header)

// RequestID makes requestContext a requestid.Carrier.
func (c *requestContext) RequestID() string { return c.id }

func (c *requestContext) Deadline() (time.Time, bool) { return c.deadline, true }

func (c *requestContext) Done() <-chan struct{} { return c.build().Done() }

func (c *requestContext) Err() error {
	if c.built.Load() {
		return c.inner.Err()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.inner != nil {
		return c.inner.Err()
	}
	c.settleLocked()
	return c.settled
}

func (c *requestContext) Value(key any) any {
	if _, ok := key.(requestid.ContextKey); ok {
		return c
	}
	if key == chi.RouteCtxKey {
		if route := c.route.Load(); route != nil {
			return route
		}
	}
	if key == ctxkey.Cancel {
		// context.Cause, or a context being derived: both get the built
		// deadline context's own cancel context.
		return c.build().Value(key)
	}
	return c.parent.Value(key)
}

func (c *requestContext) String() string { return "jfast request context" }

// settleLocked records the error the context has now, if it has one and none
// was recorded yet.
func (c *requestContext) settleLocked() {
	if c.settled != nil {
		return
	}
	if err := c.parent.Err(); err != nil {
		c.settled, c.why = err, byParent
	} else if !time.Now().Before(c.deadline) {
		c.settled, c.why = context.DeadlineExceeded, byDeadline
	}
}

// build returns the real deadline context, making it on first use in the state
// Err has already reported.
func (c *requestContext) build() context.Context {
	if c.built.Load() {
		return c.inner
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.inner != nil {
		return c.inner
	}
	switch c.why {
	case byParent:
		// The parent is done: a child inherits its error and cause.
		c.inner, c.stop = context.WithDeadline(c.parent, c.deadline)
	case byDeadline:
		// Detached from the parent, whose later cancellation must not change
		// the error already reported; the deadline is past, so it is expired.
		c.inner, c.stop = context.WithDeadline(context.WithoutCancel(c.parent), c.deadline)
	case byEnd:
		c.inner, c.stop = context.WithCancel(context.WithoutCancel(c.parent))
		c.stop()
	default:
		c.inner, c.stop = context.WithDeadline(c.parent, c.deadline)
	}
	c.built.Store(true)
	return c.inner
}

// end is the request's end: the context is cancelled, as a deferred cancel of
// context.WithTimeout would, unless it is already done.
func (c *requestContext) end() {
	c.route.Store(nil)
	c.mu.Lock()
	if c.inner == nil {
		c.settleLocked()
		if c.settled == nil {
			c.settled, c.why = context.Canceled, byEnd
		}
	}
	stop := c.stop
	c.mu.Unlock()
	if stop != nil {
		stop()
	}
}
