package http

import (
	"bytes"
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/framework/egress"
	"github.com/jfastframework/jfast/framework/resilience"
	"github.com/jfastframework/jfast/internal/deadline"
)

// core is what every client of this package shares, whatever the shape of
// its calls (a path on one upstream, an absolute URL, an SDK's request through
// the RoundTripper): the settings, the transport with its gap deadlines and
// telemetry wrappers, the metrics, the observers, and the attempt loop that
// applies the deadline, retry, budget, breaker and bulkhead rules.
type core struct {
	up      Upstream
	origin  string      // an upstream's base_url origin; "" for a shared client
	header  http.Header // configured headers, canonical
	rt      http.RoundTripper
	raw     *http.Transport
	clock   resilience.Clock
	real    bool // clock is the time package's (see since)
	logger  *slog.Logger
	metrics *upstreamMetrics
	observe []CallObserver
	routes  *bounded[*resilience.Breaker] // breaker_key = "route": by origin and route; nil otherwise
	timing  *deadline.Timer               // the calls' deadlines; nil: context.WithDeadline's
	closed  atomic.Bool
}

// policy is the outbound policy the calls to one origin go through: one per
// upstream, one per origin of a shared client. breaker, budget and bulkhead
// are p's.
type policy struct {
	origin    string
	instances *egress.Instances // an upstream's instances; nil when base_url's host is the one
	p         *resilience.Policy
	breaker   *resilience.Breaker
	budget    *resilience.RetryBudget
	bulkhead  *resilience.Bulkhead
}

// newCore builds what the clients of u (every default filled) share, after
// errs, u's problems, are none. dial, when not nil, replaces the transport's
// dialer (the shared client's address guard); maxIdle is the transport's
// idle pool, across hosts.
func newCore(u Upstream, errs []framework.ConfigError, o clientOptions, dial dialFunc, maxIdle int) (*core, error) {
	if err := framework.ClientConfigError("http: upstream '"+u.Name+"'", errs); err != nil {
		return nil, err
	}
	clock := cmp.Or(o.clock, resilience.RealClock())
	logger := cmp.Or(o.logger, slog.New(slog.DiscardHandler))
	set := o.metrics
	if set == nil {
		set = newMetricSet()
		if o.registry != nil {
			if err := set.register(o.registry); err != nil {
				return nil, fmt.Errorf("http: upstream '%s': registering metrics: %w", u.Name, err)
			}
		}
	}
	c := &core{
		up:      u,
		header:  make(http.Header, len(u.Headers)),
		clock:   clock,
		real:    clock == resilience.RealClock(),
		logger:  logger.With("upstream", u.Name),
		metrics: set.forUpstream(u.Name),
		observe: o.observers,
	}
	if u.BreakerKey == KeyRoute {
		c.routes = newBounded[*resilience.Breaker](u.MaxRoutes, nil)
	}
	for k, v := range u.Headers {
		c.header.Set(k, v)
	}
	if traceKey != nil {
		c.timing = deadline.NewTimer()
	}
	c.raw = newTransport(u, dial, maxIdle)
	c.rt = c.raw
	for i := len(o.wrappers) - 1; i >= 0; i-- {
		c.rt = o.wrappers[i](u.Name, c.rt)
	}
	return c, nil
}

// newPolicy returns the policy of the calls to origin. name names its
// breaker, budget and bulkhead in errors and logs; onChange is the breaker's
// metrics hook.
func (c *core) newPolicy(name, origin string, onChange func(resilience.StateChange)) *policy {
	u := c.up
	o := resilience.PolicyOpts{
		Name: name, Config: u.PolicyConfig, Clock: c.clock,
		OnStateChange:  resilience.LogStateChanges(c.logger, "http", u.BreakerCoolDown, onChange),
		OnAttempt:      c.metrics.dep.Attempt,
		OnHedgeRefused: c.metrics.dep.HedgeRefused,
	}
	if c.timing != nil {
		o.WithDeadline = c.timing.WithDeadline
	}
	p := resilience.NewPolicy(o)
	return &policy{origin: origin, p: p, breaker: p.Breaker(), budget: p.Budget(), bulkhead: p.Bulkhead()}
}

