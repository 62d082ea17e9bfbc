package resilience

import (
	"context"
	"errors"
	"time"
)

// HTTPOutcome is the breaker outcome of one HTTP exchange, the rule every
// jfast plugin that calls over HTTP shares (docs/resilience.md, "What counts
// as a failure"): a failure is evidence that the upstream is not there, and an
// answer is evidence that it is.
//
//   - err != nil: [Ignore] when it is (or wraps) context.Canceled — the
//     caller gave up; [Hang] when it is a timeout (context.DeadlineExceeded,
//     or an error whose Timeout method reports true, as net.Error's does):
//     the upstream let a deadline expire without answering; [Failure]
//     otherwise (refused, reset, DNS, TLS). An error cannot say whose
//     deadline ended the call: ask [CutByCaller] first and feed [Ignore]
//     when it says the caller's did.
//   - 502, 503, 504: [Failure]: the upstream, or the proxy in front of it,
//     says it is not there.
//   - any other status, 500 and 429 and every 4xx included: [Success]. A 500
//     proves the upstream is up (with a bug the same request will meet
//     again), a 429 is the upstream asking for calm, and a 4xx is the
//     caller's mistake; each resets the consecutive-failure count, and a
//     half-open breaker's probe answered so closes it.
func HTTPOutcome(status int, err error) Outcome {
	if err != nil {
		if errors.Is(err, context.Canceled) {
			return Ignore
		}
		if IsTimeout(err) {
			return Hang
		}
		return Failure
	}
	switch status {
	case 502, 503, 504:
		return Failure
	}
	return Success
}

// IsTimeout reports whether err is a deadline that expired with no answer:
// context.DeadlineExceeded, or an error in its chain whose Timeout method
// reports true (net.Error, pgconn's and go-redis's timeouts). Plugins use it
// to tell a [Hang] from a [Failure] once [CutByCaller] has said the deadline
// was their own.
func IsTimeout(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	var t interface{ Timeout() bool }
	return errors.As(err, &t) && t.Timeout()
}

// CutByCaller reports whether a call that failed was cut short by its
// caller, so that its failure says nothing about the dependency and the
// breaker must not count it ([Ignore]). It is the one rule every jfast
// plugin applies to a call that ended at a deadline (docs/resilience.md,
// "Whose deadline was it?"): the breaker learns from the dependency, not
// from the caller's impatience.
//
// ctx is the caller's context, not one the plugin derived from it. own is
// the deadline the plugin itself put on the call (its configured timeout for
// the dependency, from when the call started: an HTTP timeout, a Redis
// command_timeout, a PostgreSQL connect or ping timeout), on the same clock
// as context deadlines (package time, never a test clock). A zero own says
// that the plugin's deadlines move with progress (a gap between bytes) and
// had not fired when ctx ended, so an ended ctx is enough.
//
// It returns true when ctx was cancelled, or when ctx's deadline has passed
// and came before own. It returns false when ctx is still running (the
// dependency or the plugin's own deadline ended the call), and when own came
// first or at the same instant (the plugin would have cut the call then
// anyway, so the failure is evidence).
//
// A deadline counts as passed when ctx says so or when the time has reached
// it: a socket deadline copied from ctx can fire a moment before ctx's own
// timer does.
//
// It decides the breaker outcome only; what the caller gets back (the
// plugin's usual timeout or unavailable error, and its status code) does not
// depend on it.
func CutByCaller(ctx context.Context, own time.Time) bool {
	return cutByCaller(ctx, own, time.Now())
}

// cutByCaller is CutByCaller at the instant now.
func cutByCaller(ctx context.Context, own, now time.Time) bool {
	err := ctx.Err()
	if errors.Is(err, context.Canceled) {
		return true
	}
	deadline, ok := ctx.Deadline()
	if !ok {
		// Ended without a deadline or a cancellation only if a custom
		// context says so: still the caller's doing.
		return err != nil
	}
	if err == nil && now.Before(deadline) {
		return false
	}
	return own.IsZero() || deadline.Before(own)
}
