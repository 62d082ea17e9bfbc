package grpc

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/jfastframework/jfast/framework/resilience"
	"github.com/jfastframework/jfast/problem"
)

// Error is what every failed call returns: the upstream answered with a
// status other than OK, or the call could not reach it, or the plugin refused
// it. errors.As finds it, and its Code answers the usual question:
//
//	_, err := inventory.GetStock(ctx, req)
//	var e *grpc.Error
//	if errors.As(err, &e) && e.Code == codes.NotFound {
//		return problem.NotFound("no such product")
//	}
//
// status.Code(err) and status.FromError(err) give the same code (Error has a
// GRPCStatus method). A handler that lets it escape answers problem+json:
// 503 naming the upstream for an outage (UNAVAILABLE,
// DEADLINE_EXCEEDED, an open breaker, a full bulkhead), the HTTP meaning of
// any other code (see [Error.Problem]).
type Error struct {
	// Upstream is the upstream's name, as configured.
	Upstream string
	// Method is the full method name, "/shop.Inventory/GetStock".
	Method string
	// Code is the status code: the upstream's, or UNAVAILABLE for a call the
	// breaker or the bulkhead refused, DEADLINE_EXCEEDED for one that ran out
	// of time ([KindTimeout]) or that the upstream answered so in time
	// ([KindStatus]), CANCELLED for one its caller cancelled.
	Code codes.Code
	// Kind says why the call failed: [KindStatus] when the upstream (or the
	// gRPC library) gave Code, else the plugin's reason.
	Kind Kind
	// Attempts is how many attempts were sent (0 when refused before any).
	Attempts int
	// RetryAfter, when positive, is how long until another call may succeed
	// (the time left of an open breaker's cool-down).
	RetryAfter time.Duration
	// Err is the cause: the status error of the last attempt, or the
	// breaker's or bulkhead's error. It is for logs: the upstream's status
	// message is never rendered to this service's callers.
	Err error
}

// Kind is why a call failed.
type Kind uint8

const (
	// KindStatus is a status the upstream sent, or one the gRPC library
	// made for a call that failed on the way (UNAVAILABLE for a connection
	// refused, DEADLINE_EXCEEDED, CANCELLED).
	KindStatus Kind = iota
	// KindCircuitOpen is a call the open breaker refused: nothing was sent.
	// errors.Is(err, resilience.ErrOpen) holds.
	KindCircuitOpen
	// KindBulkheadFull is a call that found max_concurrent calls in flight
	// for bulkhead_wait: nothing was sent. errors.Is(err,
	// resilience.ErrBulkheadFull) holds.
	KindBulkheadFull
	// KindTimeout is a call that ran out of the client's timeout (or the
	// caller's sooner deadline): Code is DEADLINE_EXCEEDED. A
	// DEADLINE_EXCEEDED the upstream sent back while the call still had
	// time (its own dependency timed out) is an answer: [KindStatus].
	KindTimeout
	// KindClosed is a call on a client whose plugin has stopped.
	KindClosed
	// KindThrottled is a call the upstream's adaptive throttle (throttle =
	// true) dropped locally: nothing was sent. errors.Is(err,
	// resilience.ErrThrottled) holds.
	KindThrottled
)

