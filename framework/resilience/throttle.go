package resilience

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"
)

// Adaptive throttle defaults (docs/resilience.md, "Adaptive throttling").
const (
	// DefaultThrottleK is the multiplier K: a dependency receives about K
	// times what it accepts. 2 lets through twice the accepted rate, so a
	// dependency that recovers is seen to recover within a window, while
	// one that refuses two thirds of an offered load gets a third less.
	DefaultThrottleK = 2.0
	// DefaultThrottleWindow is the span requests and accepts are counted
	// over: long enough that a burst of refusals does not swing the
	// probability, short enough to forget an overload minutes later.
	DefaultThrottleWindow = 2 * time.Minute
)

// throttleBuckets is how many buckets a throttle's window has: the counts
// are exact to within Window/24 (5 s by default).
const throttleBuckets = 24

// ThrottleMaxDrop caps the refusal probability: at least a tenth of the
// calls offered still reach the dependency, however much it refused. A
// request dropped locally counts as a request, so without the cap a
// dependency that refused everything for a window is then sent almost
// nothing: it gets too few requests to be seen to recover, and the window
// must forget the outage several times over (more than 3 windows, 6
// minutes by default) before the calls flow again. With it they do within
// 2 windows: the tenth it keeps receiving is answered from the moment it is
// back, and the accepts it brings lower the probability again.
const ThrottleMaxDrop = 0.9

// ErrThrottled matches, with errors.Is, every [*ThrottledError].
var ErrThrottled = errors.New("call throttled locally")

// ThrottledError is a call, or a retry, the adaptive throttle refused
// locally: nothing was sent.
type ThrottledError struct {
	// Name is the dependency's name.
	Name string
	// Probability is the refusal probability when the call was refused.
	Probability float64
}

// Error reports the dependency and the probability, for example
// "calls to 'billing' are throttled: it refuses more than it accepts
// (33% of calls dropped locally)".
func (e *ThrottledError) Error() string {
	return fmt.Sprintf("calls to '%s' are throttled: it refuses more than it accepts (%.0f%% of calls dropped locally)",
		e.Name, e.Probability*100)
}

// Is reports whether target is [ErrThrottled].
func (e *ThrottledError) Is(target error) bool { return target == ErrThrottled }

// ThrottleOpts configures a [Throttle]. Zero fields take their defaults.
type ThrottleOpts struct {
	// Name names the dependency in errors. Defaults to "".
	Name string
	// K is the multiplier: a request is refused locally with probability
	// max(0, (requests − K·accepts) / (requests + 1)). Defaults to 2.
	K float64
	// Window is the span the counts cover. Defaults to 2m.
	Window time.Duration
	// Clock is the time source. Defaults to RealClock().
	Clock Clock
	// Rand returns a number in [0, 1), the draw of each decision.
	// Defaults to math/rand/v2's Float64.
	Rand func() float64
}

// Throttle is the client-side adaptive throttle of one dependency: it
// counts the requests made to it and those it accepted over a sliding
// window, and refuses a new one locally with probability
// max(0, (requests − K·accepts) / (requests + 1)), at most
// [ThrottleMaxDrop]. An accept is any
// attempt that is not the dependency refusing for load (429, 503,
// RESOURCE_EXHAUSTED, S3's SlowDown) and not a hang: an answer, and a
// refused connection too (the throttle is for load, the breaker for
// outages); a request refused locally counts
// as a request. So a dependency that accepts C per second, offered more
// than K·C, receives about K·C. It is safe for concurrent use; a nil
// *Throttle refuses nothing.
type Throttle struct {
	name   string
	k      float64
	clock  Clock
	origin time.Time
	rand   func() float64

	mu       sync.Mutex
	w        window // a: requests, b: accepts
	rejected uint64
}

// NewThrottle returns a Throttle. It panics on a K below 1 or a negative
// window.
func NewThrottle(o ThrottleOpts) *Throttle {
	if o.K == 0 {
		o.K = DefaultThrottleK
	}
	if o.Window == 0 {
		o.Window = DefaultThrottleWindow
	}
	if !(o.K >= 1) || o.Window < 0 {
		panic(fmt.Sprintf("resilience: throttle: K must be at least 1 and Window positive in %+v", o))
	}
	if o.Rand == nil {
		o.Rand = rand.Float64
	}
	clock, _, _ := unwrapClock(o.Clock)
	return &Throttle{name: o.Name, k: o.K, clock: clock, origin: clock.Now(), rand: o.Rand,
		w: newWindow(o.Window, throttleBuckets)}
}

// Allow decides whether one request may be sent. A refused request counts
// as a request, and the error is a *[ThrottledError]; an allowed one
// counts when its outcome is known ([Throttle.Record]).
func (t *Throttle) Allow() error {
	if t == nil {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.w.advance(elapsed(t.clock, t.origin))
	p := t.probability()
	if p <= 0 || t.rand() >= p {
		return nil
	}
	t.w.add(elapsed(t.clock, t.origin), 1, 0)
	t.rejected++
	return &ThrottledError{Name: t.name, Probability: p}
}

// Record counts a request sent: accepted when the dependency answered
// without refusing it for load and without letting it time out.
func (t *Throttle) Record(accepted bool) {
	if t == nil {
		return
	}
	var a int64
	if accepted {
		a = 1
	}
	t.mu.Lock()
	t.w.add(elapsed(t.clock, t.origin), 1, a)
	t.mu.Unlock()
}

// record counts an attempt's verdict: an Overloaded one as not accepted
// whatever its outcome, any other that is evidence (not [Ignore]) as
// accepted unless it is a [Hang].
func (t *Throttle) record(v Verdict) {
	if v.Overloaded || v.Outcome != Ignore {
		t.Record(!v.Overloaded && v.Outcome != Hang)
	}
}

// probability is the refusal probability, at most ThrottleMaxDrop; t.mu
// is held.
func (t *Throttle) probability() float64 {
	req, acc := float64(max(t.w.a, 0)), float64(max(t.w.b, 0))
	return min(ThrottleMaxDrop, max(0, (req-t.k*acc)/(req+1)))
}

// ThrottleSnapshot is a throttle's state, for metrics and tests.
type ThrottleSnapshot struct {
	// Requests and Accepts are the window's counts.
	Requests, Accepts int64
	// Probability is what a request would be refused with now.
	Probability float64
	// Rejected counts the requests refused since the throttle was made.
	Rejected uint64
}

// Snapshot returns the throttle's state. A nil *Throttle returns zeros.
func (t *Throttle) Snapshot() ThrottleSnapshot {
	if t == nil {
		return ThrottleSnapshot{}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.w.advance(elapsed(t.clock, t.origin))
	return ThrottleSnapshot{Requests: t.w.a, Accepts: t.w.b, Probability: t.probability(), Rejected: t.rejected}
}