// since returns the time from t to now on c's clock. On the real clock it
// reads the monotonic clock only, about half the cost of a reading of the
// time (the wall clock too), of which an attempt would otherwise take several.
func (c *core) since(t time.Time) time.Duration {
	if c.real {
		return time.Since(t)
	}
	return c.clock.Now().Sub(t)
}

// after returns the time now on c's clock, given t, an earlier reading of
// it: on the real clock t moved on by the monotonic time since (see since).
// Only differences of such times are used.
func (c *core) after(t time.Time) time.Time {
	if c.real {
		return t.Add(time.Since(t))
	}
	return c.clock.Now()
}

// attemptStart returns when attempt x begins, on the time package's clock
// (the pool timer and Jfast-Timeout-Ms are the transport's and the context's,
// on that clock whatever c's): on the real clock the call's start moved on
// by the monotonic time since.
func (c *core) attemptStart(x *exchange) time.Time {
	if !c.real {
		return time.Now()
	}
	if x.parent != nil {
		return c.after(x.parent.run.Start()) // a hedge's branch: the call is its parent's
	}
	return x.run.Start().Add(x.run.AttemptBegan()) // the loop read the clock as it began the attempt
}

// close makes later calls fail with UpstreamUnavailable and closes the idle
// connections.
func (c *core) close() {
	c.closed.Store(true)
	c.raw.CloseIdleConnections()
}

// exchange is one call as the attempt loop sees it.
type exchange struct {
	req     *http.Request // its context is the caller's
	header  http.Header   // the headers every attempt sends: this call's own map, never the caller's
	payload []byte        // a ServiceClient call's body, sent again by each attempt
	replay  bool          // a transport call whose body a retry gets from req.GetBody
	retry   bool          // the method and idempotency rules allow a retry
	resend  bool          // no retry, but an attempt that sent nothing (unsent) is made again
	stream  bool          // return the response with its body unread (the RoundTripper)
	open    bool          // stream: timeout ends at the response headers (WithOpenEndedResponse)
	sent    bool          // the first attempt was handed to the transport (which closes req.Body)
	reqBody *callerBody   // stream: a streamed req.Body, as the first attempt sends it; nil when none
	pol     *policy
	br      *resilience.Breaker
	dones   []func(int, int, error) // stream: the observers' ends, called when the body ends
	out     *framework.OutboundCall // the caller's, counting attempts; nil when none
	ia      instanceAttempt         // the instances of the attempts (pol.instances)

	// Hedging (resilience.Hedger): a branch is one attempt of the call
	// running beside others; parent is the call's exchange, whose busy
	// lists the instances of the branches in flight.
	parent *exchange
	mu     sync.Mutex
	busy   []*egress.Instance

	// What the attempts leave, for the call's result.
	c         *core
	run       resilience.Run
	last      *http.Response // the last response, of this attempt or an earlier one
	lastErr   error          // the last attempt's error
	headersAt time.Time
	bodyRead  time.Duration
	live      liveAttempt   // stream: the attempt whose response body is unread
	tooLarge  *bodyTooLarge // the last attempt's body was over max_response_bytes

	// What outlives the call, allocated apart from the exchange (which
	// goes back to a pool when the call returns): where send puts the body
	// it read (the last attempt's: only the last response is kept; nil: a
	// new Body), where call puts the RoundTripper's streamed body and the
	// call it ends (nil: a new one), and the first attempt's
	// Jfast-Timeout-Ms value (request), which the request's header holds.
	// newClientExchange and newStreamExchange allocate each kind's in one
	// allocation.
	body     *Body
	streamed *streamCall
	timeout  *timeoutValue

	// firstCtx is the context a client call's own request (core.do) was
	// made with: the first attempt fills it in and sends that request
	// itself, instead of a copy under a context of its own (a retry, a
	// hedge and an attempt on one of several instances still get theirs).
	// nil for a RoundTripper call, whose request is the caller's.
	firstCtx *attemptCtx
}

