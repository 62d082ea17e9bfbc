package queue

import (
	"errors"
	"time"

	"github.com/jfastframework/jfast/framework/resilience"
	"github.com/jfastframework/jfast/problem"
)

// Every error Enqueue and EnqueueTx return matches, with errors.Is, exactly one
// of ErrNotEnqueued and ErrMaybeEnqueued: whether the job may exist decides
// what the caller can do next.

// ErrNotEnqueued matches an enqueue error after which the job certainly does
// not exist: the call was refused before anything was sent (a breaker open,
// no connection, the connection refused, a bad kind or option), or the broker
// answered that it did not store it (an error reply, a negative confirm, a
// transaction that did not commit). Enqueueing again is safe.
var ErrNotEnqueued = errors.New("the job was not enqueued")

// ErrMaybeEnqueued matches an enqueue error whose outcome is unknown: the job
// was sent and its confirmation never came (the reply was lost to
// enqueue_timeout or to a connection that broke while waiting for it). The
// broker may have stored it, and may still store it once it catches up.
// Enqueueing again can make a second copy; with the same [UniqueKey] the
// second Enqueue returns the first job's ID with Duplicate set instead (see
// docs/queue.md for what each backend guarantees). The problem it renders
// says "the job may have been enqueued".
var ErrMaybeEnqueued = errors.New("the job may have been enqueued")

// detailMaybeEnqueued is the problem detail of an enqueue whose outcome is
// unknown: the client learns its request may have taken effect.
const detailMaybeEnqueued = "queue did not confirm the enqueue: the job may have been enqueued"

// unconfirmedError is what an enqueue whose outcome is unknown returns: the
// queue's dependency error (errors.As finds it), whose problem tells the
// client the job may have been enqueued while its text keeps the cause for
// the log (a DependencyError's Detail would replace the cause).
type unconfirmedError struct{ dep *problem.DependencyError }

func (e *unconfirmedError) Error() string { return e.dep.Error() + " (the job may have been enqueued)" }
func (e *unconfirmedError) Unwrap() error { return e.dep }

// Problem implements problem.Renderer: the dependency error's 503 with the
// "may have been enqueued" detail.
func (e *unconfirmedError) Problem() *problem.Problem {
	p := e.dep.Problem()
	p.Detail = detailMaybeEnqueued
	p.Err = e
	return p
}

// outcomeError marks an enqueue error with its outcome, for errors.Is; its
// text is the cause's. A backend returns its Enqueue errors marked once, at
// the top (see [notEnqueued] and [maybeEnqueued]); an unmarked error is taken
// as "maybe enqueued", the answer that cannot lose a job.
type outcomeError struct {
	err   error
	maybe bool
}

func (e *outcomeError) Error() string { return e.err.Error() }
func (e *outcomeError) Unwrap() error { return e.err }

// Is reports whether target is the sentinel of e's outcome.
func (e *outcomeError) Is(target error) bool {
	return (target == ErrMaybeEnqueued && e.maybe) || (target == ErrNotEnqueued && !e.maybe)
}

// notEnqueued marks err: the job certainly does not exist. nil stays nil.
func notEnqueued(err error) error { return mark(err, false) }

// maybeEnqueued marks err: the job may exist. nil stays nil.
func maybeEnqueued(err error) error { return mark(err, true) }

func mark(err error, maybe bool) error {
	if err == nil {
		return nil
	}
	return &outcomeError{err: unmark(err), maybe: maybe}
}

// unmark removes the outcome marks at the top of err, so that a new mark is
// the only one errors.Is finds.
func unmark(err error) error {
	for {
		o, ok := err.(*outcomeError)
		if !ok {
			return err
		}
		err = o.err
	}
}

// mayBeEnqueued reports whether the job of a failed enqueue may exist: err
// says so, or does not say it was not.
func mayBeEnqueued(err error) bool {
	return errors.Is(err, ErrMaybeEnqueued) || !errors.Is(err, ErrNotEnqueued)
}

// refusedByBreaker reports whether err is a breaker refusing the call before
// any I/O: the db plugin's connection breaker, the cache plugin's Redis
// breaker (the queue's own is checked before the backend is called).
func refusedByBreaker(err error) bool { return errors.Is(err, resilience.ErrOpen) }

// retryAfterOf returns how long a dependency error says to wait: a breaker's
// cool-down left, or the Retry-After of a dependency error in err's chain.
func retryAfterOf(err error) time.Duration {
	var ra resilience.RetryAfterError
	if errors.As(err, &ra) {
		if d := ra.RetryAfter(); d > 0 {
			return d
		}
	}
	var de *problem.DependencyError
	if errors.As(err, &de) {
		return de.RetryAfter
	}
	return 0
}

var _ problem.Renderer = (*unconfirmedError)(nil)
