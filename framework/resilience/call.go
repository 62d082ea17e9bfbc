package resilience

import (
	"context"
	"errors"
	"time"
)

// Call runs fn once through a breaker and a bulkhead, either of which may be
// nil. The breaker is asked first (an open breaker refuses without waiting
// for a bulkhead slot), then the bulkhead. classify turns fn's result into an
// [Outcome] for the breaker; a nil classify counts a nil error as [Success]
// and any other as [Failure].
//
// Outcomes that say nothing about the dependency are fed as [Ignore]
// whatever classify says: a bulkhead rejection, and a call whose ctx was
// cancelled (its caller gave up). So a probe that meets either releases the
// probe slot without closing or reopening the breaker. A [Failure] (or
// [Hang]) that returns after ctx's deadline passed is [Ignore] too: Call
// knows no deadline of fn's own, so by [CutByCaller] with a zero own deadline the
// caller's deadline ended it (a deadline fn puts on its own work and that
// fires first leaves ctx running, and counts).
//
// If fn panics, Call releases the bulkhead slot and the breaker ticket (as
// Ignore) and then panics again with the same value.
//
// The error is fn's, or the *[OpenError] / *[BulkheadFullError] / context
// error that stopped the call before fn ran.
func Call[T any](ctx context.Context, br *Breaker, bh *Bulkhead, classify func(T, error) Outcome, fn func(context.Context) (T, error)) (T, error) {
	var zero T
	ticket, err := br.Allow()
	if err != nil {
		return zero, err
	}
	permit, err := bh.Acquire(ctx)
	if err != nil {
		ticket.Done(Ignore)
		return zero, err
	}
	finished := false
	defer func() {
		if !finished {
			permit.Release()
			ticket.Done(Ignore)
		}
	}()
	v, err := fn(ctx)
	finished = true
	permit.Release()
	var o Outcome
	switch {
	case errors.Is(ctx.Err(), context.Canceled):
		o = Ignore
	case classify != nil:
		o = classify(v, err)
	case err != nil:
		o = Failure
	default:
		o = Success
	}
	if (o == Failure || o == Hang) && CutByCaller(ctx, time.Time{}) {
		o = Ignore
	}
	ticket.Done(o)
	return v, err
}
