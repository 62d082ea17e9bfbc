package http

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/framework/egress"
	"github.com/jfastframework/jfast/framework/resilience"
	"github.com/jfastframework/jfast/requestid"
)

// The RoundTripper form of the policies, for code that builds its own
// requests: an SDK that takes an *http.Client (aws-sdk-go-v2, openai-go,
// Stripe), a reverse proxy (httputil.ReverseProxy.Transport). Each RoundTrip
// is one call: the breaker is asked once, the call holds a bulkhead place,
// the deadlines apply, and a failed attempt is retried by the same rules as
// ServiceClient.Do. Unlike Do, the response body is streamed: the call stays
// in flight (its bulkhead place, its deadline, the read gap on its
// connection) until the body is read to its end or closed, and the breaker
// learns the call's outcome then.

// Transport returns the upstream's policies as an http.RoundTripper, for an
// SDK or a reverse proxy: every request it is given must be for the
// upstream's origin (the scheme, host and port of base_url); one for another
// origin is refused with an error and nothing is sent. The RoundTripper shares
// this client's breaker, retry budget, bulkhead and connection pool. See
// docs/http.md, "The policies as a RoundTripper".
func (c *ServiceClient) Transport() http.RoundTripper { return c.transport }

// HTTPClient returns an *http.Client whose transport is [ServiceClient.Transport]
// and which never follows redirects (a 3xx comes back as is, so a credential
// cannot follow it to another host). It has no Timeout of its own: the
// upstream's deadlines apply to every request.
func (c *ServiceClient) HTTPClient() *http.Client {
	return &http.Client{Transport: c.transport, CheckRedirect: noRedirects}
}

