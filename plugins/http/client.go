package http

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/framework/resilience"
	"github.com/jfastframework/jfast/requestid"
)

// ServiceClient calls one upstream. It owns the upstream's connection pool,
// breaker, retry budget and bulkhead, which protect something only if every
// call to the upstream goes through the same client: take it once at boot
// ([Client]) or make one with [NewClient], never one per request. A
// ServiceClient is safe for concurrent use.
type ServiceClient struct {
	up       Upstream
	base     string
	header   http.Header // configured headers, canonical
	rt       http.RoundTripper
	raw      *http.Transport
	breaker  *resilience.Breaker
	bulkhead *resilience.Bulkhead
	budget   *resilience.RetryBudget
	backoff  resilience.Backoff
	clock    resilience.Clock
	metrics  *upstreamMetrics
	observe  []CallObserver
	closed   atomic.Bool
}

// NewClient returns a client for one upstream, for scripts and tests; a
// service takes its clients from the plugin with [Client]. Zero fields of u
// take their defaults (Retries too: use [NoRetries] for none); a missing or
// invalid BaseURL or a negative setting is an error. Close the client when
// done with it.
func NewClient(u Upstream, opts ...ClientOption) (*ServiceClient, error) {
	return newClient(u.withDefaults(), opts...)
}

// newClient builds a client from settings with every default filled.
func newClient(u Upstream, opts ...ClientOption) (*ServiceClient, error) {
	var o clientOptions
	for _, opt := range opts {
		opt(&o)
	}
	if errs := u.problems(); len(errs) > 0 {
		msgs := make([]string, len(errs))
		for i, e := range errs {
			msgs[i] = e.key + ": " + e.problem
		}
		return nil, fmt.Errorf("http: upstream '%s': %s", u.Name, strings.Join(msgs, "; "))
	}
	clock := o.clock
	if clock == nil {
		clock = resilience.RealClock()
	}
	logger := o.logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	set := o.metrics
	if set == nil {
		set = newMetricSet()
		if o.registry != nil {
			if err := set.register(o.registry); err != nil {
				return nil, fmt.Errorf("http: upstream '%s': registering metrics: %w", u.Name, err)
			}
		}
	}
	m := set.forUpstream(u.Name)

	c := &ServiceClient{
		up:      u,
		base:    strings.TrimSuffix(u.BaseURL, "/"),
		header:  make(http.Header, len(u.Headers)),
		clock:   clock,
		metrics: m,
		backoff: resilience.Backoff{Base: u.BackoffBase, Max: u.BackoffMax},
		observe: o.observers,
	}
	for k, v := range u.Headers {
		c.header.Set(k, v)
	}
	c.raw = newTransport(u)
	c.rt = c.raw
	for i := len(o.wrappers) - 1; i >= 0; i-- {
		c.rt = o.wrappers[i](u.Name, c.rt)
	}
	c.breaker = resilience.NewBreaker(u.BreakerConfig.Opts(u.Name, clock,
		resilience.LogStateChanges(logger.With("upstream", u.Name), "http", u.BreakerCoolDown, m.transition)))
	c.bulkhead = resilience.NewBulkhead(resilience.BulkheadOpts{
		Name: u.Name, MaxConcurrent: u.MaxConcurrent, Wait: u.BulkheadWait, Clock: clock,
	})
	c.budget = resilience.NewRetryBudget(resilience.RetryBudgetOpts{
		Ratio: u.RetryBudgetRatio, MinPerSecond: u.RetryBudgetMinPerSecond, Clock: clock,
	})
	return c, nil
}

// Upstream returns the client's settings, defaults filled in.
func (c *ServiceClient) Upstream() Upstream { return c.up }

// Breaker returns the upstream's breaker, for /ready and tests.
func (c *ServiceClient) Breaker() *resilience.Breaker { return c.breaker }

// Close closes the idle connections; calls made after Close fail with
// [UpstreamUnavailable]. Calls in flight finish.
func (c *ServiceClient) Close() error {
	c.closed.Store(true)
	c.raw.CloseIdleConnections()
	return nil
}

