package resilience

import (
	"context"
	"testing"
	"time"
)

// slowAnswer answers every attempt after 100 ms of the test clock.
type slowAnswer struct{ clock *TestClock }

func (s slowAnswer) Attempt(context.Context, int) Verdict {
	s.clock.Advance(100 * time.Millisecond)
	return Verdict{Outcome: Success}
}
func (slowAnswer) Report(AttemptRecord) {}

// firstWins is a hedged call whose first attempt answers once gate closes
// and whose hedges wait to be cancelled.
type firstWins struct {
	started chan int
	gate    chan struct{}
}
type firstWinsBranch struct{ h *firstWins }

func (b firstWinsBranch) Attempt(ctx context.Context, n int) Verdict {
	b.h.started <- n
	if n == 1 {
		<-b.h.gate
		return Verdict{Outcome: Success}
	}
	<-ctx.Done()
	return Verdict{Err: ctx.Err(), Outcome: Ignore}
}
func (firstWinsBranch) Report(AttemptRecord)              {}
func (h *firstWins) Attempt(context.Context, int) Verdict { panic("hedged calls run on branches") }
func (h *firstWins) Report(AttemptRecord)                 {}
func (h *firstWins) Branch() Attempter                    { return firstWinsBranch{h} }
func (h *firstWins) Keep(Attempter)                       {}
func (h *firstWins) Drop(Attempter)                       {}

// A hedge the first attempt beats a moment after its launch is cancelled
// with a few milliseconds of its own: that is no latency of the upstream's,
// and recorded it would drag a percentile hedge_after down (to 1 ms here,
// though every answer takes 101 ms). Cancelled hedges record nothing; the
// percentile stays at the answers' latency.
func TestCancelledHedgeLeavesThePercentile(t *testing.T) {
	clock := NewTestClock(epoch)
	cfg := DefaultPolicyConfig()
	cfg.HedgeAfter = "p25"
	cfg.RetryBudget = BudgetBucket
	cfg.RetryBudgetMaxTokens = 10000
	p := NewPolicy(PolicyOpts{Name: "billing", Config: cfg, Clock: clock})
	for range 100 { // 100 answers of 100 ms: the p25 is 100 ms
		var run Run
		if err := p.Begin(context.Background(), &run, RunOpts{}); err != nil {
			t.Fatal(err)
		}
		run.Attempts(slowAnswer{clock})
		run.End(run.Outcome())
	}
	d0, ok := p.hedgeDelay()
	if !ok || d0 != 100*time.Millisecond {
		t.Fatalf("hedge delay %v %v after 100 answers of 100ms, want 100ms", d0, ok)
	}
	h := &firstWins{started: make(chan int, 4)}
	lowest := d0
	for i := range 80 {
		d, _ := p.hedgeDelay()
		lowest = min(lowest, d)
		h.gate = make(chan struct{})
		var run Run
		if err := p.Begin(context.Background(), &run, RunOpts{Hedge: true}); err != nil {
			t.Fatal(err)
		}
		done := make(chan Verdict, 1)
		go func() { done <- run.Attempts(h) }()
		<-h.started
		clock.BlockUntil(1)
		clock.Advance(d)
		<-h.started // the hedge, at the delay
		clock.Advance(101*time.Millisecond - d)
		close(h.gate) // the first attempt answers 101 ms after it started
		if v := <-done; v.Err != nil {
			t.Fatalf("call %d: %v", i, v.Err)
		}
		run.End(run.Outcome())
	}
	if lowest < d0 {
		t.Fatalf("hedge_after fell from %v to %v during 80 hedged calls whose every answer took 101 ms: the cancelled hedges were recorded as latencies", d0, lowest)
	}
}
