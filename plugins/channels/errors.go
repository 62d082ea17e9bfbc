package channels

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/jfastframework/jfast/framework/resilience"
	"github.com/jfastframework/jfast/problem"
)

// ErrUnavailable matches, with errors.Is, every [*UnavailableError].
var ErrUnavailable = errors.New("channels unavailable")

// UnavailableError is what Publish returns when Redis did not take the
// message: the cache plugin's breaker is open (answered at once, no I/O), the
// command ran out of the cache's command_timeout, the connection was refused
// or broke, or Redis answered with an error (out of memory, a read-only
// replica). It renders as a 503 problem naming the "channels" dependency,
// with Retry-After while the breaker is open.
type UnavailableError struct {
	// Channel is the channel published to.
	Channel string
	// Err is the cause, as the cache plugin's client returned it. It is
	// logged, never rendered.
	Err error
	// MaybePublished is true when the command was sent and no answer came
	// (a timeout, a connection that broke while waiting): Redis may have
	// taken the message, and may still deliver it once it catches up. It is
	// false when the publish was refused before anything was sent (the
	// breaker, a refused connection) or Redis answered with an error.
	MaybePublished bool
}

// Error reads "channels: publish order.paid: <cause>".
func (e *UnavailableError) Error() string {
	s := "channels: publish " + e.Channel + ": " + e.Err.Error()
	if e.MaybePublished {
		s += " (the message may have been published)"
	}
	return s
}

// Unwrap returns the cause.
func (e *UnavailableError) Unwrap() error { return e.Err }

// Is reports whether target is [ErrUnavailable].
func (e *UnavailableError) Is(target error) bool { return target == ErrUnavailable }

// RetryAfter returns the breaker's cool-down left while it is open; 0
// otherwise.
func (e *UnavailableError) RetryAfter() time.Duration {
	var ra resilience.RetryAfterError
	if errors.As(e.Err, &ra) {
		return ra.RetryAfter()
	}
	return 0
}

// Problem implements problem.Renderer: a 503 naming "channels". The detail
// says what happened without the cause's internals (addresses, replies).
func (e *UnavailableError) Problem() *problem.Problem {
	detail := "redis did not take the message for channel " + e.Channel
	switch {
	case errors.Is(e.Err, resilience.ErrOpen):
		detail += ": calls to redis are suspended"
	case e.MaybePublished:
		detail += ": no answer in time; it may have been published"
	}
	p := problem.ServiceUnavailable(pluginName, detail, e.RetryAfter())
	p.Err = e
	return p
}

// maybeSent reports whether a failed command may have reached Redis: it was
// not refused before any I/O (breaker open, connection refused, a dial that
// failed) and got no answer (an error reply is an answer).
func maybeSent(err error) bool {
	if errors.Is(err, resilience.ErrOpen) || errors.Is(err, syscall.ECONNREFUSED) {
		return false
	}
	var reply redis.Error
	if errors.As(err, &reply) {
		return false
	}
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return false
	}
	return true
}

// PayloadTooLargeError is a publish refused before anything was sent because
// its payload is over max_payload_bytes. It renders as a 413.
type PayloadTooLargeError struct {
	Channel string
	Size    int
	Max     int
}

func (e *PayloadTooLargeError) Error() string {
	return fmt.Sprintf("channels: publish %s: payload of %d bytes is over max_payload_bytes (%d)", e.Channel, e.Size, e.Max)
}

// Problem implements problem.Renderer: a 413 that says the limit.
func (e *PayloadTooLargeError) Problem() *problem.Problem {
	p := problem.New(http.StatusRequestEntityTooLarge,
		fmt.Sprintf("the event is %d bytes; at most %d are accepted", e.Size, e.Max))
	p.Err = e
	return p
}

// UndeclaredError is a publish or subscribe on a channel that is in neither
// [plugin.channels] broadcast nor durable. It is a programming error, so it
// renders as a 500 without details.
type UndeclaredError struct{ Channel string }

func (e *UndeclaredError) Error() string {
	return fmt.Sprintf(`channels: channel %q is not declared; add it to [plugin.channels] broadcast (every replica, at most once) or durable (once per service, at least once)`, e.Channel)
}

var (
	_ problem.Renderer           = (*UnavailableError)(nil)
	_ resilience.RetryAfterError = (*UnavailableError)(nil)
	_ problem.Renderer           = (*PayloadTooLargeError)(nil)
)