// streamCall is what a streamed call (the RoundTripper's) keeps after it
// returns its response: the body, and the call (its Run, moved here from
// the exchange), which the body ends.
type streamCall struct {
	body streamBody
	run  resilience.Run
}

// timeoutValue is the first attempt's Jfast-Timeout-Ms value: the header's
// value slice and the digits it points at, written once and never changed.
type timeoutValue struct {
	v   [1]string
	buf [12]byte
}

// exchanges holds the exchanges of calls that have returned. An exchange
// is most of a call's own allocation: taking it from a pool leaves the
// collector less to do per call.
var exchanges = sync.Pool{New: func() any { return new(exchange) }}

// newClientExchange returns an exchange for a client call (core.do), with
// the body its attempts read and the context of its request
// (requestContext). The call gives it back with release.
func newClientExchange() *exchange {
	x, kept := newExchange[clientCall]()
	x.body = &kept.body
	if traceKey != nil {
		x.firstCtx = &kept.ctx
	}
	return x
}

// clientCall is what a client call keeps after it returns its response:
// the body, and the context of the response's request.
type clientCall struct {
	body Body
	ctx  attemptCtx
}

// requestContext returns the context to make a client call's request with:
// x.firstCtx, which the first attempt fills in (over the call's context,
// under ctx), or ctx when there is none.
func (x *exchange) requestContext(ctx context.Context) context.Context {
	if x.firstCtx != nil {
		return x.firstCtx
	}
	return ctx
}

// firstIsOwn reports whether attempt n sends the call's own request: the
// first attempt of a client call, not a hedge's, not to one of several
// instances (which changes the request's URL).
func (x *exchange) firstIsOwn(n int) bool {
	return n == 1 && x.firstCtx != nil && x.parent == nil && x.pol.instances == nil
}

// newStreamExchange returns an exchange for a RoundTripper call, with its
// streamed body and room for its Run. The call gives it back with release.
func newStreamExchange() *exchange {
	x, kept := newExchange[streamCall]()
	x.streamed = kept
	return x
}

// newExchange returns an exchange from the pool, and what of the call
// outlives it (a T, and the Jfast-Timeout-Ms value) in one new allocation.
func newExchange[T any]() (*exchange, *T) {
	x := exchanges.Get().(*exchange)
	kept := new(struct {
		t  T
		tv timeoutValue
	})
	x.timeout = &kept.tv
	return x, &kept.t
}

// release returns an exchange to the pool once its call has returned: its
// attempts, hedges included, have all ended (the loop waits for a hedge it
// drops), and nothing the caller gets points into it (the response's body,
// the request's header and a streamed call's Run are in what
// newClientExchange and newStreamExchange allocated apart).
func (x *exchange) release() {
	*x = exchange{}
	exchanges.Put(x)
}

