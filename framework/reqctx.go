package framework

import (
	"context"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/jfastframework/jfast/requestid"
)

// requestValues carries what the framework puts in every request's context —
// the request ID (and its response-header value) and chi's routing context —
// in one allocation instead of two context.WithValue layers and chi's own
// request copy. It answers Value for those keys and leaves everything else,
// cancellation included, to its parent: the request deadline is a standard
// context.WithDeadline on top of it, so Done, Err, context.Cause, derived
// contexts and context.AfterFunc are the context package's own
// (docs/performance.md, "The request context").
type requestValues struct {
	context.Context
	id     string
	header [1]string // the response header's value slice, pointing at id
	idBuf  [requestid.Len]byte
	// route is chi's routing context for this request, until the request ends
	// and it goes back to its pool; nil when the parent carries one.
	route atomic.Pointer[chi.Context]
	// permit is the front door's slot the request holds, released early by
	// StreamContext; nil without a concurrency limit.
	permit atomic.Pointer[heldPermit]
}

// newRequestValues returns the request's values. inbound is the client's
// request ID (used when [requestid.Valid]); the ID is also set on the
// response header h.
func newRequestValues(parent context.Context, inbound string, h http.Header, route *chi.Context) *requestValues {
	c := &requestValues{Context: parent}
	if route != nil {
		c.route.Store(route)
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

// RequestID makes requestValues a requestid.Carrier.
func (c *requestValues) RequestID() string { return c.id }

func (c *requestValues) Value(key any) any {
	if _, ok := key.(requestid.ContextKey); ok {
		return c
	}
	if key == chi.RouteCtxKey {
		if route := c.route.Load(); route != nil {
			return route
		}
	}
	return c.Context.Value(key)
}

func (c *requestValues) String() string { return "jfast request context" }

// end is the request's end: chi's routing context goes back to its pool, so
// a goroutine that outlives the request must not see it.
func (c *requestValues) end() {
	c.route.Store(nil)
	c.permit.Store(nil)
}

// requestContext is the context a request is served with: its values, and the
// request deadline (the sooner of the server's context deadline and
// start+timeout), cancelled when the request ends.
func requestContext(parent context.Context, inbound string, h http.Header, start time.Time, timeout time.Duration, route *chi.Context) (*requestValues, context.Context, context.CancelFunc) {
	values := newRequestValues(parent, inbound, h, route)
	ctx, cancel := context.WithDeadline(values, start.Add(timeout))
	return values, ctx, cancel
}

// StreamContext returns the context for a response that streams longer than
// app.request_timeout (server-sent events, a long poll): r's context without
// the request deadline. It still ends when the client goes away or the server
// closes the connection, and it carries every value of r's context (the
// request ID, what middleware added). The response must bound itself: a write
// deadline per write (http.ResponseController), an end on App.Draining.
// Outside a jfast App it returns r's context unchanged.
//
// It also frees the request's slot of the concurrency limit
// ([app.overload]): a response that streams for minutes is not work the
// limit should count, nor a latency it should learn from.
func StreamContext(r *http.Request) context.Context {
	ctx := r.Context()
	rv, ok := ctx.Value(requestid.ContextKey{}).(*requestValues)
	if !ok {
		return ctx
	}
	if p := rv.permit.Load(); p != nil {
		p.release(false)
	}
	// rv's cancellation is the server's request context's: the client
	// going away, the server closing; the deadline is a layer above it.
	return &lifeContext{Context: ctx, life: rv, name: "jfast stream context"}
}

// ContextWithLife returns a context with the values of values and the
// deadline and cancellation of life: a stream's (the request's values, the
// connection's life), or an upgrade's handshake (the call's values, the
// client request's deadline).
func ContextWithLife(values, life context.Context) context.Context {
	return &lifeContext{Context: values, life: life, name: "jfast context with another's life"}
}

// lifeContext has the values of one context and the life of another.
type lifeContext struct {
	context.Context // values
	life            context.Context
	name            string
}

func (s *lifeContext) Deadline() (time.Time, bool) { return s.life.Deadline() }
func (s *lifeContext) Done() <-chan struct{}       { return s.life.Done() }
func (s *lifeContext) Err() error                  { return s.life.Err() }
func (s *lifeContext) String() string              { return s.name }
