package resilience

import (
	"context"
	"slices"
	"testing"
	"time"
)

// An attempt driven from outside the loop (a stream's reading) is judged by
// Run.Again with the loop's rules: a retry after the backoff wait, on the
// test clock; the call's own bound (RunOpts.Timeout) instead of the
// policy's; another attempt as long as the last one must fit before it; the
// attempts; the OnAttempt hook and the report hear each attempt before its
// wait; End frees the place once and Again says no more.
func TestRunAgain(t *testing.T) {
	t.Parallel()
	clock := NewTestClock(epoch)
	clock.SetAutoAdvance(true)
	cfg := DefaultPolicyConfig()
	cfg.Attempts, cfg.Timeout, cfg.RetryBudget = 4, time.Second, BudgetBucket
	var heard []AttemptRecord
	p := NewPolicy(PolicyOpts{Name: "billing", Config: cfg, Clock: clock, OnAttempt: func(rec AttemptRecord) { heard = append(heard, rec) }})
	r := new(Run)
	if err := p.Begin(t.Context(), r, RunOpts{Timeout: 30 * time.Second}); err != nil {
		t.Fatal(err)
	}
	if end, ok := r.Deadline(); !ok || !end.Equal(epoch.Add(30*time.Second)) {
		t.Fatalf("deadline = %s, want the call's own 30s, not the policy's 1s", end)
	}
	var reported []AttemptRecord
	report := func(rec AttemptRecord) { reported = append(reported, rec) }

	// The first attempt (begun at Begin) fails after 2s, past the policy's
	// timeout but well within the call's: a retry after the backoff wait.
	clock.Advance(2 * time.Second)
	if !r.Again(failed, report) {
		t.Fatalf("no retry after a retryable failure: stop %s", r.Stopped())
	}
	rec := reported[0]
	if rec.N != 1 || rec.Took != 2*time.Second || rec.Stop != StopNone || r.Made() != 1 {
		t.Fatalf("record %+v, made %d; want attempt 1, took 2s, a retry", rec, r.Made())
	}
	if sleeps := clock.Sleeps(); !slices.Equal(sleeps, []time.Duration{rec.Wait}) || rec.Wait > p.backoff.Ceiling(1) {
		t.Fatalf("sleeps = %v, want the reported wait %s within the backoff's ceiling", sleeps, rec.Wait)
	}

	// The second attempt is measured from the end of the wait: 20s. Another
	// 20s (and a wait) does not fit in what is left of 30s.
	clock.Advance(20 * time.Second)
	if r.Again(failed, report) {
		t.Fatal("a retry that cannot end before the call's deadline")
	}
	if rec := reported[1]; rec.N != 2 || rec.Took != 20*time.Second || rec.Stop != StopDeadline || r.Stopped() != StopDeadline {
		t.Fatalf("record %+v, stopped %s; want attempt 2 stopped by the deadline", rec, r.Stopped())
	}
	if !slices.Equal(heard, reported) {
		t.Fatalf("OnAttempt heard %+v, want what report heard: %+v", heard, reported)
	}
	if r.Outcome() != Failure {
		t.Fatalf("outcome = %s, want the last attempt's failure", r.Outcome())
	}
	r.End(r.Outcome())
	if p.Bulkhead().InFlight() != 0 || r.Context().Err() == nil {
		t.Fatal("End left the place held or the call's context running")
	}
	if snap := p.Breaker().Snapshot(); snap.WindowCalls != 1 || snap.WindowFailures != 1 {
		t.Fatalf("breaker = %+v, want the call counted once, a failure", snap)
	}
	if r.Again(failed, report) || r.Made() != 2 || len(reported) != 2 {
		t.Fatal("Again judged an attempt of an ended call")
	}
}

// Again's other stops are the loop's: the attempts, the budget, the
// silence rule, the caller's cancellation during the wait.
func TestRunAgainStops(t *testing.T) {
	t.Parallel()
	hung := Verdict{Err: context.DeadlineExceeded, Outcome: Hang, Retry: true}
	for _, tc := range []struct {
		name     string
		attempts int
		edit     func(*PolicyConfig)
		verdicts []Verdict
		want     []Stop
	}{
		{name: "attempts", attempts: 2, edit: withBucket, verdicts: []Verdict{failed, failed}, want: []Stop{StopNone, StopAttempts}},
		{name: "final", attempts: 3, edit: withBucket, verdicts: []Verdict{failed, answered}, want: []Stop{StopNone, StopFinal}},
		{
			name: "budget", attempts: 3, verdicts: []Verdict{failed, failed}, want: []Stop{StopNone, StopBudget},
			edit: func(c *PolicyConfig) { c.RetryBudget, c.RetryBudgetMaxTokens = BudgetBucket, 1 },
		},
		// Nothing answered since the call was admitted: the hang opens the
		// breaker and the call makes no retry.
		{name: "silence", attempts: 3, edit: withBucket, verdicts: []Verdict{hung}, want: []Stop{StopOpen}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := setupPolicy(t, tc.attempts, time.Minute, tc.edit)
			r := new(Run)
			if err := s.p.Begin(t.Context(), r, RunOpts{}); err != nil {
				t.Fatal(err)
			}
			var stops []Stop
			for i, v := range tc.verdicts {
				again := r.Again(v, func(rec AttemptRecord) { stops = append(stops, rec.Stop) })
				if again != (i < len(tc.verdicts)-1) {
					t.Fatalf("Again after attempt %d = %v, stops %v", i+1, again, stops)
				}
			}
			r.End(r.Outcome())
			if !slices.Equal(stops, tc.want) || r.Stopped() != tc.want[len(tc.want)-1] {
				t.Fatalf("stops = %v (stopped %s), want %v", stops, r.Stopped(), tc.want)
			}
			if tc.name == "silence" && s.p.Breaker().Snapshot().State != StateOpen {
				t.Fatalf("breaker = %+v, want opened by the silence rule", s.p.Breaker().Snapshot())
			}
		})
	}

	t.Run("wait cut", func(t *testing.T) {
		t.Parallel()
		clock := NewTestClock(epoch) // no auto-advance: the wait blocks
		cfg := DefaultPolicyConfig()
		cfg.Attempts, cfg.Timeout, cfg.RetryBudget = 3, time.Minute, BudgetBucket
		cfg.BackoffBase, cfg.BackoffMax, cfg.BackoffJitter = time.Second, time.Second, JitterNameProportional // a wait of 0.8s at least
		p := NewPolicy(PolicyOpts{Config: cfg, Clock: clock})
		ctx, cancel := context.WithCancel(t.Context())
		r := new(Run)
		if err := p.Begin(ctx, r, RunOpts{}); err != nil {
			t.Fatal(err)
		}
		done := make(chan bool)
		go func() { done <- r.Again(failed, nil) }()
		clock.BlockUntil(1) // Again waits on the clock
		cancel()
		if <-done || r.Stopped() != StopWaitCut {
			t.Fatalf("stopped %s, want the wait cut by the caller", r.Stopped())
		}
		r.End(r.Outcome())
	})
}
