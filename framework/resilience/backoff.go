package resilience

import (
	"math"
	"math/rand/v2"
	"time"
)

// Backoff defaults. The base is page 002's first pause (100 ms, doubling);
// the cap keeps a long retry loop from sleeping for minutes.
const (
	DefaultBackoffBase = 100 * time.Millisecond
	DefaultBackoffMax  = 5 * time.Second
)

// Backoff computes full-jitter exponential delays: the wait before retry n
// (n = 1 for the first retry) is uniform in [0, min(Base × 2^(n−1), Max)].
// Without jitter every client that failed together retries together, and
// the dependency sees the same spike every round. A zero Backoff uses the
// defaults; the value is safe for concurrent use.
type Backoff struct {
	// Base is the ceiling of the first retry's delay. Defaults to 100ms.
	Base time.Duration
	// Max caps every ceiling. Defaults to 5s.
	Max time.Duration
}

// Ceiling returns the largest delay Delay(attempt) can return:
// min(Base × 2^(attempt−1), Max). An attempt below 1 counts as 1.
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

// Delay returns the full-jitter delay before retry attempt (1-based),
// uniform in [0, Ceiling(attempt)]. It allocates nothing.
func (b Backoff) Delay(attempt int) time.Duration {
	c := b.Ceiling(attempt)
	if c <= 0 {
		return 0
	}
	if c == math.MaxInt64 {
		return time.Duration(rand.Int64N(int64(c))) // [0, c) : c+1 would overflow
	}
	return time.Duration(rand.Int64N(int64(c) + 1))
}
