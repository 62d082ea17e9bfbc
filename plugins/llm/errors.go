package llm

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/jfastframework/jfast/framework/resilience"
	"github.com/jfastframework/jfast/problem"
)

// Error is what every failed call returns, and what a stream's Err returns
// when the stream is cut. errors.As finds it through any wrapping:
//
//	resp, err := gpt.Chat(ctx, params)
//	var e *llm.Error
//	if errors.As(err, &e) && e.StatusCode == http.StatusBadRequest {
//		return problem.Unprocessable("the question is too long for the model")
//	}
//
// A handler that returns it answers problem+json (see [Error.Problem]). Its
// text names the provider, the kind and the status, never a prompt, an
// answer or the provider's own message.
type Error struct {
	// Provider is the provider's name, as configured: the last one tried
	// when the call fell back.
	Provider string
	// Kind says why the call failed.
	Kind Kind
	// StatusCode is the HTTP status of the provider's last answer (0 when
	// the last attempt got none); for a stream the provider ended with an
	// error event, the status the event stands for (an [EventError]'s
	// Status: 400 for a refusal, 429 for a rate limit, 0 for any other).
	StatusCode int
	// Attempts is how many requests were sent (0 when refused before any).
	Attempts int
	// Chunks is how many chunks of a stream reached the caller before it
	// was cut (0 for a plain call).
	Chunks int
	// RetryAfter, when positive, is how long until another call may
	// succeed: the provider's rate-limit wait, or the time left of an open
	// breaker's cool-down.
	RetryAfter time.Duration
	// Err is the cause, for logs: a network error, the breaker's, the
	// status the provider answered or an [*EventError] (never the
	// provider's message). It is never rendered to this service's callers.
	Err error
}

// Kind is why a call failed.
type Kind uint8

const (
	// KindStatus is an error status the provider answered: a 4xx other than
	// 429 (or an error event in its stream standing for one, see
	// [EventError]) or a 3xx (a redirect, never followed), never retried;
	// or a 5xx whose retries ran out.
	KindStatus Kind = iota
	// KindRateLimited is a 429 (or an error event standing for one) whose
	// wait (RetryAfter) was longer than max_retry_after or than the
	// deadline could afford, or which came back with no retry left: the
	// call returned at once instead of waiting.
	KindRateLimited
	// KindTimeout is a call that ran out of time: timeout, the
	// caller's deadline, the connect timeout, or a stream silent for
	// read_gap.
	KindTimeout
	// KindUnavailable is a call that got no answer: refused, reset, a DNS
	// or TLS failure; or a stream the provider ended with an error event
	// standing for no refusal or rate limit (a server error, an overload).
	KindUnavailable
	// KindCircuitOpen is a call the open breaker refused (and no fallback
	// took): nothing was sent. errors.Is(err, resilience.ErrOpen) holds.
	KindCircuitOpen
	// KindBulkheadFull is a call that found max_concurrent calls in flight
	// for bulkhead_wait (and no fallback took): nothing was sent.
	// errors.Is(err, resilience.ErrBulkheadFull) holds.
	KindBulkheadFull
	// KindCancelled is a call its caller cancelled.
	KindCancelled
	// KindClosed is a call on a client whose plugin has stopped.
	KindClosed
	// KindThrottled is a call the provider's adaptive throttle (throttle =
	// true) dropped locally (and no fallback took it): nothing was sent.
	KindThrottled
)

// kindNames are the kinds' names, as the metrics' "outcome" label has them.
var kindNames = [...]string{
	KindStatus:       "status",
	KindRateLimited:  "rate_limited",
	KindTimeout:      "timeout",
	KindUnavailable:  "unavailable",
	KindCircuitOpen:  "circuit_open",
	KindBulkheadFull: "bulkhead_full",
	KindCancelled:    "cancelled",
	KindClosed:       "closed",
	KindThrottled:    "throttled",
}

