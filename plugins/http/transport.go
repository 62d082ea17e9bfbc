package http

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/textproto"
	"net/url"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/framework/egress"
	"github.com/jfastframework/jfast/internal/deadline"
)

// The read timeout is a gap, not a whole-response timeout: a response that
// keeps coming, however slowly, is only cut by the total deadline; one that
// stops for read_timeout is cut at once. net/http has no such setting, so the
// client wraps every connection it dials (gapConn) and, while an attempt is
// waiting for or reading its response, gives every read of that connection a
// deadline of read_timeout from its start (one set less than
// read_timeout/16 ago is kept: a read ends at most a sixteenth of the gap
// early, and the runtime's timer moves once per sixteenth, not per read). An idle pooled connection is not closed
// for being idle: the deadline its last attempt left is not cleared when the
// attempt ends (the runtime's timer would move twice per call), but when it
// passes with no attempt on the connection the read that hit it clears it
// and goes on waiting.

// unsent reports whether err is the failure of an attempt that sent
// nothing, so that making it again repeats nothing, whatever the method:
// its connection could not be made (refused, unreachable, no answer to the
// connect within connect_timeout, the name not found). A request of a
// method not safe to repeat, without an Idempotency-Key, is made again
// after such an attempt alone (exchange.resend): with instances, on another
// instance, so a call that met a dead replica is answered by a live one.
func unsent(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// gapConn is a connection whose reads, while armed, each get a deadline of
// readGap from the moment they start, and whose writes one of writeGap
// (in both, one set less than a sixteenth of the gap ago is kept).
type gapConn struct {
	net.Conn
	readGap, writeGap time.Duration

	mu       sync.Mutex
	armed    int           // attempts waiting for or reading a response on this connection
	owner    *attempt      // the attempt that armed the connection last: the one a cut ends
	ownerGen uint64        // owner's gen when it armed the connection
	readOn   bool          // a read deadline is set (readSet + readGap)
	readSet  time.Duration // when the read deadline was last set, since epoch
	writeSet time.Duration // when the write deadline was last set, since epoch
	switched bool          // past a protocol switch (Switched): writes get no deadline
}

// epoch is what a gapConn's deadlines are read from: time.Since(epoch) reads
// the monotonic clock only, where time.Now reads the wall clock too, and a
// connection reads the time on every write and armed read.
var epoch = time.Now()

func newGapConn(c net.Conn, readGap, writeGap time.Duration) *gapConn {
	// writeSet so far back that the first write sets a deadline.
	return &gapConn{Conn: c, readGap: readGap, writeGap: writeGap, writeSet: -writeGap}
}

// A deadline set less than gap/deadlineSlack ago is not set again: reads
// come in bursts (the transport peeks, then reads the headers, then the
// body), and moving the runtime's timer for each costs more than the rest of
// the read. So the gap allowed is between 15/16 of the timeout and all of it.
const deadlineSlack = 16

func (c *gapConn) Read(b []byte) (int, error) {
	for {
		c.mu.Lock()
		if c.armed > 0 {
			c.setReadDeadline()
		}
		c.mu.Unlock()
		n, err := c.Conn.Read(b)
		if n > 0 || err == nil || !errors.Is(err, os.ErrDeadlineExceeded) {
			return n, err
		}
		stale, owner, gen := c.staleDeadline()
		if !stale {
			if owner != nil {
				// Before the transport hears of the cut: see attempt.cut.
				owner.cut(gen, err)
			}
			return n, err
		}
	}
}

// setReadDeadline sets the read deadline readGap from now, unless one set
// less than readGap/deadlineSlack ago is still on. c.mu is held.
func (c *gapConn) setReadDeadline() {
	now := time.Since(epoch)
	if !c.readOn || now-c.readSet >= c.readGap/deadlineSlack {
		c.readOn, c.readSet = true, now
		_ = c.Conn.SetReadDeadline(epoch.Add(now + c.readGap))
	}
}

// staleDeadline reports whether a read that hit its deadline should go on
// waiting, and clears the deadline when no attempt is on the connection: the
// deadline was an earlier attempt's (the connection idle in the pool, or
// past a protocol switch), or the one set now is still to come (an attempt
// set it after the earlier one passed). When the read is cut, it returns
// the attempt the cut ends (the last to arm the connection) and its gen.
func (c *gapConn) staleDeadline() (stale bool, owner *attempt, gen uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.armed == 0 {
		if c.readOn {
			c.readOn = false
			_ = c.Conn.SetReadDeadline(time.Time{})
		}
		return true, nil, 0
	}
	if c.readOn && time.Since(epoch) < c.readSet+c.readGap {
		return true, nil, 0
	}
	return false, c.owner, c.ownerGen
}

func (c *gapConn) Write(b []byte) (int, error) {
	c.mu.Lock()
	now := time.Since(epoch)
	if !c.switched && now-c.writeSet >= c.writeGap/deadlineSlack {
		c.writeSet = now
		_ = c.Conn.SetWriteDeadline(epoch.Add(now + c.writeGap))
	}
	c.mu.Unlock()
	return c.Conn.Write(b)
}

// arm starts the gap deadline for attempt a (at its gen), including for a
// read already waiting (the transport's reader parks on a pooled
// connection between responses). A deadline set less than
// readGap/deadlineSlack ago stays.
func (c *gapConn) arm(a *attempt, gen uint64) {
	c.mu.Lock()
	c.armed++
	c.owner, c.ownerGen = a, gen
	c.setReadDeadline()
	c.mu.Unlock()
}

// disarm ends a's gap deadline when no attempt needs it any more. The
// deadline stays set: a read that hits it with no attempt on the connection
// clears it (staleDeadline).
func (c *gapConn) disarm(a *attempt) {
	c.mu.Lock()
	if c.armed > 0 {
		c.armed--
	}
	if c.owner == a {
		c.owner = nil
	}
	c.mu.Unlock()
}

// gapConnOf finds the gapConn under a connection the transport handed out
// (a *tls.Conn for https).
func gapConnOf(c net.Conn) *gapConn {
	for c != nil {
		if g, ok := c.(*gapConn); ok {
			return g
		}
		u, ok := c.(interface{ NetConn() net.Conn })
		if !ok {
			return nil
		}
		c = u.NetConn()
	}
	return nil
}

// dialFunc dials a connection, as http.Transport.DialContext does.
type dialFunc func(ctx context.Context, network, addr string) (net.Conn, error)

// newTransport returns the transport of one upstream, built as every jfast
// client's (egress.NewTransport: no proxy from the environment): HTTP/1.1, a
// pool of max_concurrent connections per host, connect_timeout on dial and
// TLS handshake, and gap deadlines on every connection. dial, when not nil,
// replaces the dialer (it must apply connect_timeout itself). maxIdle bounds
// the idle connections across hosts (a shared client's many origins); 0 means
// max_concurrent.
func newTransport(u Upstream, dial dialFunc, maxIdle int) *http.Transport {
	conns := poolSize(u)
	if maxIdle == 0 {
		maxIdle = conns
	}
	readGap, writeGap := u.ReadTimeout, u.WriteTimeout
	t := egress.NewTransport(egress.TransportOpts{
		ConnectTimeout: u.ConnectTimeout,
		Dial:           dial,
		WrapConn: func(c net.Conn) net.Conn {
			return newGapConn(c, readGap, writeGap)
		},
		TLS:                 instanceTLS(u),
		MaxConnsPerHost:     conns,
		MaxIdleConns:        maxIdle,
		MaxIdleConnsPerHost: conns,
		// The gap deadline covers the wait for the headers, so no
		// ResponseHeaderTimeout.
	})
	t.Proxy = refuseResend(t.Proxy)
	return t
}

// poolSize is the connections one host of u may have: max_concurrent, a
// connection per call in flight, times 1 + max_hedges (at most attempts −
// 1, the hedges a call can start) when calls are hedged: a call's hedges
// run beside its first request, each on a connection of its own, and a
// pool of max_concurrent would hold them back (counted as sent, never
// sent) once the calls in flight fill it.
func poolSize(u Upstream) int {
	if u.HedgeAfter == "" {
		return u.MaxConcurrent
	}
	return u.MaxConcurrent * (1 + max(min(u.MaxHedges, u.Attempts-1), 0))
}

// errPoolTimeout is the cause of an attempt that waited pool_timeout for a
// connection.
var errPoolTimeout = errors.New("no connection within pool_timeout")

// attempt is the per-attempt state the transport's trace hooks write to. It
// is pooled with its trace, whose hooks are bound once, so an attempt costs no
// closure allocations.
type attempt struct {
	trace httptrace.ClientTrace
	// pool is the pool_timeout timer. It is not stopped when a connection
	// comes, nor re-armed for each attempt: an attempt that begins while it
	// is still set, for no later than the attempt's due time, leaves it
	// set, and when it fires before the attempt's due time it is set again
	// for the rest. So a run of attempts that get their connections at once
	// (nearly all) moves the runtime's timer about once per pool_timeout,
	// not twice per attempt.
	pool *time.Timer

	mu       sync.Mutex
	gen      uint64 // counts begin: a cut meant for an earlier use of this pooled attempt is dropped
	active   bool
	got      bool      // the transport handed the attempt a connection
	pending  bool      // got a connection, and the transport has not yet said the request is written
	poolDue  time.Time // a timer firing before this belongs to an earlier attempt
	timerSet bool      // pool is set, to fire at timerDue
	timerDue time.Time
	conn     *gapConn
	armed    bool
	cancel   context.CancelFunc // ends the call: a pool timeout leaves no time worth a retry
	pooled   bool               // the pool timer fired: no connection within pool_timeout
	// wasCut is the error of the read the gap deadline cut, if it did: the
	// attempt is over, and net/http must not send it again (see cut).
	wasCut atomic.Pointer[error]
}

var attemptPool = sync.Pool{New: func() any {
	a := &attempt{}
	a.trace = httptrace.ClientTrace{
		GotConn:      a.gotConn,
		WroteRequest: a.wroteRequest,
		PutIdleConn:  a.putIdleConn,
	}
	a.pool = time.AfterFunc(time.Hour, a.poolExpired)
	a.pool.Stop()
	return a
}}

// context returns ctx with the attempt's trace hooks, in in when it is not
// nil (a client call's first attempt: the context the call's request was
// made with). httptrace composes a trace with one the caller put in ctx (a
// proxy counting attempts, the ReverseProxy's own for 1xx responses,
// otelhttptrace) by rewriting the trace it is given, so that case gets a
// copy: the pooled trace must keep only the attempt's own hooks, or a later
// call would run an earlier caller's. The copy is composed here, hook by
// hook (the attempt's hook first, then the caller's, as httptrace does),
// instead of by httptrace.WithClientTrace, which composes by reflection
// over every hook of every attempt's trace.
func (a *attempt) context(ctx context.Context, in *attemptCtx, out *framework.OutboundCall) context.Context {
	outer := httptrace.ContextClientTrace(ctx)
	if traceKey == nil {
		ctx = context.WithValue(ctx, attemptKey{}, a)
		if outer == nil {
			return httptrace.WithClientTrace(ctx, &a.trace)
		}
		t := a.trace
		if outer != nil && outer.Got1xxResponse != nil && out != nil && out.Interim != nil {
			interim := out.Interim // composed before the caller's own hook
			t.Got1xxResponse = func(code int, h textproto.MIMEHeader) error { interim(ctx, code, h); return nil }
		}
		return httptrace.WithClientTrace(ctx, &t)
	}
	if in == nil {
		in = new(attemptCtx)
	}
	if outer == nil {
		// The attempt's trace has no network hooks: a value is all
		// httptrace.WithClientTrace would add.
		*in = attemptCtx{Context: ctx, a: a, trace: &a.trace}
		return in
	}
	t := *outer // its network hooks, if any, are in ctx already
	t.GotConn, t.WroteRequest, t.PutIdleConn = a.trace.GotConn, a.trace.WroteRequest, a.trace.PutIdleConn
	if f := outer.GotConn; f != nil {
		t.GotConn = func(info httptrace.GotConnInfo) { a.gotConn(info); f(info) }
	}
	if f := outer.WroteRequest; f != nil {
		t.WroteRequest = func(info httptrace.WroteRequestInfo) { a.wroteRequest(info); f(info) }
	}
	if f := outer.PutIdleConn; f != nil {
		t.PutIdleConn = func(err error) { a.putIdleConn(err); f(err) }
	}
	if f := outer.Got1xxResponse; f != nil && out != nil && out.Interim != nil {
		// The call sees an interim response first (a proxy taking out what
		// it does not pass on), then the caller's trace (one passing it on).
		interim := out.Interim
		t.Got1xxResponse = func(code int, h textproto.MIMEHeader) error { interim(ctx, code, h); return f(code, h) }
	}
	*in = attemptCtx{Context: ctx, a: a, trace: &t}
	return in
}

// attemptCtx is an attempt's context: the call's, with the attempt's trace
// (under httptrace's key) and the attempt itself (for refuseResend), in one
// value.
type attemptCtx struct {
	context.Context
	a     *attempt
	trace *httptrace.ClientTrace
}

// attemptKey is the context key of the *attempt a request belongs to.
type attemptKey struct{}

func (c *attemptCtx) Value(key any) any {
	switch key {
	case traceKey:
		return c.trace
	case attemptKey{}:
		return c.a
	}
	return c.Context.Value(key)
}

// AfterFunc hands a context derived from the attempt's (the transport's,
// for each request) to the call's context, which is not the context
// package's own (deadline.Context.AfterFunc): without it the context package
// would watch the attempt's context with a goroutine per request.
func (c *attemptCtx) AfterFunc(f func()) func() bool {
	if cc, ok := c.Context.(*deadline.Context); ok {
		return cc.AfterFunc(f)
	}
	return context.AfterFunc(c.Context, f)
}

// traceKey is the context key httptrace keeps a request's
// *httptrace.ClientTrace under, found once by watching which key
// httptrace.ContextClientTrace asks for; nil when that did not work out
// (attempt.context then leaves the composing to httptrace).
var traceKey = findTraceKey()

func findTraceKey() any {
	p := &keyProbe{Context: context.Background()}
	httptrace.ContextClientTrace(p)
	if p.key == nil {
		return nil
	}
	t := &httptrace.ClientTrace{}
	if httptrace.WithClientTrace(context.Background(), t).Value(p.key) != t ||
		httptrace.ContextClientTrace(context.WithValue(context.Background(), p.key, t)) != t {
		return nil
	}
	return p.key
}

// keyProbe is a context that remembers the last key it was asked for.
type keyProbe struct {
	context.Context
	key any
}

func (p *keyProbe) Value(key any) any {
	p.key = key
	return nil
}

// begin prepares the attempt; the pool timer starts now (the time package's
// clock, read by the caller once for the pool timer and the attempt's
// Jfast-Timeout-Ms), as the transport asks for a connection as soon as
// RoundTrip starts.
func (a *attempt) begin(cancel context.CancelFunc, poolTimeout time.Duration, now time.Time) {
	a.mu.Lock()
	a.gen++
	a.wasCut.Store(nil)
	a.active, a.got, a.conn, a.armed, a.cancel, a.pending, a.pooled = true, false, nil, false, cancel, false, false
	a.poolDue = now.Add(poolTimeout)
	if !a.timerSet || a.timerDue.After(a.poolDue) {
		// Not set, or set for later (an earlier attempt of a client with a
		// longer pool_timeout).
		a.pool.Reset(poolTimeout)
		a.timerSet, a.timerDue = true, a.poolDue
	}
	a.mu.Unlock()
}

// gotConn hears of the connection the request is written on. A second one
// in the same attempt is net/http sending the request again after the
// first connection, a reused one, closed before any response: the gap
// deadline moves to the new connection.
func (a *attempt) gotConn(info httptrace.GotConnInfo) {
	a.mu.Lock()
	if a.active {
		if a.armed {
			a.conn.disarm(a)
			a.armed = false
		}
		a.got = true
		a.conn = gapConnOf(info.Conn)
		a.pending = true
	}
	a.mu.Unlock()
}

func (a *attempt) wroteRequest(info httptrace.WroteRequestInfo) {
	a.mu.Lock()
	a.pending = false
	if info.Err == nil && a.active && a.conn != nil && !a.armed {
		a.armed = true
		a.conn.arm(a, a.gen)
	}
	a.mu.Unlock()
}

// putIdleConn hears the transport give the attempt's connection back to
// its pool, its response read to the end (or close it): the attempt's
// reads are over. The transport's reader starts its wait for the
// connection's next response right after, while the attempt's caller is
// still being handed the end of the body, so the connection is disarmed
// here, before that wait, which is no read of this attempt's: it then
// costs no reading of the clock.
func (a *attempt) putIdleConn(error) {
	a.mu.Lock()
	if a.active && a.armed {
		a.conn.disarm(a)
		a.armed = false
	}
	a.mu.Unlock()
}

// poolExpired ends the call of an attempt still waiting for a connection at
// its due time; one whose due time is still to come sets the timer again for
// the rest of its wait.
func (a *attempt) poolExpired() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.timerSet = false
	if !a.active || a.got || a.cancel == nil {
		return // no attempt waiting
	}
	if left := time.Until(a.poolDue); left > 0 {
		a.pool.Reset(left)
		a.timerSet, a.timerDue = true, a.poolDue
		return
	}
	a.pooled = true
	a.cancel()
}

