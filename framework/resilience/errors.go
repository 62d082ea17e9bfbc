package resilience

import (
	"errors"
	"fmt"
	"time"
)

// ErrOpen matches, with errors.Is, every [*OpenError]: a call refused by an
// open or half-open breaker.
var ErrOpen = errors.New("circuit breaker is open")

// ErrBulkheadFull matches, with errors.Is, every [*BulkheadFullError].
var ErrBulkheadFull = errors.New("bulkhead is full")

// RetryAfterError is implemented by errors that know how long the caller
// should wait before the dependency can be called again. Ask it with
// errors.As; problem rendering uses it to set the Retry-After header.
type RetryAfterError interface {
	error
	RetryAfter() time.Duration
}

// OpenError is returned by [Breaker.Allow] when the breaker refuses a call:
// it is open, or half-open with its single probe already in flight. No I/O
// was done.
//
// One OpenError is made per open period and shared by every refused call of
// that period (so refusing allocates nothing); RetryAfter computes the
// remaining wait when asked.
type OpenError struct {
	// Name is the breaker's name, normally the dependency's.
	Name string
	// Until is when the cool-down ends. It is the zero time when the
	// breaker is half-open and its probe is in flight.
	Until time.Time
	clock Clock
	until time.Duration // Until, as the breaker's time since its origin
}

// RetryAfter returns the time left until the cool-down ends, or 0 when the
// breaker is half-open (the probe's outcome decides, at any moment).
func (e *OpenError) RetryAfter() time.Duration {
	if e.Until.IsZero() {
		return 0
	}
	return max(e.Until.Sub(clockOrReal(e.clock).Now()), 0)
}

// ProbeTaken reports whether err is a half-open breaker's refusal because its
// one probe is another call's, in flight. A readiness check that meets it asks
// the dependency itself, outside the breaker: whether the dependency answers
// is the check's question, not whether another call asked first.
func ProbeTaken(err error) bool {
	var oe *OpenError
	return errors.As(err, &oe) && oe.Until.IsZero()
}

// Error reports the dependency and the remaining wait, for example
// "calls to 'billing' are suspended for 3.2s".
func (e *OpenError) Error() string {
	if e.Until.IsZero() {
		return fmt.Sprintf("calls to '%s' are suspended while a probe call is in flight", e.Name)
	}
	return fmt.Sprintf("calls to '%s' are suspended for %.1fs", e.Name, e.RetryAfter().Seconds())
}

// Is reports whether target is [ErrOpen].
func (e *OpenError) Is(target error) bool { return target == ErrOpen }

// BulkheadFullError is returned by [Bulkhead.Acquire] when no slot freed up
// within the bulkhead's wait. It is not a failure of the dependency: callers
// feed it to a breaker as [Ignore].
type BulkheadFullError struct {
	// Name is the bulkhead's name, normally the dependency's.
	Name string
	// MaxConcurrent is the bulkhead's limit.
	MaxConcurrent int
	// Wait is how long the call waited for a slot.
	Wait time.Duration
}

// Error reports the dependency and the limit, for example
// "bulkhead for 'billing' is full: 50 calls in flight, waited 500ms".
func (e *BulkheadFullError) Error() string {
	return fmt.Sprintf("bulkhead for '%s' is full: %d calls in flight, waited %s", e.Name, e.MaxConcurrent, e.Wait)
}

// Is reports whether target is [ErrBulkheadFull].
func (e *BulkheadFullError) Is(target error) bool { return target == ErrBulkheadFull }

var (
	_ RetryAfterError = (*OpenError)(nil)
)
