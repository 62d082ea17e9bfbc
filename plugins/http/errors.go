package http

import (
	"errors"
	"fmt"
	"time"

	"github.com/jfastframework/jfast/framework/resilience"
	"github.com/jfastframework/jfast/problem"
)

// UpstreamError is what every failed call returns: a call that got no response
// at all, or whose response could not be used. (A call that got a usable
// response returns it, whatever its status. The one failure that is not the
// upstream's, a RoundTripper call whose streamed request body the caller was
// late with or failed, returns a [RequestBodyError] instead.) It is never returned bare: each
// failure is one of [UpstreamTimeout], [UpstreamUnavailable], [CircuitOpen],
// [BulkheadFull], [Throttled] and [ResponseTooLarge], and errors.As finds the
// UpstreamError inside any of them:
//
//	var ue *http.UpstreamError
//	if errors.As(err, &ue) {
//		log.Printf("%s failed: %v", ue.Upstream, err)
//	}
//
// Every one renders, through [problem.Renderer], as problem+json naming the
// upstream in the "dependency" member (as every plugin's 503 does) and in
// "upstream", so a handler that lets it escape never answers 500: a 503 with Retry-After when the wait is known, except
// [ResponseTooLarge], a 502 (the upstream answered, with something this
// service cannot use).
type UpstreamError struct {
	// Upstream is the upstream's name, as configured.
	Upstream string
	// Err is the cause, for logs only: it is never rendered.
	Err error
	// RetryAfter, when positive, is how long until another call may succeed.
	RetryAfter time.Duration

	detail string
	// badGateway renders the error as a 502 instead of a 503.
	badGateway bool
}

// Error returns the detail and the cause.
func (e *UpstreamError) Error() string {
	if e.Err == nil {
		return e.detail
	}
	return e.detail + ": " + e.Err.Error()
}

// Unwrap returns the cause.
func (e *UpstreamError) Unwrap() error { return e.Err }

// Problem renders the error as a 503 naming the upstream, or a 502 for a
// [ResponseTooLarge].
func (e *UpstreamError) Problem() *problem.Problem {
	return problem.UpstreamFailed(e.Upstream, e.detail, !e.badGateway, e.RetryAfter, e)
}

// UpstreamTimeout is a call that did not get its response in time: the total
// deadline or the caller's context deadline passed, a connect, read-gap, write-gap
// or pool wait timed out, and no attempt had received a response.
type UpstreamTimeout struct{ UpstreamError }

// UpstreamUnavailable is a call that could not reach the upstream: the
// connection was refused, reset or dropped, the name did not resolve, TLS
// failed, or the caller cancelled the call. No attempt received a response.
type UpstreamUnavailable struct{ UpstreamError }

// CircuitOpen is a call refused by the upstream's open (or half-open, probe in
// flight) breaker: nothing was sent. RetryAfter is the cool-down left (0 while
// a probe decides). errors.Is(err, resilience.ErrOpen) holds.
type CircuitOpen struct{ UpstreamError }

// Error says the suspension once: the breaker's own refusal, its cause,
// says it again in its words ("calls to 'billing' are suspended for
// 15.0s"), and is left out.
func (e *CircuitOpen) Error() string {
	var open *resilience.OpenError
	if errors.As(e.Err, &open) {
		return e.detail
	}
	return e.UpstreamError.Error()
}

// Throttled is a call the upstream's adaptive throttle (throttle = true)
// dropped locally, because the upstream lately refused for load (429, 503)
// or timed out more than throttle_k times as often as it accepted: nothing
// was sent. errors.Is(err, resilience.ErrThrottled) holds.
type Throttled struct{ UpstreamError }

// BulkheadFull is a call that found max_concurrent calls to the upstream in
// flight and no place freed within bulkhead_wait: nothing was sent.
// errors.Is(err, resilience.ErrBulkheadFull) holds.
type BulkheadFull struct{ UpstreamError }

// ResponseTooLarge is a call whose response body was larger than
// max_response_bytes: the upstream answered, but with nothing this service
// can use. The client read at most Limit+1 bytes of the body (none when the
// Content-Length already said too much) and closed the connection. It is
// never retried (the same request gets the same body); the breaker counts
// the answer by its status (a 200 or a 500 is a success, a 503 a failure),
// as any other response. It renders as a 502.
type ResponseTooLarge struct {
	UpstreamError
	// Limit is the upstream's max_response_bytes.
	Limit int64
	// StatusCode is the status of the response whose body was too large.
	StatusCode int
}

// As lets errors.As find the *UpstreamError inside.
func (e *UpstreamTimeout) As(target any) bool { return asUpstream(&e.UpstreamError, target) }

