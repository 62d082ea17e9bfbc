package resilience

import (
	"cmp"
	"fmt"
	"math"
	"sync"
	"time"
)

// Retry budget defaults (docs/design.md, "Resilience rules"): the sliding
// ratio, and the token bucket (10 tokens, at most 10, +0.1 per call).
const (
	DefaultBudgetRatio        = 0.2
	DefaultBudgetMinPerSecond = 1.0
	DefaultBudgetWindow       = 10 * time.Second

	DefaultTokenBucketMaxTokens     = 10.0
	DefaultTokenBucketTokensPerCall = 0.1
)

// budgetBuckets is how many buckets each budget window has: the ratio rule
// is exact to within Window/10 (1 s by default) and the per-second rule to
// within 100 ms.
const budgetBuckets = 10

// RetryBudgetOpts configures a [RetryBudget]. Zero fields take their
// defaults.
type RetryBudgetOpts struct {
	// Name names the dependency, as its breaker and bulkhead do: a
	// [Registry] shows the three together. Defaults to "".
	Name string
	// Ratio lets a retry start while the retries of the last Window stay
	// below Ratio × the calls (first attempts) of the last Window.
	// Defaults to 0.2.
	Ratio float64
	// MinPerSecond lets a retry start, whatever Ratio says, while fewer than
	// this many retries were made in the last second, so a quiet client can
	// still retry. Defaults to 1.
	MinPerSecond float64
	// Window is the span of the ratio rule. Defaults to 10s.
	Window time.Duration
	// Clock is the time source. Defaults to RealClock().
	Clock Clock
	// TokenBucket, when set, replaces the sliding ratio with a token bucket
	// (Ratio, MinPerSecond and Window are then unused). Defaults to nil.
	TokenBucket *TokenBucketOpts
}

// TokenBucketOpts configures the token-bucket variant of [RetryBudget]: the
// bucket starts with InitialTokens, every call adds TokensPerCall (never
// above MaxTokens), and every retry needs and takes one whole token. This is
// the gRPC-throttling style (docs/design.md, "Worked cases"): 50 calls of 3 attempts to an
// always-failing upstream make 64 requests (50 + 10 initial + 4 earned).
type TokenBucketOpts struct {
	// MaxTokens caps the bucket. Defaults to 10.
	MaxTokens float64
	// InitialTokens is the bucket's content at start. Defaults to MaxTokens.
	InitialTokens float64
	// TokensPerCall is added by every RecordCall. Defaults to 0.1.
	TokensPerCall float64
}

// RetryBudget limits retries to a share of the calls, so a client that
// retries does not multiply its traffic when its dependency is down. Call
// RecordCall once per call (first attempt) and TryRetry before every retry.
// A RetryBudget is per dependency and per process, and safe for concurrent
// use. A nil *RetryBudget allows every retry.
type RetryBudget struct {
	name   string
	ratio  float64
	minPS  float64
	clock  Clock
	origin time.Time
	bucket bool

	mu      sync.Mutex
	long    window // a: calls, b: retries over Window
	second  window // a: retries over the last second
	tokens  int64  // token bucket content in millitokens
	maxTok  int64
	perCall int64
	calls   uint64
	retries uint64
	denied  uint64
	// minutes counts per minute over HistorySpan (a: retries allowed,
	// b: refused), for Minutes. Only TryRetry writes it: the per-call
	// path pays nothing for it.
	minutes window
}

// BudgetSnapshot is a budget's counters, for metrics.
type BudgetSnapshot struct {
	// Calls, Retries and Denied count since the budget was made.
	Calls, Retries, Denied uint64
	// WindowCalls and WindowRetries are the sliding counts (ratio mode).
	WindowCalls, WindowRetries int
	// Tokens is the bucket's content (token-bucket mode).
	Tokens float64
}

// NewRetryBudget returns a RetryBudget. It panics if an option is negative
// or not a number.
func NewRetryBudget(o RetryBudgetOpts) *RetryBudget {
	if bad(o.Ratio) || bad(o.MinPerSecond) || o.Window < 0 {
		panic(fmt.Sprintf("resilience: retry budget: negative option in %+v", o))
	}
	clock, reg, owner := unwrapClock(o.Clock)
	b := &RetryBudget{name: o.Name, clock: clock, origin: clock.Now(), minutes: newWindow(HistorySpan, historyMinutes)}
	defer reg.addBudget(owner, b)
	if tb := o.TokenBucket; tb != nil {
		if bad(tb.MaxTokens) || bad(tb.InitialTokens) || bad(tb.TokensPerCall) {
			panic(fmt.Sprintf("resilience: retry budget: negative token bucket option in %+v", *tb))
		}
		maxT := cmp.Or(tb.MaxTokens, DefaultTokenBucketMaxTokens)
		perCall := cmp.Or(tb.TokensPerCall, DefaultTokenBucketTokensPerCall)
		initial := cmp.Or(tb.InitialTokens, maxT)
		b.bucket = true
		b.maxTok = milli(maxT)
		b.perCall = milli(perCall)
		b.tokens = min(milli(initial), b.maxTok)
		return b
	}
	o.Ratio = cmp.Or(o.Ratio, DefaultBudgetRatio)
	o.MinPerSecond = cmp.Or(o.MinPerSecond, DefaultBudgetMinPerSecond)
	o.Window = cmp.Or(o.Window, DefaultBudgetWindow)
	b.ratio, b.minPS = o.Ratio, o.MinPerSecond
	b.long = newWindow(o.Window, budgetBuckets)
	b.second = newWindow(time.Second, budgetBuckets)
	return b
}