// Get calls GET path. See [ServiceClient.Do].
func (c *ServiceClient) Get(ctx context.Context, path string, opts ...CallOption) (*http.Response, error) {
	return c.Do(ctx, http.MethodGet, path, nil, opts...)
}

// Head calls HEAD path. See [ServiceClient.Do].
func (c *ServiceClient) Head(ctx context.Context, path string, opts ...CallOption) (*http.Response, error) {
	return c.Do(ctx, http.MethodHead, path, nil, opts...)
}

// Delete calls DELETE path. See [ServiceClient.Do].
func (c *ServiceClient) Delete(ctx context.Context, path string, opts ...CallOption) (*http.Response, error) {
	return c.Do(ctx, http.MethodDelete, path, nil, opts...)
}

// Options calls OPTIONS path. See [ServiceClient.Do].
func (c *ServiceClient) Options(ctx context.Context, path string, opts ...CallOption) (*http.Response, error) {
	return c.Do(ctx, http.MethodOptions, path, nil, opts...)
}

// Post calls POST path with body. A POST is retried only with an
// [IdempotencyKey] (or Retry(true)). See [ServiceClient.Do].
func (c *ServiceClient) Post(ctx context.Context, path string, body any, opts ...CallOption) (*http.Response, error) {
	return c.Do(ctx, http.MethodPost, path, body, opts...)
}

// Put calls PUT path with body. See [ServiceClient.Do].
func (c *ServiceClient) Put(ctx context.Context, path string, body any, opts ...CallOption) (*http.Response, error) {
	return c.Do(ctx, http.MethodPut, path, body, opts...)
}

// Patch calls PATCH path with body. A PATCH is retried only with an
// [IdempotencyKey] (or Retry(true)). See [ServiceClient.Do].
func (c *ServiceClient) Patch(ctx context.Context, path string, body any, opts ...CallOption) (*http.Response, error) {
	return c.Do(ctx, http.MethodPatch, path, body, opts...)
}

// Do calls method on the upstream's base_url followed by path ("/invoices/7",
// with a query if any; it must start with "/" or "?").
//
// body is nil, []byte (sent as application/octet-stream), string
// (text/plain; charset=utf-8), url.Values (a form) or any other value, sent as
// JSON (wrap a []byte or string in [JSON] to send it as JSON as is). Streaming
// bodies (io.Reader) are refused: a retry must be able to send the body again.
//
// The response is the one the upstream sent, whatever its status (a 404, a
// 500, the last 503 after the retries); its body has been read completely and
// can be read again (see [Body]); closing it is optional. Only a call that got
// no response at all, or one whose body was over max_response_bytes, returns
// an error, always an [UpstreamError] kind: [CircuitOpen], [BulkheadFull],
// [UpstreamTimeout], [UpstreamUnavailable] or [ResponseTooLarge].
// A body that cannot be encoded or a malformed path is a plain error and
// nothing is sent.
func (c *ServiceClient) Do(ctx context.Context, method, path string, body any, opts ...CallOption) (*http.Response, error) {
	payload, contentType, err := encodeBody(body)
	if err != nil {
		return nil, fmt.Errorf("http: upstream '%s': %w", c.up.Name, err)
	}
	if path != "" && path[0] != '/' && path[0] != '?' {
		return nil, fmt.Errorf("http: upstream '%s': path %q must start with / (it is appended to base_url)", c.up.Name, path)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, nil)
	if err != nil {
		return nil, fmt.Errorf("http: upstream '%s': %w", c.up.Name, err)
	}
	retry := safeMethod(method)
	c.setHeaders(ctx, req.Header, contentType, opts, &retry)
	if payload != nil {
		req.ContentLength = int64(len(payload))
		req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(payload)), nil }
	}

	var dones []func(int, int, error)
	for _, observe := range c.observe {
		var done func(int, int, error)
		ctx, done = observe(ctx, c.up.Name, method)
		if done != nil {
			dones = append(dones, done)
		}
	}
	resp, attempts, err := c.call(ctx, req, payload, retry)
	if len(dones) > 0 {
		status := 0
		if resp != nil {
			status = resp.StatusCode
		}
		for _, done := range dones {
			done(status, attempts, err)
		}
	}
	return resp, err
}