// call runs one call through its policy: the breaker, the bulkhead and the
// attempts (resilience.Run.Attempts, with x as the attempt and classifier).
// In stream mode the response returned still holds the call's bulkhead
// place, deadline and breaker ticket; its body (a *streamBody) gives them
// back when it ends.
func (c *core) call(ctx context.Context, x *exchange) (*http.Response, int, error) {
	m := c.metrics
	name := c.up.Name
	if c.closed.Load() {
		m.unavailable.Inc()
		return nil, 0, newUnavailable(name, errClosed)
	}
	opts := resilience.RunOpts{Breaker: x.br, OpenEnded: x.open, TimeoutCause: errTimeout, NoBreaker: x.pol.instances != nil}
	if !x.retry && !x.resend {
		opts.Attempts = 1
	}
	opts.Hedge = x.retry && !x.stream && hedgeable(x.req)
	run := &x.run
	if err := x.pol.p.Begin(ctx, run, opts); err != nil {
		return nil, 0, c.refused(ctx, err)
	}
	x.c = c
	run.Attempts(x)
	attempts := run.Sent() // not an attempt that found no instance to take it
	if x.tooLarge != nil {
		// The upstream answered: the breaker counts the answer its status
		// says. It wins over an earlier attempt's response, which the
		// upstream has since replaced with this one.
		run.EndAnswered(run.Outcome())
		m.tooLarge.Inc()
		return nil, attempts, newResponseTooLarge(name, c.up.MaxResponseBytes, x.tooLarge)
	}
	last := x.last
	if last != nil && x.lastErr == nil && x.live.a != nil {
		if last.StatusCode == http.StatusSwitchingProtocols {
			// The connection now belongs to the caller (an upgrade, such as
			// a WebSocket): the call is over.
			x.live.end()
			if in := x.ia.takeLive(); in != nil {
				in.Done()
			}
		} else {
			m.response.Inc()
			m.latency.Observe(x.headersAt.Sub(run.Start()).Seconds())
			run.EndTimeout() // an open-ended body is bounded by the read gap and the caller
			kept := x.streamed
			if kept == nil {
				kept = new(streamCall)
			}
			// The call moves to the body, which ends it: the exchange
			// goes back to its pool when the call returns.
			kept.run = *run
			sb := &kept.body
			*sb = streamBody{
				rc: last.Body, c: c, run: &kept.run, live: x.live, status: last.StatusCode, limit: c.up.MaxResponseBytes,
				headersAt: c.after(x.headersAt), attempts: attempts, dones: x.dones, inst: x.ia.takeLive(),
			}
			last.Body = sb
			x.dones = nil // called when the body ends
			return last, attempts, nil
		}
	}
	var err error
	if last == nil {
		err = c.noAttemptAnswered(ctx, x) // before End, which cancels the call's context
	}
	run.EndAnswered(run.Outcome())
	if last != nil {
		m.response.Inc()
		m.latency.Observe(x.headersAt.Sub(run.Start()).Seconds())
		m.bodyRead.Observe(x.bodyRead.Seconds())
		return last, attempts, nil
	}
	switch {
	case x.pol.instances != nil:
		openedBy(err, everyInstanceOpen(x.pol.instances))
	case x.br != nil:
		if s := x.br.Snapshot(); s.State == resilience.StateOpen { // End told the breaker of the call
			openedBy(err, s.RetryAfter)
		}
	}
	return nil, attempts, err
}

// noAttemptAnswered returns the error of an admitted call that got no
// response: every instance's breaker refused its attempts (nothing was
// sent), or the last attempt sent failed. (Its own function: the errors.As target would otherwise be
// a heap allocation of every call, answered or not.)
func (c *core) noAttemptAnswered(ctx context.Context, x *exchange) error {
	var oe *resilience.OpenError
	if x.pol.instances != nil && errors.As(x.lastErr, &oe) {
		c.metrics.open.Inc()
		return newCircuitOpen(c.up.Name, x.lastErr, oe.RetryAfter())
	}
	return c.noResponse(ctx, x.run.Context(), x.lastErr)
}

// everyInstanceOpen returns the soonest cool-down's end of the set's
// instances when every one's breaker is open, the wait before a call can be
// taken again, and 0 when any is not (one not called yet has none: closed)
// or the set is empty.
func everyInstanceOpen(set *egress.Instances) time.Duration {
	var soonest time.Duration
	for i, in := range set.List() {
		br := in.CurrentBreaker()
		if br == nil {
			return 0
		}
		s := br.Snapshot()
		if s.State != resilience.StateOpen {
			return 0
		}
		if i == 0 || s.RetryAfter < soonest {
			soonest = s.RetryAfter
		}
	}
	return soonest
}

// openedBy gives a call's timeout or unreachable error the cool-down left
// (wait, when positive) of the breaker its failure opened, or of the last of
// its instances' it opened: the call that opened it tells its caller the
// wait the calls it then refuses are told.
func openedBy(err error, wait time.Duration) {
	if wait <= 0 {
		return
	}
	switch e := err.(type) {
	case *UpstreamTimeout:
		e.RetryAfter = wait
	case *UpstreamUnavailable:
		e.RetryAfter = wait
	}
}

