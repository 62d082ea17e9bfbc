package problem

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"time"
)

// Renderer is implemented by any error that knows how it renders as a
// problem, such as a plugin's dependency error. [As], [From] and
// [WriteError] find it anywhere in an error's chain, so the framework needs
// no switch over plugins' error types.
type Renderer interface {
	// Problem returns the problem to send. It should return a fresh value
	// (or one the caller may not mutate) and never nil.
	Problem() *Problem
}

// As reports whether err's chain holds a *Problem or a [Renderer], and
// returns the problem of the first one found (outermost first).
func As(err error) (*Problem, bool) {
	var r Renderer
	if err == nil || !errors.As(err, &r) {
		return nil, false
	}
	p := r.Problem()
	if p == nil {
		return nil, false
	}
	return p, true
}

// detailDeadline is the body of a request whose own deadline ran out.
const detailDeadline = "the request did not finish within its deadline"

// detailInternal is the only thing a client learns about an unexpected error.
const detailInternal = "the server could not complete the request; the request ID identifies it in the logs"

// From returns the problem that answers err:
//
//   - the problem of a *Problem or [Renderer] in err's chain (see [As]);
//   - for an *http.MaxBytesError (a request body read past its limit), a
//     413 naming the limit;
//   - for context.DeadlineExceeded, a 503 saying the request did not finish
//     within its deadline;
//   - otherwise a 500 "Internal Server Error" with a generic detail.
//
// err is kept in the result's Err for logging; its text is never rendered.
// From never returns nil: a nil err gives the generic 500.
func From(err error) *Problem {
	if p, ok := As(err); ok {
		return p
	}
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) {
		p := ContentTooLarge("the request body is larger than the " + strconv.FormatInt(tooLarge.Limit, 10) + " bytes this route accepts")
		p.Err = err
		return p
	}
	if errors.Is(err, context.DeadlineExceeded) {
		p := ServiceUnavailable("", detailDeadline, 0)
		p.Err = err
		return p
	}
	p := Internal()
	p.Err = err
	return p
}

// DependencyError is what a plugin returns when a call to one of its
// dependencies fails (refused, timed out, breaker open). It renders as a 503
// problem naming the dependency, with Retry-After when the wait is known.
type DependencyError struct {
	// Dependency names what failed, in the words of the config: "redis",
	// "db", "billing". It is sent to the client.
	Dependency string
	// Err is the cause, for logs only: it is never rendered.
	Err error
	// RetryAfter, when positive, is how long until another call may succeed
	// (for example the time left in a breaker's cool-down).
	RetryAfter time.Duration
	// Detail, when set, replaces the generic detail in the body and the
	// cause in Error(). It is sent to the client, so it must hold no
	// internals. Defaults to "<dependency> is unavailable" in the body.
	Detail string
}

// Error returns "<dependency> unavailable: <detail>", with the cause in place
// of the detail when Detail is empty.
func (e *DependencyError) Error() string {
	s := e.Dependency + " unavailable"
	switch {
	case e.Detail != "":
		s += ": " + e.Detail
	case e.Err != nil:
		s += ": " + e.Err.Error()
	}
	return s
}

// Unwrap returns the cause.
func (e *DependencyError) Unwrap() error { return e.Err }

// Problem renders e as a 503 with the "dependency" member and, when
// RetryAfter is positive, Retry-After and "retry_after".
func (e *DependencyError) Problem() *Problem {
	p := ServiceUnavailable(e.Dependency, e.Detail, e.RetryAfter)
	p.Err = e
	return p
}

// dependencyDetail is the body's detail when a dependency failed and no
// detail was given.
func dependencyDetail(dependency string) string {
	if dependency == "" {
		return "a dependency is unavailable"
	}
	return dependency + " is unavailable"
}