// setHeaders fills h in the order of docs/http.md: configured headers, the
// request ID, the forwarded bearer token, the idempotency key and the body's
// Content-Type, then the call's own headers, which win.
func (c *ServiceClient) setHeaders(ctx context.Context, h http.Header, contentType string, opts []CallOption, retry *bool) {
	for k, v := range c.header {
		h[k] = v
	}
	if id := requestid.FromContext(ctx); id != "" {
		h["X-Request-Id"] = []string{id}
	}
	if c.up.ForwardAuthorization {
		if tok := framework.BearerToken(ctx); tok != "" {
			h["Authorization"] = []string{"Bearer " + tok}
		}
	}
	if contentType != "" {
		h["Content-Type"] = []string{contentType}
	}
	forced := false
	for _, o := range opts {
		switch o.kind {
		case optIdempotencyKey:
			h["Idempotency-Key"] = []string{o.value}
			if !forced {
				*retry = true
			}
		case optRetry:
			*retry, forced = o.on, true
		case optHeader:
			h.Set(o.name, o.value)
		case optHeaders:
			for k, v := range o.header {
				h[http.CanonicalHeaderKey(k)] = v
			}
		}
	}
}

// safeMethod reports whether repeating method is safe without an idempotency
// key (RFC 9110 §9.2.2).
func safeMethod(m string) bool {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodPut, http.MethodDelete, http.MethodOptions, http.MethodTrace:
		return true
	}
	return false
}

