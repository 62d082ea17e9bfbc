package resilience

import (
	"context"
	"time"
)

// Clock is the source of time for every timer in jfast: breaker cool-downs,
// budget windows, bulkhead waits, backoff sleeps and Retry-After waits all
// ask a Clock, so tests can use a [TestClock] instead of sleeping.
type Clock interface {
	// Now returns the current time.
	Now() time.Time
	// Sleep waits for d. It returns nil after d has passed, or ctx.Err() if
	// ctx ends first. A d of zero or less returns at once (with ctx.Err() if
	// ctx is already done).
	Sleep(ctx context.Context, d time.Duration) error
	// NewTimer returns a Timer that sends the time on its channel once, after d.
	NewTimer(d time.Duration) Timer
}

// Timer is a single-shot timer made by a [Clock].
type Timer interface {
	// C returns the channel on which the time is sent when the timer fires.
	C() <-chan time.Time
	// Stop prevents the timer from firing. It returns false if the timer
	// had already fired or been stopped.
	Stop() bool
}

// RealClock returns the Clock backed by package time. It is safe for
// concurrent use and is the default of every option struct in this package.
func RealClock() Clock { return realClock{} }

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

func (realClock) Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (realClock) NewTimer(d time.Duration) Timer { return realTimer{time.NewTimer(d)} }

type realTimer struct{ t *time.Timer }

func (r realTimer) C() <-chan time.Time { return r.t.C }
func (r realTimer) Stop() bool          { return r.t.Stop() }

// clockOrReal returns c, or the real clock when c is nil.
func clockOrReal(c Clock) Clock {
	if c == nil {
		return realClock{}
	}
	return c
}

// elapsed returns the time from origin to now on c. With the real clock it
// reads only the monotonic clock (about half the cost of time.Now), which
// matters on the per-call path of breakers and budgets.
func elapsed(c Clock, origin time.Time) time.Duration {
	if _, ok := c.(realClock); ok {
		return time.Since(origin)
	}
	return c.Now().Sub(origin)
}