// As lets errors.As find the *UpstreamError inside.
func (e *UpstreamUnavailable) As(target any) bool { return asUpstream(&e.UpstreamError, target) }

// As lets errors.As find the *UpstreamError inside.
func (e *CircuitOpen) As(target any) bool { return asUpstream(&e.UpstreamError, target) }

// As lets errors.As find the *UpstreamError inside.
func (e *Throttled) As(target any) bool { return asUpstream(&e.UpstreamError, target) }

// Unwrap returns the throttle's *resilience.ThrottledError.
func (e *Throttled) Unwrap() error { return e.Err }

// As lets errors.As find the *UpstreamError inside.
func (e *BulkheadFull) As(target any) bool { return asUpstream(&e.UpstreamError, target) }

// As lets errors.As find the *UpstreamError inside.
func (e *ResponseTooLarge) As(target any) bool { return asUpstream(&e.UpstreamError, target) }

func asUpstream(e *UpstreamError, target any) bool {
	if t, ok := target.(**UpstreamError); ok {
		*t = e
		return true
	}
	return false
}

// Unwrap returns the cause (context.DeadlineExceeded, a net.Error...).
func (e *UpstreamTimeout) Unwrap() error { return e.Err }

// Unwrap returns the cause (a connection error, context.Canceled...).
func (e *UpstreamUnavailable) Unwrap() error { return e.Err }

// Unwrap returns the breaker's *resilience.OpenError.
func (e *CircuitOpen) Unwrap() error { return e.Err }

// Unwrap returns the bulkhead's *resilience.BulkheadFullError.
func (e *BulkheadFull) Unwrap() error { return e.Err }

// Unwrap returns the cause, which says what the response declared or sent.
func (e *ResponseTooLarge) Unwrap() error { return e.Err }

func newTimeout(upstream string, err error) *UpstreamTimeout {
	return &UpstreamTimeout{UpstreamError{Upstream: upstream, Err: err,
		detail: fmt.Sprintf("upstream '%s' did not answer in time", upstream)}}
}

func newUnavailable(upstream string, err error) *UpstreamUnavailable {
	return &UpstreamUnavailable{UpstreamError{Upstream: upstream, Err: err,
		detail: fmt.Sprintf("upstream '%s' is unreachable", upstream)}}
}

func newCircuitOpen(upstream string, err error, retryAfter time.Duration) *CircuitOpen {
	d := fmt.Sprintf("calls to upstream '%s' are suspended for %.1fs", upstream, retryAfter.Seconds())
	if retryAfter <= 0 {
		d = fmt.Sprintf("calls to upstream '%s' are suspended while a probe call is in flight", upstream)
	}
	return &CircuitOpen{UpstreamError{Upstream: upstream, Err: err, RetryAfter: retryAfter, detail: d}}
}

func newThrottled(upstream string, err error) *Throttled {
	return &Throttled{UpstreamError{Upstream: upstream, Err: err, RetryAfter: time.Second,
		detail: fmt.Sprintf("calls to upstream '%s' are throttled: it refuses more than it accepts", upstream)}}
}

func newBulkheadFull(upstream string, err error) *BulkheadFull {
	return &BulkheadFull{UpstreamError{Upstream: upstream, Err: err,
		detail: fmt.Sprintf("too many calls to upstream '%s' are in flight", upstream)}}
}

func newResponseTooLarge(upstream string, limit int64, cause *bodyTooLarge) *ResponseTooLarge {
	return &ResponseTooLarge{
		UpstreamError: UpstreamError{Upstream: upstream, Err: cause, badGateway: true,
			detail: fmt.Sprintf("upstream '%s' answered with a response body larger than %d bytes", upstream, limit)},
		Limit:      limit,
		StatusCode: cause.status,
	}
}

// bodyTooLarge is the cause of a [ResponseTooLarge]: what the response
// declared, or that it went on past the limit.
type bodyTooLarge struct {
	status   int
	limit    int64
	declared int64 // the Content-Length, or -1 when unknown
}

func (e *bodyTooLarge) Error() string {
	if e.declared >= 0 {
		return fmt.Sprintf("the %d response declared Content-Length %d, over max_response_bytes (%d); its body was not read", e.status, e.declared, e.limit)
	}
	return fmt.Sprintf("the body of the %d response went on past max_response_bytes (%d); reading stopped one byte past it", e.status, e.limit)
}

// errClosed is the cause of a call on a closed client.
var errClosed = errors.New("client is closed")

var (
	_ problem.Renderer = (*UpstreamError)(nil)
	_ problem.Renderer = (*UpstreamTimeout)(nil)
	_ problem.Renderer = (*CircuitOpen)(nil)
	_ problem.Renderer = (*ResponseTooLarge)(nil)
)