// call runs the breaker, the bulkhead and the attempts of one call.
func (c *ServiceClient) call(ctx context.Context, req *http.Request, payload []byte, retry bool) (*http.Response, int, error) {
	m := c.metrics
	name := c.up.Name
	if c.closed.Load() {
		m.unavailable.Inc()
		return nil, 0, newUnavailable(name, errClosed)
	}
	start := c.clock.Now()
	deadline := start.Add(c.up.TotalTimeout)
	callerDeadline, hasCallerDeadline := ctx.Deadline()

	ticket, err := c.breaker.Allow()
	if err != nil {
		m.open.Inc()
		var oe *resilience.OpenError
		ra := time.Duration(0)
		if errors.As(err, &oe) {
			ra = oe.RetryAfter()
		}
		return nil, 0, newCircuitOpen(name, err, ra)
	}
	// own is total_timeout on the clock of context deadlines: it tells a call
	// cut by the caller's sooner deadline from one cut by ours.
	own := time.Now().Add(c.up.TotalTimeout)
	callCtx, cancel := context.WithDeadline(ctx, own)
	defer cancel()
	permit, err := c.bulkhead.Acquire(callCtx)
	if err != nil {
		ticket.Done(resilience.Ignore)
		if errors.Is(err, resilience.ErrBulkheadFull) {
			m.rejections.Inc()
			m.bulkhead.Inc()
			return nil, 0, newBulkheadFull(name, err)
		}
		return nil, 0, c.noResponse(ctx, callCtx, err)
	}
	defer permit.Release()

	c.budget.RecordCall()
	var (
		last      *http.Response
		lastErr   error
		headersAt time.Time
		bodyRead  time.Duration
		attempts  int
		cut       bool // the last attempt failed because the caller's context ended
		tooLarge  *bodyTooLarge
	)
	for {
		attempts++
		m.attempts.Inc()
		aStart := c.clock.Now()
		resp, hAt, read, err := c.send(callCtx, req, payload)
		if err == nil {
			last, headersAt, bodyRead = resp, hAt, read
		}
		lastErr = err
		if errors.As(err, &tooLarge) {
			// The upstream answered, so this is no breaker evidence (like a
			// 500), and the same request gets the same body: no retry. It
			// wins over an earlier attempt's response, which the upstream
			// has since replaced with this one.
			ticket.Done(resilience.Ignore)
			m.tooLarge.Inc()
			return nil, attempts, newResponseTooLarge(name, c.up.MaxResponseBytes, tooLarge)
		}
		// Decided now, not after a backoff the caller may cut: a refused
		// connection stays evidence if the caller's deadline ends the wait.
		cut = err != nil && resilience.CutByCaller(ctx, own)
		if !retry || attempts > c.up.Retries || !c.retryable(callCtx, resp, err) {
			break
		}
		wait, ok := c.waitBefore(resp, attempts)
		if !ok {
			break // Retry-After asks for more than max_retry_after
		}
		now := c.clock.Now()
		left := deadline.Sub(now)
		if hasCallerDeadline {
			left = min(left, time.Until(callerDeadline))
		}
		if wait+now.Sub(aStart) >= left {
			break // the retry could not finish before the deadline
		}
		if !c.budget.TryRetry() {
			m.refusals.Inc()
			break
		}
		m.retries.Inc()
		if c.clock.Sleep(callCtx, wait) != nil {
			break
		}
	}

	ticket.Done(outcome(finalResponse(last, lastErr), lastErr, cut))
	if last != nil {
		m.response.Inc()
		m.latency.Observe(headersAt.Sub(start).Seconds())
		m.bodyRead.Observe(bodyRead.Seconds())
		return last, attempts, nil
	}
	return nil, attempts, c.noResponse(ctx, callCtx, lastErr)
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

// outcome classifies the final attempt for the breaker with jfast's shared
// HTTP rule (resilience.HTTPOutcome): transport errors, timeouts, 502, 503 and
// 504 are failures; a 500 (the upstream is up, with a bug) and a 429 (it asks
// for calm, and an open breaker would turn that into an outage) are no
// evidence; anything else is a success. An attempt that failed because its
// caller's context ended first (cancelled, or its deadline sooner than
// total_timeout: resilience.CutByCaller) is no evidence either; one cut by
// total_timeout, read_timeout or connect_timeout is a failure.
func outcome(resp *http.Response, err error, cutByCaller bool) resilience.Outcome {
	if err != nil && cutByCaller {
		return resilience.Ignore
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
func (c *ServiceClient) retryable(callCtx context.Context, resp *http.Response, err error) bool {
	if callCtx.Err() != nil {
		return false
	}
	if err != nil {
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

// waitBefore returns the wait before retry n (1-based): the response's
// Retry-After exactly, when it has a valid one, else full-jitter backoff. ok
// is false when Retry-After asks for more than max_retry_after.
func (c *ServiceClient) waitBefore(resp *http.Response, n int) (time.Duration, bool) {
	if resp != nil {
		if v := resp.Header.Get("Retry-After"); v != "" {
			d, valid, tooLong := resilience.ParseRetryAfter(v, c.clock.Now(), c.up.MaxRetryAfter)
			if tooLong {
				return d, false
			}
			if valid {
				return d, true
			}
		}
	}
	return c.backoff.Delay(n), true
}

// noResponse turns the error of a call that got no response into its kind.
func (c *ServiceClient) noResponse(ctx, callCtx context.Context, err error) error {
	name := c.up.Name
	switch {
	case errors.Is(ctx.Err(), context.Canceled):
		c.metrics.unavailable.Inc()
		return newUnavailable(name, fmt.Errorf("the caller cancelled the call: %w", err))
	case callCtx.Err() != nil || isTimeout(err):
		c.metrics.timeout.Inc()
		if callCtx.Err() != nil && !errors.Is(err, context.DeadlineExceeded) {
			err = fmt.Errorf("%w: %w", context.DeadlineExceeded, err)
		}
		return newTimeout(name, err)
	default:
		c.metrics.unavailable.Inc()
		return newUnavailable(name, err)
	}
}

func isTimeout(err error) bool {
	var te interface{ Timeout() bool }
	return errors.Is(err, errPoolTimeout) || errors.Is(err, context.DeadlineExceeded) ||
		(errors.As(err, &te) && te.Timeout())
}

// send makes one attempt and reads the whole response body, up to
// max_response_bytes, under the read gap deadline. It returns when the
// headers arrived and how long the body took to read.
func (c *ServiceClient) send(callCtx context.Context, req *http.Request, payload []byte) (*http.Response, time.Time, time.Duration, error) {
	actx, cancel := context.WithCancelCause(callCtx)
	defer cancel(nil)
	a := attemptPool.Get().(*attempt)
	a.begin(cancel, c.up.PoolTimeout)
	r := req.WithContext(httptrace.WithClientTrace(actx, &a.trace))
	if payload != nil {
		r.Body = io.NopCloser(bytes.NewReader(payload))
	}
	resp, err := c.rt.RoundTrip(r)
	headersAt := c.clock.Now()
	if err != nil {
		if a.end() {
			attemptPool.Put(a)
		}
		if cause := context.Cause(actx); errors.Is(cause, errPoolTimeout) {
			err = fmt.Errorf("%w: %w", errPoolTimeout, err)
		}
		return nil, headersAt, 0, err
	}
	b, err := readBody(resp, c.up.MaxResponseBytes)
	read := c.clock.Now().Sub(headersAt)
	if a.end() {
		attemptPool.Put(a)
	}
	if err != nil {
		var big *bodyTooLarge
		if errors.As(err, &big) {
			return nil, headersAt, read, err
		}
		return nil, headersAt, read, fmt.Errorf("reading the response body: %w", err)
	}
	resp.Body = &Body{b: b, r: *bytes.NewReader(b)}
	return resp, headersAt, read, nil
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

// Body is the body of a response the client returns: read completely before
// the call returned, so reading it needs no network and cannot time out. It
// can be read again: Close rewinds it, and Bytes returns it whole.
type Body struct {
	b []byte
	r bytes.Reader
}

// Read reads from the body.
func (b *Body) Read(p []byte) (int, error) { return b.r.Read(p) }

// Seek implements io.Seeker.
func (b *Body) Seek(offset int64, whence int) (int64, error) { return b.r.Seek(offset, whence) }

// Close rewinds the body, so it can be read again. It never fails.
func (b *Body) Close() error {
	b.r.Reset(b.b)
	return nil
}

// Bytes returns the whole body, however much of it was read.
func (b *Body) Bytes() []byte { return b.b }

// BodyBytes returns the whole body of a response the client returned.
func BodyBytes(resp *http.Response) []byte {
	if b, ok := resp.Body.(*Body); ok {
		return b.b
	}
	return nil
}

// DecodeJSON decodes the whole body of a response the client returned into v.
func DecodeJSON(resp *http.Response, v any) error {
	if err := json.Unmarshal(BodyBytes(resp), v); err != nil {
		return fmt.Errorf("http: decoding the response body of %s: %w", resp.Request.URL.Path, err)
	}
	return nil
}

// JSON marks a value to send as a JSON body. Any value that is not nil,
// []byte, string or url.Values is sent as JSON anyway; JSON is for a []byte or
// string that already holds JSON text, sent as is with Content-Type
// application/json.
type JSON struct{ Value any }

// encodeBody returns the bytes and Content-Type of a call's body.
func encodeBody(body any) ([]byte, string, error) {
	switch b := body.(type) {
	case nil:
		return nil, "", nil
	case []byte:
		return b, "application/octet-stream", nil
	case string:
		return []byte(b), "text/plain; charset=utf-8", nil
	case url.Values:
		return []byte(b.Encode()), "application/x-www-form-urlencoded", nil
	case JSON:
		switch raw := b.Value.(type) {
		case []byte:
			return raw, "application/json", nil
		case string:
			return []byte(raw), "application/json", nil
		}
		return encodeJSON(b.Value)
	case io.Reader:
		return nil, "", errors.New("streaming bodies are not supported: pass the bytes, so a retry can send them again")
	}
	return encodeJSON(body)
}

func encodeJSON(v any) ([]byte, string, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, "", fmt.Errorf("encoding the JSON body: %w", err)
	}
	return b, "application/json", nil
}