func bad(f float64) bool { return f < 0 || math.IsNaN(f) || math.IsInf(f, 0) }

// milli converts tokens to millitokens, so 0.1 added ten times is exactly one.
func milli(f float64) int64 { return int64(math.Round(f * 1000)) }

// RecordCall records one call (a first attempt).
func (b *RetryBudget) RecordCall() { b.recordCall(time.Time{}, false) }

// recordCallAt is RecordCall for a caller that has read the budget's clock
// already: now.
func (b *RetryBudget) recordCallAt(now time.Time) { b.recordCall(now, true) }

func (b *RetryBudget) recordCall(now time.Time, known bool) {
	if b == nil {
		return
	}
	b.mu.Lock()
	b.calls++
	if b.bucket {
		b.tokens = min(b.tokens+b.perCall, b.maxTok)
	} else {
		at := now.Sub(b.origin)
		if !known {
			at = elapsed(b.clock, b.origin)
		}
		b.long.add(at, 1, 0)
	}
	b.mu.Unlock()
}

// TryRetry reports whether a retry may start and, if so, records it. A false
// is counted as a denial (see Snapshot); the caller returns the failure it
// has instead of retrying.
func (b *RetryBudget) TryRetry() bool {
	ok, _ := b.grant()
	return ok
}

// grant is TryRetry, also returning when the retry was granted (the time
// since the budget's origin), for giveBack.
func (b *RetryBudget) grant() (bool, time.Duration) {
	if b == nil {
		return true, 0
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	now := elapsed(b.clock, b.origin)
	if b.bucket {
		if b.tokens < 1000 {
			b.denied++
			b.minutes.add(now, 0, 1)
			return false, now
		}
		b.tokens -= 1000
		b.retries++
		b.minutes.add(now, 1, 0)
		return true, now
	}
	b.long.advance(now)
	b.second.advance(now)
	if float64(b.long.b) < b.ratio*float64(b.long.a) || float64(b.second.a) < b.minPS {
		b.long.add(now, 0, 1)
		b.second.add(now, 1, 0)
		b.retries++
		b.minutes.add(now, 1, 0)
		return true, now
	}
	b.denied++
	b.minutes.add(now, 0, 1)
	return false, now
}

// giveBack undoes the retry granted at at (as grant returned it) whose
// attempt sent nothing (every instance of the dependency refusing it): it
// cost the dependency nothing, so it spends nothing. The bucket gets its
// token back; the windows forget it while it is still in their span.
func (b *RetryBudget) giveBack(at time.Duration) {
	if b == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.retries--
	b.minutes.sub(at, 1, 0)
	if b.bucket {
		b.tokens = min(b.tokens+1000, b.maxTok)
		return
	}
	b.long.sub(at, 0, 1)
	b.second.sub(at, 1, 0)
}

// historyMinutes is how many one-minute buckets HistorySpan holds.
const historyMinutes = int(HistorySpan / time.Minute)

// RetryMinute is one minute of a budget's decisions.
type RetryMinute struct {
	// Start is the minute's start, on the budget's clock.
	Start time.Time
	// Allowed and Refused count the retries the budget let start and
	// refused in that minute.
	Allowed, Refused int
}

// Minutes returns the budget's decisions per minute over the last
// [HistorySpan], oldest first: 15 entries, the last one the minute in
// progress.
func (b *RetryBudget) Minutes() []RetryMinute {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := elapsed(b.clock, b.origin)
	b.minutes.advance(now)
	out := make([]RetryMinute, len(b.minutes.buckets))
	n := len(b.minutes.buckets)
	for k := range n {
		// k = 0 is the oldest bucket: the one after the newest in the ring.
		bk := b.minutes.buckets[(b.minutes.idx+1+k)%n]
		epoch := b.minutes.head - int64(n-1-k)
		out[k] = RetryMinute{Start: b.origin.Add(time.Duration(epoch) * b.minutes.width).Round(0), Allowed: int(bk.a), Refused: int(bk.b)}
	}
	return out
}

// Name returns the budget's name.
func (b *RetryBudget) Name() string { return b.name }

// Snapshot returns the budget's counters.
func (b *RetryBudget) Snapshot() BudgetSnapshot {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := BudgetSnapshot{Calls: b.calls, Retries: b.retries, Denied: b.denied}
	if b.bucket {
		s.Tokens = float64(b.tokens) / 1000
	} else {
		b.long.advance(elapsed(b.clock, b.origin))
		s.WindowCalls, s.WindowRetries = int(b.long.a), int(b.long.b)
	}
	return s
}
