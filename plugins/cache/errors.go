package cache

import (
	"errors"
	"fmt"
	"time"

	"github.com/jfastframework/jfast/framework/resilience"
	"github.com/jfastframework/jfast/problem"
)

// ErrUnavailable matches, with errors.Is, every [*UnavailableError].
var ErrUnavailable = errors.New("redis unreachable")

// UnavailableError is what a Redis command returns when Redis did not answer:
// the breaker is open, the command ran out of command_timeout, the connection
// was refused or broke. It renders as a 503 problem naming the "cache"
// dependency, with Retry-After while the breaker is open. A command that Redis
// answered with an error reply (WRONGTYPE, NOSCRIPT) is not one: that error is
// returned as go-redis made it.
//
// Every command on the shared client returns it, so code using [Plugin.Client]
// gets it too; errors.Is(err, redis.Nil) and the cause's own errors.Is/As keep
// working through Unwrap.
type UnavailableError struct {
	// Err is the cause: a *resilience.OpenError, context.DeadlineExceeded, a
	// network error. It is logged, never rendered (except the breaker's
	// message, which holds no internals).
	Err error
	// Timeout is command_timeout when the command ran out of it; 0 otherwise.
	Timeout time.Duration
}

// Error reads "redis unreachable: calls to 'redis' are suspended for 3.2s", or
// "redis unreachable: no answer within 1s: <cause>", or "redis unreachable: <cause>".
func (e *UnavailableError) Error() string {
	if e.Timeout > 0 {
		return fmt.Sprintf("redis unreachable: no answer within %s: %v", e.Timeout, e.Err)
	}
	return "redis unreachable: " + e.Err.Error()
}

// Unwrap returns the cause.
func (e *UnavailableError) Unwrap() error { return e.Err }

// Is reports whether target is [ErrUnavailable].
func (e *UnavailableError) Is(target error) bool { return target == ErrUnavailable }

// RetryAfter returns the breaker's cool-down left while it is open; 0 otherwise.
func (e *UnavailableError) RetryAfter() time.Duration {
	var oe *resilience.OpenError
	if errors.As(e.Err, &oe) {
		return oe.RetryAfter()
	}
	return 0
}

// Problem implements problem.Renderer: a 503 naming the "cache" dependency.
func (e *UnavailableError) Problem() *problem.Problem {
	detail := "redis unreachable"
	switch {
	case errors.Is(e.Err, resilience.ErrOpen):
		detail = e.Error()
	case e.Timeout > 0:
		detail = fmt.Sprintf("redis unreachable: no answer within %s", e.Timeout)
	}
	p := problem.ServiceUnavailable(pluginName, detail, e.RetryAfter())
	p.Err = e
	return p
}

var (
	_ problem.Renderer           = (*UnavailableError)(nil)
	_ resilience.RetryAfterError = (*UnavailableError)(nil)
)