func noRedirects(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

// upstreamTransport is a ServiceClient's RoundTripper.
type upstreamTransport struct{ c *ServiceClient }

// RoundTrip implements http.RoundTripper.
func (t *upstreamTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	c := t.c
	if req.URL == nil {
		closeRequestBody(req)
		return nil, fmt.Errorf("http: upstream '%s': the request has no URL", c.up.Name)
	}
	if !c.sameOrigin(req.URL) {
		closeRequestBody(req)
		return nil, fmt.Errorf("http: upstream '%s' is %s: its transport refuses a request to %s (a shared client, [plugin.http.shared.<name>], takes any origin)", c.up.Name, c.pol.origin, originOf(req.URL))
	}
	out := framework.OutboundCallOf(req.Context())
	return c.roundTrip(req, out, c.pol, c.breakerFor(c.pol, routeOf(out)))
}

// routeOf is the route out names, or "" (none, or no OutboundCall).
func routeOf(out *framework.OutboundCall) string {
	if out == nil {
		return ""
	}
	return out.Route
}

// roundTrip makes one call for an SDK's request through pol and br; out is
// the request's framework.OutboundCall, or nil.
func (c *core) roundTrip(req *http.Request, out *framework.OutboundCall, pol *policy, br *resilience.Breaker) (*http.Response, error) {
	ctx := req.Context()
	x := newStreamExchange()
	x.pol, x.br, x.stream, x.open, x.out = pol, br, true, framework.OpenEndedResponse(ctx), out
	x.retry, x.replay = transportRetry(req)
	x.resend = !x.retry && (req.Body == nil || req.Body == http.NoBody || x.replay)
	if req.Body != nil && req.Body != http.NoBody && req.GetBody == nil {
		// A streamed body: the transport may wait on the caller for it.
		x.reqBody = &callerBody{rc: req.Body}
	}
	for _, observe := range c.observe {
		var done func(int, int, error)
		ctx, done = observe(ctx, c.up.Name, req.Method)
		if done != nil {
			x.dones = append(x.dones, done)
		}
	}
	if out != nil && out.OwnedHeader {
		x.req, x.header = req, c.addOutboundHeader(ctx, req.Header)
	} else {
		x.req, x.header = req, c.outboundHeader(ctx, req.Header)
	}
	resp, attempts, err := c.call(ctx, x)
	sent, dones := x.sent, x.dones
	x.release()
	if !sent {
		closeRequestBody(req) // a RoundTripper closes the body, even when it sends nothing
	}
	if len(dones) > 0 { // not handed to the streamed body
		status := 0
		if resp != nil {
			status = resp.StatusCode
		}
		for _, done := range dones {
			done(status, attempts, err)
		}
	}
	if resp != nil {
		resp.Request = req
	}
	return resp, err
}

// WithOpenEndedResponse marks a request for the RoundTripper (HTTPClient,
// Transport) as one whose response may last as long as it keeps coming: a
// stream of server-sent events, a long download through a proxy. For such a
// request timeout bounds the call until the response headers arrive
// (attempts, retries and their waits); the body is then bounded by the
// read_timeout gap, the caller's context and max_response_bytes only, and no
// Jfast-Timeout-Ms is sent unless the caller's context has a deadline. The
// call still holds its bulkhead place until the body ends. It is
// framework.ContextWithOpenEndedResponse.
func WithOpenEndedResponse(ctx context.Context) context.Context {
	return framework.ContextWithOpenEndedResponse(ctx)
}

// transportRetry applies the retry rules to a request built by someone else:
// a retry must be able to send the body again (GetBody, which
// http.NewRequest sets for in-memory bodies), and the method must be safe to
// repeat or the request must carry an Idempotency-Key.
func transportRetry(req *http.Request) (retry, replay bool) {
	hasBody := req.Body != nil && req.Body != http.NoBody
	replay = hasBody && req.GetBody != nil
	if hasBody && !replay {
		return false, false
	}
	if safeMethod(req.Method) {
		return true, replay
	}
	return req.Header.Get("Idempotency-Key") != "", replay
}

// outboundHeader returns a copy of h with what travels with every call added
// where the request does not set it already: the configured headers, the
// request ID and the forwarded bearer token. The request's own headers win,
// as per-call headers do in ServiceClient.Do.
func (c *core) outboundHeader(ctx context.Context, in http.Header) http.Header {
	h := make(http.Header, len(in)+len(c.header)+3)
	for k, v := range in {
		h[k] = v
	}
	return c.addOutboundHeader(ctx, h)
}

// addOutboundHeader adds to h, in place, what outboundHeader adds to its
// copy, and returns h. It is for a header that belongs to the call alone
// (framework.OutboundCall.OwnedHeader).
func (c *core) addOutboundHeader(ctx context.Context, h http.Header) http.Header {
	for k, v := range c.header {
		if _, ok := h[k]; !ok {
			h[k] = v
		}
	}
	if _, ok := h["X-Request-Id"]; !ok {
		if id := requestid.FromContext(ctx); id != "" {
			h["X-Request-Id"] = []string{id}
		}
	}
	if c.up.ForwardAuthorization {
		if _, ok := h["Authorization"]; !ok {
			if tok := framework.BearerToken(ctx); tok != "" {
				h["Authorization"] = []string{"Bearer " + tok}
			}
		}
	}
	return h
}

func closeRequestBody(req *http.Request) {
	if req.Body != nil {
		_ = req.Body.Close()
	}
}

// sameOrigin reports whether u is for the upstream's origin, without
// building u's origin string (this runs on every request).
func (c *ServiceClient) sameOrigin(u *url.URL) bool {
	port := u.Port()
	if port == "" {
		port = defaultPort(u.Scheme)
	}
	return strings.EqualFold(u.Scheme, c.scheme) && strings.EqualFold(u.Hostname(), c.host) && port == c.port
}

// defaultPort returns the port a URL of scheme means when it names none.
func defaultPort(scheme string) string {
	switch {
	case strings.EqualFold(scheme, "http"):
		return "80"
	case strings.EqualFold(scheme, "https"):
		return "443"
	}
	return ""
}

// originOf returns u's origin as "scheme://host:port", in lower case, with
// the scheme's default port written out, so "http://Billing" and
// "http://billing:80" are one origin.
func originOf(u *url.URL) string {
	scheme := strings.ToLower(u.Scheme)
	port := u.Port()
	if port == "" {
		port = defaultPort(scheme)
	}
	return scheme + "://" + net.JoinHostPort(strings.ToLower(u.Hostname()), port)
}

// open makes one attempt of a streamed call: it returns the response with its
// body unread and the attempt still running (its gap deadline armed, its
// context alive) until the caller ends it.
func (c *core) open(callCtx context.Context, cancel context.CancelFunc, x *exchange, n int) (*http.Response, time.Time, liveAttempt, error) {
	a := attemptPool.Get().(*attempt)
	now := c.attemptStart(x)
	a.begin(cancel, c.up.PoolTimeout, now)
	live := liveAttempt{a: a}
	r, err := c.request(a.context(callCtx, nil, x.out), x, n, now)
	if err != nil {
		live.end()
		return nil, c.after(now), liveAttempt{}, err
	}
	x.sent = true
	body := x.reqBody
	if n > 1 {
		body = nil // a retry's body is GetBody's, held in memory
	}
	if body != nil {
		body.ctx = callCtx
		r.Body = body
	}
	var interrupt func()
	if x.out != nil {
		interrupt = x.out.InterruptBody
	}
	stop := body.interruptWhenEnded(interrupt)
	resp, err := c.rt.RoundTrip(r)
	stop()
	headersAt := c.after(now)
	if err != nil {
		pooled := a.poolTimedOut()
		live.end()
		if body != nil {
			if blamed := body.blame(c.up.Name, x.req.Context(), err); blamed != nil {
				return nil, headersAt, liveAttempt{}, blamed
			}
		}
		if pooled {
			err = fmt.Errorf("%w: %w", errPoolTimeout, err)
		}
		return nil, headersAt, liveAttempt{}, err
	}
	if resp.Body != http.NoBody && resp.ContentLength > c.up.MaxResponseBytes {
		_ = resp.Body.Close()
		live.end()
		return nil, headersAt, liveAttempt{}, &bodyTooLarge{status: resp.StatusCode, limit: c.up.MaxResponseBytes, declared: resp.ContentLength}
	}
	return resp, headersAt, live, nil
}

// liveAttempt is a streamed attempt whose response body is still being read
// (a value: the zero liveAttempt is none).
type liveAttempt struct {
	a *attempt
}

// end disarms the connection's gap deadline and detaches the attempt.
func (l liveAttempt) end() {
	if l.a.end() {
		attemptPool.Put(l.a)
	}
}

// retainLimit is the largest body of a retryable response (a 429, 502, 503
// or 504: an error page) a streamed call keeps in memory through the wait
// before its retry, so that it can still return it if the retry gets no
// response.
const retainLimit = 64 << 10

// retain ends a streamed attempt whose response will be retried: it reads the
// body, if it is at most retainLimit bytes, and returns the response with the
// body in memory; a longer or broken body is dropped (nil).
func (l liveAttempt) retain(resp *http.Response) *http.Response {
	b, err := io.ReadAll(io.LimitReader(resp.Body, retainLimit+1))
	_ = resp.Body.Close()
	l.end()
	if err != nil || len(b) > retainLimit {
		return nil
	}
	body := &Body{b: b}
	body.r.Reset(b)
	resp.Body = body
	return resp
}

// streamBody is the body of a response the RoundTripper returned. The call
// it ends is still in flight: reading it to its end, a read error or Close
// releases the bulkhead place, ends the call's deadline and attempt, and
// gives the breaker the call's outcome.
type streamBody struct {
	rc        io.ReadCloser
	c         *core
	run       *resilience.Run // the call, ended by finish
	live      liveAttempt
	status    int
	limit     int64
	n         int64
	headersAt time.Time
	attempts  int
	dones     []func(int, int, error)
	inst      *egress.Instance // the instance the body comes from (an upstream's instances)
	done      atomic.Bool
}

// Read reads the body. Past max_response_bytes it fails with a
// *ResponseTooLarge; a failed read is an *UpstreamTimeout or an
// *UpstreamUnavailable wrapping the cause.
func (b *streamBody) Read(p []byte) (int, error) {
	if b.done.Load() {
		return b.rc.Read(p) // io.EOF after the end; an error after Close
	}
	if rest := b.limit + 1 - b.n; int64(len(p)) > rest {
		p = p[:rest]
	}
	k, err := b.rc.Read(p)
	b.n += int64(k)
	if b.n > b.limit {
		// The byte past the cap: the body is longer than max_response_bytes.
		k -= int(b.n - b.limit)
		big := &bodyTooLarge{status: b.status, limit: b.limit, declared: -1}
		b.c.metrics.tooLarge.Inc()
		b.finish(resilience.HTTPOutcome(b.status, nil), big)
		return k, newResponseTooLarge(b.c.up.Name, b.limit, big)
	}
	switch {
	case err == io.EOF:
		b.finish(resilience.HTTPOutcome(b.status, nil), nil)
	case err != nil:
		err = b.readError(err)
		o := resilience.Failure
		if resilience.CutByCaller(b.run.Caller(), b.run.Own()) {
			o = resilience.Ignore
		}
		b.finish(o, err)
	}
	return k, err
}

// Close closes the body and ends the call; its outcome is the response's
// status.
func (b *streamBody) Close() error {
	err := b.rc.Close()
	b.finish(resilience.HTTPOutcome(b.status, nil), nil)
	return err
}

// readError turns a failed body read into an UpstreamError kind.
func (b *streamBody) readError(err error) error {
	name := b.c.up.Name
	err = fmt.Errorf("reading the response body: %w", err)
	switch {
	case errors.Is(b.run.Caller().Err(), context.Canceled):
		return newUnavailable(name, fmt.Errorf("the caller cancelled the call: %w", err))
	case b.run.Context().Err() != nil || isTimeout(err):
		if b.run.Context().Err() != nil && !errors.Is(err, context.DeadlineExceeded) {
			err = fmt.Errorf("%w: %w", context.DeadlineExceeded, err)
		}
		return newTimeout(name, err)
	}
	return newUnavailable(name, err)
}

// finish ends the call once.
func (b *streamBody) finish(o resilience.Outcome, err error) {
	if !b.done.CompareAndSwap(false, true) {
		return
	}
	b.live.end()
	if b.inst != nil {
		b.inst.Done()
	}
	b.run.End(o)
	b.c.metrics.bodyRead.Observe(b.c.since(b.headersAt).Seconds())
	status := b.status
	if err != nil {
		status = 0
	}
	for _, done := range b.dones {
		done(status, b.attempts, err)
	}
}

// RequestBodyError is a RoundTripper call that failed on its request body,
// not on the upstream: an attempt ended (the call's timeout, the caller's
// deadline) while the transport was waiting for the next bytes of a streamed body (a reverse proxy's client uploading slowly),
// or the body's Read failed. An upstream cannot answer a request it has not
// had whole, so the call says nothing about it: the breaker and the
// adaptive throttle do not count it, and it is not retried.
//
// Err is the body's own read error when its Read failed (a
// *framework.BodyReadError for a request body the framework serves: 408 or
// 400; an *http.MaxBytesError: 413), otherwise a *framework.BodyReadError
// with Status 408 (the body did not arrive in time), so problem.From
// answers the client in its own terms. A body the upstream stops reading is
// no RequestBodyError: the transport is then blocked writing to the
// upstream's connection, not waiting on the caller, and the write gap
// (write_timeout) or the call's timeout that cuts it is the upstream's
// failure.
type RequestBodyError struct {
	// Upstream is the upstream's name, as configured.
	Upstream string
	// Err is the body's read error, or the 408 *framework.BodyReadError
	// wrapping what ended the attempt while the body was awaited.
	Err error
}

// Error names the upstream and the cause.
func (e *RequestBodyError) Error() string {
	return "http: upstream '" + e.Upstream + "': the request body failed: " + e.Err.Error()
}

// Unwrap returns the cause.
func (e *RequestBodyError) Unwrap() error { return e.Err }

// callerBody is a streamed request body as the transport reads it. It
// records whether the transport was waiting on the caller (in Read) when
// the call's context ended, and a Read that failed: an attempt that fails
// then is the caller's (RequestBodyError). Once the call's context has
// ended, a Read fails as soon as the bytes it waited for arrive: net/http
// writes a body of known length through a 4 KiB buffer, so a write to the
// closed connection fails only when that fills, and RoundTrip, which waits
// for its writer, would otherwise go on reading a trickled body to its end
// (or to the caller's read deadline) for a call that is over.
type callerBody struct {
	rc      io.ReadCloser
	ctx     context.Context // the call's; set before the transport reads
	reading atomic.Bool     // a Read is waiting on the caller now
	late    atomic.Bool     // a Read was waiting on the caller when ctx ended
	failed  atomic.Pointer[error]
	// interrupt ends a Read waiting on the caller, set before the
	// transport reads (interruptWhenEnded); nil when the caller gave none.
	interrupt func()
	ended     atomic.Bool // a Read returned the body's end
}

// errCallEnded ends the read of a request body whose call is over.
var errCallEnded = errors.New("http: the call ended while its request body was being read")

func (b *callerBody) Read(p []byte) (int, error) {
	b.reading.Store(true)
	if b.interrupt != nil && b.ctx.Err() != nil && !b.ended.Load() {
		// Past the call's end, and interruptWhenEnded saw no Read
		// waiting: interrupted first, the Read ends at once, with the
		// body's end when it has come (net/http then clears the read
		// deadline to hear the client go away), or with the read
		// deadline's error when the caller holds the rest back.
		b.interrupt()
	}
	n, err := b.rc.Read(p)
	if err == io.EOF {
		b.ended.Store(true)
	}
	b.reading.Store(false)
	switch {
	case err != nil && err != io.EOF:
		b.failed.CompareAndSwap(nil, &err)
	case err == nil && b.ctx.Err() != nil:
		b.late.Store(true)
		err = errCallEnded
	}
	return n, err
}

func (b *callerBody) Close() error { return b.rc.Close() }

// interruptWhenEnded arranges for interrupt (the call's
// framework.OutboundCall.InterruptBody) to be called if the call's context
// ends while a Read waits on the caller, and returns what stops that,
// called once RoundTrip has returned: it waits for an interrupt already
// under way, so none reaches the caller's connection after the call (a
// keep-alive connection may be reading its next request by then). b may be
// nil, interrupt too.
//
// A Read that hits the body's end as the context ends may still be
// interrupted: net/http then reads the connection to hear the client go
// away, that read fails, and the request's context ends, on a call that
// failed anyway (its context ended): the client gets that call's failure
// as one whose client left.
func (b *callerBody) interruptWhenEnded(interrupt func()) (stop func()) {
	if b == nil || interrupt == nil {
		return func() {}
	}
	b.interrupt = interrupt
	done := make(chan struct{})
	stopAfter := context.AfterFunc(b.ctx, func() {
		defer close(done)
		// A Read that begins after this sees the context ended itself.
		if b.reading.Load() && !b.ended.Load() {
			interrupt()
		}
	})
	return func() {
		if !stopAfter() {
			<-done
		}
	}
}

// blame returns the *RequestBodyError of an attempt that failed with err
// while the transport waited on the body, or on a Read of it that failed;
// nil when the attempt failed on the upstream, and when the caller
// cancelled the call (it went away: that is no late body).
func (b *callerBody) blame(upstream string, caller context.Context, err error) error {
	if f := b.failed.Load(); f != nil {
		return &RequestBodyError{Upstream: upstream, Err: *f}
	}
	if !b.reading.Load() && !b.late.Load() || errors.Is(caller.Err(), context.Canceled) {
		return nil
	}
	return &RequestBodyError{Upstream: upstream, Err: &framework.BodyReadError{Status: http.StatusRequestTimeout,
		Err: fmt.Errorf("the call ended while the request body was awaited (%w): %w", os.ErrDeadlineExceeded, err)}}
}