// refused returns the error of a call its policy did not admit: the breaker
// open, the bulkhead full, or the caller's context ended while it waited
// for a place.
func (c *core) refused(ctx context.Context, err error) error {
	m, name := c.metrics, c.up.Name
	var oe *resilience.OpenError
	switch {
	case errors.Is(err, resilience.ErrThrottled):
		m.throttled.Inc()
		return newThrottled(name, err)
	case errors.As(err, &oe):
		m.open.Inc()
		return newCircuitOpen(name, err, oe.RetryAfter())
	case errors.Is(err, resilience.ErrBulkheadFull):
		m.dep.Rejected()
		m.bulkhead.Inc()
		return newBulkheadFull(name, err)
	}
	return c.noResponse(ctx, ctx, err)
}

// Attempt makes attempt n of the call and classifies it: the loop's attempt
// and classifier (resilience.Attempter).
func (x *exchange) Attempt(callCtx context.Context, n int) resilience.Verdict {
	c := x.c
	if set := x.pol.instances; set != nil {
		if v, ok := x.ia.choose(c, set); !ok {
			x.failed(v.Err, false)
			return v
		}
		if p := x.parent; p != nil {
			p.mu.Lock()
			p.busy = append(p.busy, x.ia.inst)
			p.mu.Unlock()
		}
	}
	if x.out != nil {
		x.out.CountAttempt()
	}
	var (
		resp *http.Response
		hAt  time.Time
		end  time.Time // when the attempt ended: its body read, or its headers in for a stream
		next liveAttempt
		err  error
	)
	cancel := x.run.CancelFunc()
	if x.parent != nil {
		cancel = x.parent.run.CancelFunc()
	}
	if x.stream {
		resp, hAt, next, err = c.open(callCtx, cancel, x, n)
		end = hAt
	} else {
		resp, hAt, end, err = c.send(callCtx, cancel, x, n)
	}
	if err == nil {
		x.last, x.headersAt, x.bodyRead, x.live = resp, hAt, end.Sub(hAt), next
	}
	x.lastErr = err
	if big := asTooLarge(err); big != nil {
		// An answer, and the same request gets the same body: no retry.
		x.tooLarge = big
		return resilience.Verdict{Outcome: resilience.HTTPOutcome(big.status, nil)}
	}
	v := resilience.Verdict{Err: err, Outcome: outcome(finalResponse(resp, err), err), Overloaded: overloaded(finalResponse(resp, err))}
	if x.parent == nil {
		v.Ended = end.Sub(x.run.Start())
	}
	if c.retryable(callCtx, resp, err) && (x.retry || unsent(err)) {
		v.Wait, v.Asked, v.Retry = c.retryAfter(resp)
		if set := x.pol.instances; set != nil && (v.Outcome == resilience.Hang || !v.Retry) {
			v.Elsewhere = x.ia.another(c, set)
			// A Retry-After over max_retry_after speaks for this instance
			// (one draining, or overloaded): the retry goes to another,
			// untried and usable, after the backoff, without that wait.
			v.Retry = v.Retry || v.Elsewhere
		}
	}
	return v
}

// Report hears of each attempt once the loop decided what follows it.
func (x *exchange) Report(rec resilience.AttemptRecord) {
	x.ia.report(rec, x.live.a != nil)
	if rec.Stop == resilience.StopNone && x.live.a != nil {
		// A streamed response is not held open through the wait: it is
		// kept only if its body is small enough to hold in memory.
		x.last, x.live = x.live.retain(x.last), liveAttempt{}
	}
}

// hedgeable reports whether a call may be sent twice at once: a GET or a
// HEAD, or a request carrying an Idempotency-Key.
func hedgeable(req *http.Request) bool {
	return req.Method == http.MethodGet || req.Method == http.MethodHead || req.Header.Get("Idempotency-Key") != ""
}

// Branch returns one more attempt of the call, to run beside the others
// (resilience.Hedger). It prefers an instance neither tried nor in flight.
func (x *exchange) Branch() resilience.Attempter {
	b := &exchange{req: x.req, header: x.header, payload: x.payload, replay: x.replay, retry: x.retry, resend: x.resend,
		pol: x.pol, br: x.br, out: x.out, c: x.c, parent: x}
	if x.pol.instances != nil {
		x.mu.Lock()
		b.ia.tried = append(append(b.ia.triedBuf[:0], x.ia.tried...), x.busy...)
		x.mu.Unlock()
	}
	return b
}