// poolTimedOut reports whether the attempt was ended because no connection
// came within pool_timeout.
func (a *attempt) poolTimedOut() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.pooled
}

// end disarms the connection and detaches the hooks. It reports whether the
// attempt may go back to the pool: not while the transport may still call
// WroteRequest (it does so after flushing the request, so a fast upstream's
// response can be read before), which would land on the next attempt.
func (a *attempt) end() (reusable bool) {
	a.mu.Lock()
	if a.armed {
		a.conn.disarm(a)
	}
	reusable = !a.pending
	a.active, a.got, a.conn, a.armed, a.cancel = false, false, nil, false, nil
	a.mu.Unlock()
	return reusable
}

// cut marks attempt a (still at gen) as ended by the read gap, with the
// error of the read it cut. It runs before the transport hears of that
// read: net/http sends a replayable request again, on another connection,
// when a reused one fails before any response, and would do so here,
// silently and with no read gap on the new connection. refuseResend stops
// that send.
func (a *attempt) cut(gen uint64, err error) {
	a.mu.Lock()
	if a.active && a.gen == gen {
		a.wasCut.Store(&err)
	}
	a.mu.Unlock()
}

// refuseResend wraps a transport's Proxy function, which net/http calls
// before each time it sends a request, the times it sends one again
// included: a request whose attempt the read gap cut gets that cut's error
// instead of a second send.
func refuseResend(proxy func(*http.Request) (*url.URL, error)) func(*http.Request) (*url.URL, error) {
	return func(r *http.Request) (*url.URL, error) {
		if a, ok := r.Context().Value(attemptKey{}).(*attempt); ok {
			if err := a.wasCut.Load(); err != nil {
				return nil, *err
			}
		}
		if proxy == nil {
			return nil, nil
		}
		return proxy(r)
	}
}