// String returns the kind's name, as the metrics' "outcome" label has it.
func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// Error returns what failed and the cause, for logs.
func (e *Error) Error() string {
	s := "llm: " + e.detail()
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// Outage reports whether the error says the provider is unavailable to this
// service, rather than answering that the request is wrong (or sent to
// the wrong place): every kind but a 3xx or 4xx status.
func (e *Error) Outage() bool {
	return e.Kind != KindStatus || e.StatusCode >= 500
}

// detail is the error's text for this service's callers.
func (e *Error) detail() string {
	p := e.Provider
	switch e.Kind {
	case KindRateLimited:
		if e.RetryAfter > 0 {
			return fmt.Sprintf("model provider '%s' is rate limiting calls; retry after %s", p, e.RetryAfter.Round(time.Second/10))
		}
		return fmt.Sprintf("model provider '%s' is rate limiting calls", p)
	case KindTimeout:
		if e.Chunks > 0 {
			return fmt.Sprintf("model provider '%s' stopped streaming after %d chunks", p, e.Chunks)
		}
		return fmt.Sprintf("model provider '%s' did not answer in time", p)
	case KindUnavailable:
		switch {
		case e.event():
			return fmt.Sprintf("model provider '%s' cut the stream with an error event%s", p, e.afterChunks())
		case e.Chunks > 0:
			return fmt.Sprintf("model provider '%s' cut the stream after %d chunks", p, e.Chunks)
		case errors.Is(e.Err, errNoDone):
			return fmt.Sprintf("model provider '%s' ended the stream without an answer", p)
		}
		return fmt.Sprintf("model provider '%s' is unreachable", p)
	case KindCircuitOpen:
		if e.RetryAfter > 0 {
			return fmt.Sprintf("calls to model provider '%s' are suspended for %.1fs", p, e.RetryAfter.Seconds())
		}
		return fmt.Sprintf("calls to model provider '%s' are suspended while a probe call is in flight", p)
	case KindBulkheadFull:
		return fmt.Sprintf("too many calls to model provider '%s' are in flight", p)
	case KindThrottled:
		return fmt.Sprintf("calls to model provider '%s' are throttled: it refuses more than it accepts", p)
	case KindCancelled:
		return fmt.Sprintf("the call to model provider '%s' was cancelled", p)
	case KindClosed:
		return fmt.Sprintf("model provider '%s' is unreachable: the client is closed", p)
	}
	if e.StatusCode >= 500 {
		return fmt.Sprintf("model provider '%s' is failing (answered %d, %d attempts)", p, e.StatusCode, e.Attempts)
	}
	if e.StatusCode < 400 {
		return fmt.Sprintf("model provider '%s' answered %d, a redirect, which is never followed (check its base_url)", p, e.StatusCode)
	}
	if e.event() {
		return fmt.Sprintf("model provider '%s' refused the request with an error event%s (as a %d)", p, e.afterChunks(), e.StatusCode)
	}
	return fmt.Sprintf("model provider '%s' refused the request (answered %d)", p, e.StatusCode)
}

// event reports whether the provider ended the call's stream with an error
// event ([EventError]).
func (e *Error) event() bool {
	var ev *EventError
	return errors.As(e.Err, &ev)
}

// afterChunks is " after N chunks" for a stream cut after it delivered
// chunks, "" otherwise.
func (e *Error) afterChunks() string {
	if e.Chunks == 0 {
		return ""
	}
	return fmt.Sprintf(" after %d chunks", e.Chunks)
}

// Problem renders the error as problem+json naming the provider in the
// "dependency" and "upstream" members: a 503 for an [Error.Outage] (a
// rate limit included, with Retry-After when the wait is known: this
// service's caller did nothing wrong, its dependency is busy), a 502 for a
// 4xx the provider answered (the request this service built, or its key,
// was refused) or a 3xx (a redirect, never followed).
func (e *Error) Problem() *problem.Problem {
	return problem.UpstreamFailed(e.Provider, e.detail(), e.Outage(), e.RetryAfter, e)
}

// errClosed is the cause of a call on a closed client.
var errClosed = errors.New("client is closed")

// errNoDone is the cause of a stream whose body ended without "data:
// [DONE]": a provider, or a proxy on the way, that closes the body cleanly
// in the middle of an answer.
var errNoDone = errors.New("the stream ended without data: [DONE]")

// errReadGap is the cause of an attempt cut by read_gap.
var errReadGap = errors.New("no byte arrived within read_gap")

// refused returns the error of a call the breaker, the bulkhead or the
// adaptive throttle refused.
func refused(provider string, err error) *Error {
	var oe *resilience.OpenError
	if errors.As(err, &oe) {
		return &Error{Provider: provider, Kind: KindCircuitOpen, RetryAfter: oe.RetryAfter(), Err: err}
	}
	if errors.Is(err, resilience.ErrThrottled) {
		return &Error{Provider: provider, Kind: KindThrottled, RetryAfter: time.Second, Err: err}
	}
	return &Error{Provider: provider, Kind: KindBulkheadFull, Err: err}
}

// statusText is the reason phrase of a status, for causes.
func statusText(code int) string {
	if t := http.StatusText(code); t != "" {
		return fmt.Sprintf("%d %s", code, t)
	}
	return fmt.Sprint(code)
}

var _ problem.Renderer = (*Error)(nil)