// Error returns what failed and the cause, for logs. A cause that only
// says the detail again (the breaker's "calls to 'x' are suspended for
// 15.0s") is left out; the throttle's adds its drop rate.
func (e *Error) Error() string {
	s := e.detail()
	var oe *resilience.OpenError
	var te *resilience.ThrottledError
	switch {
	case e.Err == nil:
	case e.Kind == KindCircuitOpen && errors.As(e.Err, &oe):
	case e.Kind == KindThrottled && errors.As(e.Err, &te):
		s += fmt.Sprintf(" (%.0f%% of calls dropped locally)", te.Probability*100)
	default:
		s += ": " + e.Err.Error()
	}
	return s
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// GRPCStatus returns the call's status, so status.Code and status.FromError
// see Code. Its message is the cause's, for logs and for code that inspects
// the upstream's answer.
func (e *Error) GRPCStatus() *status.Status {
	if s, ok := status.FromError(e.Err); ok && s.Code() == e.Code {
		return s
	}
	return status.New(e.Code, e.detail())
}

// Outage reports whether the error says the upstream is unavailable to this
// service (rather than answering it): UNAVAILABLE, the call's deadline, an
// open breaker, a full bulkhead, a cancelled call, a stopped client.
func (e *Error) Outage() bool {
	if e.Kind != KindStatus {
		return true
	}
	switch e.Code {
	case codes.Unavailable, codes.DeadlineExceeded, codes.Canceled:
		return true
	}
	return false
}

// detail is the error's text for this service's callers: it names the
// upstream and the method, never the upstream's own message.
func (e *Error) detail() string {
	switch e.Kind {
	case KindCircuitOpen:
		if e.RetryAfter > 0 {
			return fmt.Sprintf("calls to upstream '%s' are suspended for %.1fs", e.Upstream, e.RetryAfter.Seconds())
		}
		return fmt.Sprintf("calls to upstream '%s' are suspended while a probe call is in flight", e.Upstream)
	case KindBulkheadFull:
		return fmt.Sprintf("too many calls to upstream '%s' are in flight", e.Upstream)
	case KindThrottled:
		return fmt.Sprintf("calls to upstream '%s' are throttled: it refuses more than it accepts", e.Upstream)
	case KindTimeout:
		return fmt.Sprintf("upstream '%s' did not answer %s in time", e.Upstream, e.Method)
	case KindClosed:
		return fmt.Sprintf("upstream '%s' is unreachable: the client is closed", e.Upstream)
	}
	switch e.Code {
	case codes.Unavailable:
		if ni := (*noInstanceError)(nil); errors.As(e.Err, &ni) {
			return fmt.Sprintf("upstream '%s' has no instance to call (%s was not sent)", e.Upstream, e.Method)
		}
		// gRPC's transport says "connection error" when no connection could
		// be made: nothing was sent, so nothing answered.
		if msg := status.Convert(e.Err).Message(); strings.HasPrefix(msg, "connection error") {
			if strings.Contains(msg, "connection refused") {
				return fmt.Sprintf("upstream '%s' refused the connection (%s was not sent)", e.Upstream, e.Method)
			}
			return fmt.Sprintf("upstream '%s' could not be connected to (%s was not sent)", e.Upstream, e.Method)
		}
		return fmt.Sprintf("upstream '%s' is unavailable (%s answered UNAVAILABLE)", e.Upstream, e.Method)
	case codes.Canceled:
		return fmt.Sprintf("the call of %s to upstream '%s' was cancelled", e.Method, e.Upstream)
	}
	return fmt.Sprintf("upstream '%s' answered %s to %s", e.Upstream, codeName(e.Code), e.Method)
}

// httpStatus is the HTTP meaning of each code an upstream may answer that is
// not an outage. An answer that is the upstream's own failure (INTERNAL,
// UNKNOWN, DATA_LOSS, UNIMPLEMENTED) is a 502: this service could not use
// what its upstream sent.
var httpStatus = map[codes.Code]int{
	codes.InvalidArgument:    http.StatusBadRequest,
	codes.OutOfRange:         http.StatusBadRequest,
	codes.FailedPrecondition: http.StatusBadRequest,
	codes.NotFound:           http.StatusNotFound,
	codes.AlreadyExists:      http.StatusConflict,
	codes.Aborted:            http.StatusConflict,
	codes.PermissionDenied:   http.StatusForbidden,
	codes.Unauthenticated:    http.StatusUnauthorized,
	codes.ResourceExhausted:  http.StatusTooManyRequests,
}

// Problem renders the error as problem+json with the upstream in the
// "upstream" member (and, for a 503, in "dependency" too): a 503 (with Retry-After when the wait is known) for an
// [Error.Outage]; otherwise NOT_FOUND 404; INVALID_ARGUMENT, OUT_OF_RANGE and
// FAILED_PRECONDITION 400; ALREADY_EXISTS and ABORTED 409; PERMISSION_DENIED
// 403; UNAUTHENTICATED 401; RESOURCE_EXHAUSTED 429; anything else (INTERNAL,
// UNKNOWN, DATA_LOSS, UNIMPLEMENTED) 502.
func (e *Error) Problem() *problem.Problem {
	if s, ok := httpStatus[e.Code]; ok && !e.Outage() {
		p := problem.New(s, e.detail())
		p.SetExtension("upstream", e.Upstream)
		p.Err = e
		return p
	}
	return problem.UpstreamFailed(e.Upstream, e.detail(), e.Outage(), e.RetryAfter, e)
}

// errClosed is the cause of a call on a closed client.
var errClosed = errors.New("client is closed")

// circuitOpen returns the error of a call the breaker refused.
func circuitOpen(upstream, method string, err error) *Error {
	var oe *resilience.OpenError
	ra := time.Duration(0)
	if errors.As(err, &oe) {
		ra = oe.RetryAfter()
	}
	return &Error{Upstream: upstream, Method: method, Code: codes.Unavailable, Kind: KindCircuitOpen, RetryAfter: ra, Err: err}
}

var (
	_ problem.Renderer = (*Error)(nil)
	_ interface {
		GRPCStatus() *status.Status
	} = (*Error)(nil)
)

// noInstanceError is an attempt's that found no instance at all: nothing
// was sent. gRPC reads it as UNAVAILABLE (GRPCStatus), so the call ends as
// an outage, a 503 naming the upstream, as the http client's does, not as
// an answer of the upstream's.
type noInstanceError struct{ err error }

func (e *noInstanceError) Error() string { return e.err.Error() }

func (e *noInstanceError) Unwrap() error { return e.err }

func (e *noInstanceError) GRPCStatus() *status.Status {
	return status.New(codes.Unavailable, e.err.Error())
}