// Keep makes branch a's attempt the call's (resilience.Hedger): a response
// replaces an earlier attempt's, an error is the call's last.
func (x *exchange) Keep(a resilience.Attempter) {
	b := a.(*exchange)
	if b.last != nil {
		x.last, x.headersAt, x.bodyRead = b.last, b.headersAt, b.bodyRead
	}
	x.failed(b.lastErr, b.sent)
	if b.tooLarge != nil {
		x.tooLarge = b.tooLarge
	}
	x.settle(b)
}

// failed records err, the error of an attempt that sent (sent) or sent
// nothing, as the call's last, unless the attempt sent nothing after one
// of the call's was sent: a retry whose every instance is now open (the
// attempts before it ejected them) leaves the call the error of the last
// attempt sent, an UpstreamUnavailable or UpstreamTimeout, not a
// CircuitOpen, which says nothing was sent.
func (x *exchange) failed(err error, sent bool) {
	if sent || !x.sent {
		x.lastErr = err
	}
}

// Drop lets go of branch a's attempt (resilience.Hedger): its response, if
// one came, is closed (its body was read, or its read cut by the
// cancellation, which closed the connection's body).
func (x *exchange) Drop(a resilience.Attempter) {
	b := a.(*exchange)
	if b.last != nil {
		_ = b.last.Body.Close()
	}
	x.settle(b)
}

