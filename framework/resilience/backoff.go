package resilience

import (
	"math"
	"math/rand/v2"
	"time"
)

// Backoff defaults. The base is the first pause of docs/design.md's rule for
// calling other services (100 ms, doubling);
// the cap keeps a long retry loop from sleeping for minutes.
const (
	DefaultBackoffBase = 100 * time.Millisecond
	DefaultBackoffMax  = 5 * time.Second
)

// Jitter is how a [Backoff] spreads its delays around the exponential curve.
type Jitter uint8

const (
	// JitterFull draws each delay uniformly in [0, ceiling]: clients that
	// failed together spread over the whole interval, so the dependency
	// never meets them as one spike.
	JitterFull Jitter = iota
	// JitterProportional draws each delay uniformly within ±20 % of the
	// nominal delay (80–120 ms, then 160–240 ms with a 100 ms base): waits
	// stay close to the curve, so a caller can count on a retry not coming
	// sooner than 80 % of it, while clients still drift apart.
	JitterProportional
)

// ProportionalSpread is the half-width of [JitterProportional]'s interval, as
// a share of the nominal delay.
const ProportionalSpread = 0.2

// String returns "full" or "proportional".
func (j Jitter) String() string { return enumName(jitterNames, j, "Jitter") }

var jitterNames = []string{
	JitterFull:         "full",
	JitterProportional: "proportional",
}

// Backoff computes exponential delays with jitter: the nominal delay before
// retry n (n = 1 for the first retry) is min(Base × 2^(n−1), Max), its
// [Backoff.Ceiling]; [JitterFull] (the default) draws the delay uniformly in
// [0, nominal], [JitterProportional] in [0.8 × nominal, 1.2 × nominal].
// Without jitter every client that failed together retries together, and the
// dependency sees the same spike every round. A zero Backoff uses the
// defaults; the value is safe for concurrent use.
type Backoff struct {
	// Base is the nominal delay of the first retry. Defaults to 100ms.
	Base time.Duration
	// Max caps every nominal delay (a proportional delay may exceed it by
	// up to 20 %). Defaults to 5s.
	Max time.Duration
	// Jitter is how delays spread. Defaults to JitterFull.
	Jitter Jitter
}

// Ceiling returns the nominal delay of retry attempt:
// min(Base × 2^(attempt−1), Max). An attempt below 1 counts as 1. With full
// jitter it is the largest delay Delay(attempt) can return.
func (b Backoff) Ceiling(attempt int) time.Duration {
	base, maxD := b.Base, b.Max
	if base <= 0 {
		base = DefaultBackoffBase
	}
	if maxD <= 0 {
		maxD = DefaultBackoffMax
	}
	if attempt < 1 {
		attempt = 1
	}
	shift := attempt - 1
	if shift >= 62 || base > maxD>>shift {
		return maxD
	}
	return min(base<<shift, maxD)
}

// Delay returns the delay before retry attempt (1-based): uniform in
// [0, Ceiling(attempt)] with full jitter, in
// [Ceiling − 20 %, Ceiling + 20 %] with proportional jitter. It allocates
// nothing.
func (b Backoff) Delay(attempt int) time.Duration {
	c := b.Ceiling(attempt)
	if c <= 0 {
		return 0
	}
	lo, hi := time.Duration(0), c
	if b.Jitter == JitterProportional {
		spread := time.Duration(float64(c) * ProportionalSpread)
		lo, hi = c-spread, c+min(spread, math.MaxInt64-c)
	}
	if hi-lo == math.MaxInt64 {
		return lo + time.Duration(rand.Int64N(int64(hi-lo))) // [lo, hi) : +1 would overflow
	}
	return lo + time.Duration(rand.Int64N(int64(hi-lo)+1))
}
