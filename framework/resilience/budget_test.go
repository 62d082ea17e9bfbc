package resilience

import (
	"testing"
	"time"
)

// scriptedCalls runs calls calls of up to attempts attempts each against an
// upstream that always fails, asking budget before every retry, and returns
// how many requests reached the upstream. It is the attempt loop every
// retrying plugin runs: RecordCall once, TryRetry before each retry.
func scriptedCalls(budget *RetryBudget, calls, attempts int) int {
	requests := 0
	for range calls {
		budget.RecordCall()
		for attempt := 1; ; attempt++ {
			requests++ // the upstream answers 503
			if attempt == attempts || !budget.TryRetry() {
				break
			}
		}
	}
	return requests
}

func TestRetryBudgetSpecCounts(t *testing.T) {
	t.Parallel()
	clock := NewTestClock(epoch) // does not move
	cases := []struct {
		name            string
		budget          *RetryBudget
		calls, attempts int
		want            int
	}{
		// docs/design.md, "Worked cases": ratio 0.1, twenty calls of three
		// attempts to an always-503 upstream make at most 23 requests (60
		// without a budget). Here: 20 first attempts, the retry of call 1
		// (min_per_second: no retry yet in the last second, and 0 < 0.1×1),
		// and the retry of call 11 (1 < 0.1×11) make 22.
		{"twenty calls, ratio 0.1", NewRetryBudget(RetryBudgetOpts{Ratio: 0.1, Clock: clock}), 20, 3, 22},
		{"twenty calls, no budget", nil, 20, 3, 60},
		// The second worked case: 50 calls, 3 attempts, token bucket of 10 tokens,
		// +0.1 per call: 50 + 10 initial + 4 earned = 64 (150 without).
		{"fifty calls, token bucket", NewRetryBudget(RetryBudgetOpts{TokenBucket: &TokenBucketOpts{}}), 50, 3, 64},
		{"fifty calls, no budget", nil, 50, 3, 150},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := scriptedCalls(tc.budget, tc.calls, tc.attempts)
			if got != tc.want {
				t.Fatalf("requests = %d, want %d", got, tc.want)
			}
			if tc.name == "twenty calls, ratio 0.1" && got > 23 {
				t.Fatalf("requests = %d, the bound is 23", got)
			}
		})
	}
}

func TestRetryBudgetSlidingWindow(t *testing.T) {
	t.Parallel()
	clock := NewTestClock(epoch)
	b := NewRetryBudget(RetryBudgetOpts{Clock: clock}) // 0.2, 1/s, 10 s
	for range 10 {
		b.RecordCall()
	}
	// 0.2 × 10 calls: two retries by ratio (0 < 2, 1 < 2), then refused.
	for i := range 2 {
		if !b.TryRetry() {
			t.Fatalf("retry %d refused", i+1)
		}
	}
	if b.TryRetry() {
		t.Fatal("third retry allowed, want refused (2 retries ≥ 0.2 × 10 and 2 in the last second)")
	}
	// 1 s later the per-second rule lets one more through.
	clock.Advance(time.Second)
	if !b.TryRetry() {
		t.Fatal("min_per_second retry refused")
	}
	if b.TryRetry() {
		t.Fatal("second retry in the same second allowed")
	}
	// After 10 s the calls have slid out; only min_per_second remains.
	clock.Advance(10 * time.Second)
	snap := b.Snapshot()
	if snap.WindowCalls != 0 || snap.WindowRetries != 0 {
		t.Fatalf("window after 11 s = %+v, want empty", snap)
	}
	if !b.TryRetry() || b.TryRetry() {
		t.Fatal("want exactly one retry from min_per_second")
	}
	snap = b.Snapshot()
	if snap.Calls != 10 || snap.Retries != 4 || snap.Denied != 3 {
		t.Fatalf("snapshot = %+v, want 10 calls, 4 retries, 3 denied", snap)
	}
}

func TestRetryBudgetTokenBucket(t *testing.T) {
	t.Parallel()
	b := NewRetryBudget(RetryBudgetOpts{TokenBucket: &TokenBucketOpts{MaxTokens: 2, InitialTokens: 1, TokensPerCall: 0.5}})
	if !b.TryRetry() || b.TryRetry() {
		t.Fatal("want exactly one retry from the initial token")
	}
	for range 10 {
		b.RecordCall()
	}
	if s := b.Snapshot(); s.Tokens != 2 {
		t.Fatalf("tokens = %v, want capped at 2", s.Tokens)
	}
	if first, second, third := b.TryRetry(), b.TryRetry(), b.TryRetry(); !first || !second || third {
		t.Fatalf("retries from a full bucket of 2: %v %v %v, want exactly two", first, second, third)
	}
}

func TestNewRetryBudgetPanicsOnNonsense(t *testing.T) {
	t.Parallel()
	for _, o := range []RetryBudgetOpts{
		{Ratio: -1}, {MinPerSecond: -1}, {Window: -1}, {TokenBucket: &TokenBucketOpts{MaxTokens: -1}},
	} {
		func() {
			defer func() {
				if r := recover(); r == nil {
					t.Errorf("NewRetryBudget(%+v) did not panic", o)
				}
			}()
			NewRetryBudget(o)
		}()
	}
}

// A retry granted and then given back (its attempt sent nothing: no
// instance would take it) spends nothing: the bucket gets its token back,
// the window forgets it; given back once it has slid out of the window, it
// changes nothing there (it no longer counts).
func TestRetryBudgetGiveBack(t *testing.T) {
	t.Parallel()
	clock := NewTestClock(epoch)
	window := NewRetryBudget(RetryBudgetOpts{Ratio: 0.5, MinPerSecond: 1, Clock: clock})
	for range 4 {
		window.RecordCall()
	}
	ok, at := window.grant()
	if !ok {
		t.Fatal("window: the first retry was refused")
	}
	clock.Advance(500 * time.Millisecond)
	window.giveBack(at)
	if s := window.Snapshot(); s.Retries != 0 || s.WindowRetries != 0 || s.WindowCalls != 4 {
		t.Fatalf("window after the give-back: %+v, want no retry and the 4 calls", s)
	}
	_, at = window.grant()
	clock.Advance(DefaultBudgetWindow + time.Second)
	window.giveBack(at) // slid out: nothing left to take
	if s := window.Snapshot(); s.WindowRetries != 0 || s.WindowCalls != 0 {
		t.Fatalf("window after a late give-back: %+v, want empty", s)
	}

	bucket := NewRetryBudget(RetryBudgetOpts{Clock: clock, TokenBucket: &TokenBucketOpts{MaxTokens: 1}})
	ok, at = bucket.grant()
	if !ok || bucket.TryRetry() {
		t.Fatal("bucket: want one token, then none")
	}
	bucket.giveBack(at)
	if s := bucket.Snapshot(); s.Tokens != 1 || s.Retries != 0 {
		t.Fatalf("bucket after the give-back: %+v, want its token back", s)
	}
}