// settle moves a finished branch's instance from busy to tried.
func (x *exchange) settle(b *exchange) {
	x.sent = x.sent || b.sent
	if x.pol.instances == nil {
		return
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	for _, in := range b.ia.tried {
		if i := slices.Index(x.busy, in); i >= 0 {
			x.busy = slices.Delete(x.busy, i, i+1)
		}
		if !slices.Contains(x.ia.tried, in) {
			if x.ia.tried == nil {
				x.ia.tried = x.ia.triedBuf[:0]
			}
			x.ia.tried = append(x.ia.tried, in)
		}
	}
}

// asTooLarge returns the *bodyTooLarge err is, or nil.
func asTooLarge(err error) *bodyTooLarge {
	if err == nil {
		return nil
	}
	var big *bodyTooLarge
	if errors.As(err, &big) {
		return big
	}
	return nil
}

// overloaded reports whether resp is the upstream refusing for load (429 or
// 503), which the adaptive throttle counts as not accepted.
func overloaded(resp *http.Response) bool {
	return resp != nil && (resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable)
}

// finalResponse returns the last attempt's response: nil when the last attempt failed
// (even if an earlier one had a response, which is still what the call
// returns).
func finalResponse(last *http.Response, lastErr error) *http.Response {
	if lastErr != nil {
		return nil
	}
	return last
}

// outcome classifies an attempt for the breaker with jfast's shared HTTP
// rule (resilience.HTTPOutcome). An attempt that failed because its
// caller's context ended first (cancelled, or its deadline sooner than
// timeout) is no evidence: the loop applies resilience.CutByCaller.
// One cut by timeout, read_timeout, connect_timeout or pool_timeout is a
// failure.
func outcome(resp *http.Response, err error) resilience.Outcome {
	if err != nil {
		switch _, body := err.(*RequestBodyError); {
		case body:
			return resilience.Ignore // the caller's body, not the upstream
		case errors.Is(err, ErrAddressNotAllowed):
			return resilience.Ignore // this client's own refusal
		case errors.Is(err, errPoolTimeout):
			// The pool timer cancels the call's context, which the shared
			// rule would read as the caller giving up: every connection
			// stayed busy for pool_timeout, the calls in flight unanswered.
			// A failure, not a hang: this attempt met no silence itself.
			return resilience.Failure
		}
	}
	status := 0
	if resp != nil {
		status = resp.StatusCode
	}
	return resilience.HTTPOutcome(status, err)
}

// retryable reports whether another attempt could fix this one: a connect
// error, a timeout or a dropped connection, or a 429, 502, 503 or 504. Never a
// 500 (the same request gets the same bug), never another 4xx (the caller's
// error), never a TLS verification failure, and never once the call's context
// has ended.
func (c *core) retryable(callCtx context.Context, resp *http.Response, err error) bool {
	if callCtx.Err() != nil {
		return false
	}
	if err != nil {
		if _, ok := err.(*RequestBodyError); ok {
			return false // the same body would be as late again
		}
		if errors.Is(err, ErrAddressNotAllowed) {
			return false
		}
		var certErr *tls.CertificateVerificationError
		var unknownCA x509.UnknownAuthorityError
		var hostErr x509.HostnameError
		return !errors.As(err, &certErr) && !errors.As(err, &unknownCA) && !errors.As(err, &hostErr)
	}
	switch resp.StatusCode {
	case http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return true
	}
	return false
}

// retryAfter reads the wait a retryable response asks for: its Retry-After
// exactly, when it has a valid one (asked); otherwise the loop's backoff
// decides. retry is false when Retry-After asks for more than
// max_retry_after (with instances, Attempt retries on another one then,
// when there is one untried).
func (c *core) retryAfter(resp *http.Response) (wait time.Duration, asked, retry bool) {
	if resp != nil {
		if v := resp.Header.Get("Retry-After"); v != "" {
			d, valid, tooLong := resilience.ParseRetryAfter(v, c.clock.Now(), c.up.MaxRetryAfter)
			if tooLong {
				return 0, false, false
			}
			if valid {
				return d, true, true
			}
		}
	}
	return 0, false, true
}

// noResponse turns the error of a call that got no response into its kind.
func (c *core) noResponse(ctx, callCtx context.Context, err error) error {
	name := c.up.Name
	if rb, ok := err.(*RequestBodyError); ok {
		return rb // the caller's: no upstream timeout or unavailability to count
	}
	switch {
	case errors.Is(ctx.Err(), context.Canceled):
		c.metrics.unavailable.Inc()
		return newUnavailable(name, fmt.Errorf("the caller cancelled the call: %w", err))
	case callCtx.Err() != nil || isTimeout(err):
		c.metrics.timeout.Inc()
		if errors.Is(context.Cause(callCtx), context.DeadlineExceeded) && !errors.Is(err, context.DeadlineExceeded) {
			err = fmt.Errorf("%w: %w", context.DeadlineExceeded, err)
		}
		return newTimeout(name, err)
	default:
		c.metrics.unavailable.Inc()
		return newUnavailable(name, err)
	}
}

// errTimeout ends an open-ended call (WithOpenEndedResponse) whose
// response headers did not arrive within timeout.
var errTimeout = fmt.Errorf("timeout passed before the response headers: %w", context.DeadlineExceeded)

func isTimeout(err error) bool {
	var te interface{ Timeout() bool }
	return errors.Is(err, errPoolTimeout) || errors.Is(err, context.DeadlineExceeded) ||
		(errors.As(err, &te) && te.Timeout())
}

// request returns attempt n's request, under actx (the call's context, with
// the attempt's trace hooks): the call's request with
// the attempt's body and the time it has left (framework.TimeoutHeader: the
// sooner of timeout and the caller's deadline, less what the call has
// spent by now, when the attempt began), so the upstream can stop when this
// service stops waiting.
func (c *core) request(actx context.Context, x *exchange, n int, now time.Time) (*http.Request, error) {
	r := x.req // its context is actx already (firstIsOwn)
	if !x.firstIsOwn(n) {
		r = x.req.WithContext(actx)
	}
	r.Header = x.header
	if x.ia.inst != nil {
		x.ia.target(r, x.req.URL)
	}
	if deadline, ok := actx.Deadline(); ok {
		ms := max(deadline.Sub(now).Milliseconds(), 0)
		if n == 1 && x.parent == nil {
			// The call's own value (x.timeout): written here once, never changed.
			t := x.timeout
			digits := strconv.AppendInt(t.buf[:0], ms, 10)
			t.v[0] = unsafe.String(&digits[0], len(digits))
			x.header[framework.TimeoutHeader] = t.v[:]
		} else {
			left := []string{strconv.FormatInt(ms, 10)}
			// The previous attempt's header may still be being written by
			// the transport: this attempt gets a copy.
			h := make(http.Header, len(x.header))
			for k, v := range x.header {
				h[k] = v
			}
			h[framework.TimeoutHeader] = left
			r.Header = h
		}
	}
	switch {
	case x.payload != nil:
		r.Body = io.NopCloser(bytes.NewReader(x.payload))
	case n > 1 && x.replay:
		body, err := x.req.GetBody()
		if err != nil {
			return nil, fmt.Errorf("getting the request body again for a retry: %w", err)
		}
		r.Body = body
	}
	return r, nil
}

// send makes one attempt and reads the whole response body, up to
// max_response_bytes, under the read gap deadline. It returns when the
// headers arrived and when the body was read (the attempt's end). The
// attempt runs under the call's context: a pool timeout ends the call
// (cancel).
func (c *core) send(callCtx context.Context, cancel context.CancelFunc, x *exchange, n int) (resp *http.Response, headersAt, end time.Time, err error) {
	a := attemptPool.Get().(*attempt)
	now := c.attemptStart(x)
	a.begin(cancel, c.up.PoolTimeout, now)
	var in *attemptCtx
	if x.firstIsOwn(n) {
		in = x.firstCtx
	}
	r, err := c.request(a.context(callCtx, in, x.out), x, n, now)
	if err != nil {
		a.end()
		end = c.after(now)
		return nil, end, end, err
	}
	x.sent = true
	resp, err = c.rt.RoundTrip(r)
	headersAt = c.after(now)
	if err != nil {
		pooled := a.poolTimedOut()
		if a.end() {
			attemptPool.Put(a)
		}
		if pooled {
			err = fmt.Errorf("%w: %w", errPoolTimeout, err)
		}
		return nil, headersAt, headersAt, err
	}
	b, err := readBody(resp, c.up.MaxResponseBytes)
	end = c.after(headersAt)
	if a.end() {
		attemptPool.Put(a)
	}
	if err != nil {
		var big *bodyTooLarge
		if errors.As(err, &big) {
			return nil, headersAt, end, err
		}
		return nil, headersAt, end, fmt.Errorf("reading the response body: %w", err)
	}
	// The exchange's body holds only the last response's: an earlier
	// attempt's response is dropped when this one is kept (exchange.Attempt).
	body := x.body
	if body == nil {
		body = new(Body)
	}
	*body = Body{b: b}
	body.r.Reset(b)
	resp.Body = body
	return resp, headersAt, end, nil
}

// readBody reads and closes resp's body, holding at most limit+1 bytes of it.
// A body longer than limit, or a Content-Length announcing one, is a
// *bodyTooLarge. Closing a body that was not read to its end makes the
// transport close the connection rather than pool it, so the rest of the body
// is never read.
func readBody(resp *http.Response, limit int64) ([]byte, error) {
	defer resp.Body.Close()
	if resp.Body == http.NoBody {
		return nil, nil
	}
	if resp.ContentLength > limit {
		return nil, &bodyTooLarge{status: resp.StatusCode, limit: limit, declared: resp.ContentLength}
	}
	most := limit + 1 // one byte past the limit tells a body of exactly limit bytes from a longer one
	if most <= 0 {
		most = math.MaxInt64
	}
	// A known length is read into one buffer of length+1 (the +1 leaves room
	// to see EOF without growing). Otherwise the buffer doubles from 512
	// bytes, never past most, so an endless body costs at most limit+1 bytes.
	size := int64(512)
	if n := resp.ContentLength; n >= 0 {
		size = n + 1
	}
	buf := make([]byte, 0, min(size, most))
	for {
		if len(buf) == cap(buf) {
			if int64(len(buf)) >= most {
				return nil, &bodyTooLarge{status: resp.StatusCode, limit: limit, declared: -1}
			}
			grown := make([]byte, len(buf), min(max(2*int64(cap(buf)), 512), most))
			copy(grown, buf)
			buf = grown
		}
		n, err := resp.Body.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			if int64(len(buf)) > limit { // the byte past the limit came with the EOF
				return nil, &bodyTooLarge{status: resp.StatusCode, limit: limit, declared: -1}
			}
			return buf, nil
		}
		if err != nil {
			return buf, err
		}
	}
}
