package http

import (
	"context"
	"log/slog"
	"net/http"
	"net/netip"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/framework/resilience"
)

// CallOption changes one call: [IdempotencyKey], [Retry], [Header], [Headers],
// [Route].
// Options are values, so passing them allocates nothing.
type CallOption struct {
	kind   callOptionKind
	name   string
	value  string
	on     bool
	header http.Header
}

type callOptionKind uint8

const (
	optIdempotencyKey callOptionKind = iota + 1
	optRetry
	optHeader
	optHeaders
	optRoute
)

// IdempotencyKey sets the Idempotency-Key header of the call and makes a POST
// or PATCH retryable: an upstream that stores the key (jfast's idempotency
// plugin) answers the retry with the first response instead of acting twice.
// Build the key from what makes the operation unique, e.g. "charge-" + orderID.
func IdempotencyKey(key string) CallOption {
	return CallOption{kind: optIdempotencyKey, value: key}
}

// Retry(false) forbids retrying this call; Retry(true) allows it for a call the
// rules would not retry (a POST the caller knows to be safe). Only the method
// rule is lifted: the failure must still be retryable, and the budget and the
// deadline still apply.
func Retry(on bool) CallOption { return CallOption{kind: optRetry, on: on} }

// Header sets one header on the call; it wins over the upstream's configured
// headers, the request ID, the forwarded Authorization and the body's
// Content-Type.
func Header(name, value string) CallOption {
	return CallOption{kind: optHeader, name: name, value: value}
}

// Headers sets every header of h on the call, like [Header] for each.
func Headers(h http.Header) CallOption { return CallOption{kind: optHeaders, header: h} }

// TransportWrapper wraps the RoundTripper every attempt of an upstream's calls
// goes through (one RoundTrip per attempt; retries are decided above it). It is
// the seam the telemetry plugin uses to put traceparent/tracestate on each
// attempt and to time attempts. The wrapper must not read or close the
// response body it returns, nor follow redirects. Its signature uses only the
// standard library; it is framework.TransportWrapper, so a plugin can use it
// without importing this package.
type TransportWrapper = framework.TransportWrapper

// CallObserver is told when a call starts (before the breaker, with the
// caller's context) and returns the context the call's attempts run under
// (e.g. one carrying a client span, so the [TransportWrapper] sees it) and a
// function called once when the call ends, with the status of the response
// returned (0 when the call failed), how many attempts were sent (0 when the
// breaker or the bulkhead refused it) and the call's error. It is the seam for
// one client span per call whose retries share the span.
type CallObserver = framework.CallObserver

// ClientOption configures [NewClient].
type ClientOption func(*clientOptions)

type clientOptions struct {
	clock     resilience.Clock
	registry  prometheus.Registerer
	metrics   *metricSet
	logger    *slog.Logger
	wrappers  []TransportWrapper
	observers []CallObserver
	lookup    func(context.Context, string) ([]netip.Addr, error)
}

// WithClock sets the clock of the breaker, budget, bulkhead, backoff and
// Retry-After waits (a resilience.TestClock in tests). Connection deadlines
// use real time. Defaults to the real clock.
func WithClock(c resilience.Clock) ClientOption { return func(o *clientOptions) { o.clock = c } }

// WithMetrics registers the client's metrics (jfast_http_client_*, labelled
// with the upstream's name) in reg. Defaults to no registration: the client
// counts but nothing exports.
func WithMetrics(reg prometheus.Registerer) ClientOption {
	return func(o *clientOptions) { o.registry = reg }
}

// WithLogger sets where breaker changes are logged. Defaults to no logging.
func WithLogger(l *slog.Logger) ClientOption { return func(o *clientOptions) { o.logger = l } }

// WithTransportWrapper adds a [TransportWrapper]; the first added is the
// outermost.
func WithTransportWrapper(w TransportWrapper) ClientOption {
	return func(o *clientOptions) { o.wrappers = append(o.wrappers, w) }
}

// WithCallObserver adds a [CallObserver]; observers are called in the order
// added, each with the context the previous one returned.
func WithCallObserver(f CallObserver) ClientOption {
	return func(o *clientOptions) { o.observers = append(o.observers, f) }
}

// WithLookup sets how a discovered upstream's host (discover = true) is
// resolved to its instances' addresses: a resolver of the caller's own, or
// a table in a test. Defaults to the system's resolver (A and AAAA records).
func WithLookup(lookup func(ctx context.Context, host string) ([]netip.Addr, error)) ClientOption {
	return func(o *clientOptions) { o.lookup = lookup }
}

func withMetricSet(m *metricSet) ClientOption { return func(o *clientOptions) { o.metrics = m } }
