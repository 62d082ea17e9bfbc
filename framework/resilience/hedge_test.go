package resilience

import (
	"context"
	"errors"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"
)

// racer is a Hedger whose branches answer as the test says: branch n waits
// for its gate (or its context), then answers with verdicts[n-1].
type racer struct {
	mu       sync.Mutex
	gates    map[int]chan struct{}
	started  chan int
	reported chan int
	verdicts []Verdict
	kept     []int
	dropped  []int
	stops    map[int]Stop
	clock    *TestClock
	// late, when set, is the attempt that answers its verdict only once
	// its gate opens, whatever its context, which it sends on lateCtx.
	late    int
	lateCtx chan context.Context
}

func newRacer(clock *TestClock, verdicts ...Verdict) *racer {
	return &racer{gates: map[int]chan struct{}{}, started: make(chan int, 8), reported: make(chan int, 8), verdicts: verdicts, stops: map[int]Stop{}, clock: clock}
}

func (r *racer) gate(n int) chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.gates[n] == nil {
		r.gates[n] = make(chan struct{})
	}
	return r.gates[n]
}

type branch struct {
	r *racer
	n int
}

func (b *branch) Attempt(ctx context.Context, n int) Verdict {
	b.n = n
	b.r.started <- n
	if n == b.r.late {
		b.r.lateCtx <- ctx
		<-b.r.gate(n)
		return b.r.verdicts[n-1]
	}
	select {
	case <-b.r.gate(n):
		return b.r.verdicts[n-1]
	case <-ctx.Done():
		return Verdict{Err: ctx.Err(), Outcome: Ignore}
	}
}

func (b *branch) Report(rec AttemptRecord) {
	b.r.mu.Lock()
	b.r.stops[rec.N] = rec.Stop
	b.r.mu.Unlock()
	b.r.reported <- rec.N
}

func (r *racer) Attempt(context.Context, int) Verdict { panic("a hedged call runs on branches") }
func (r *racer) Report(AttemptRecord)                 {}
func (r *racer) Branch() Attempter                    { return &branch{r: r} }
func (r *racer) Keep(a Attempter)                     { r.kept = append(r.kept, a.(*branch).n) }
func (r *racer) Drop(a Attempter)                     { r.dropped = append(r.dropped, a.(*branch).n) }

func hedgingPolicy(hedgeAfter string, edit func(*PolicyConfig)) (*Policy, *TestClock) {
	clock := NewTestClock(epoch)
	cfg := DefaultPolicyConfig()
	cfg.HedgeAfter = hedgeAfter
	cfg.RetryBudget = BudgetBucket
	if edit != nil {
		edit(&cfg)
	}
	return NewPolicy(PolicyOpts{Name: "billing", Config: cfg, Clock: clock}), clock
}

// startHedged begins a hedgeable call of p, runs its loop on r in a
// goroutine, and moves the clock past hedge_after (20ms) once the first
// attempt started and the hedge's timer waits.
func startHedged(t *testing.T, p *Policy, clock *TestClock, r *racer) (*Run, <-chan Verdict) {
	t.Helper()
	run := &Run{}
	if err := p.Begin(context.Background(), run, RunOpts{Hedge: true}); err != nil {
		t.Fatal(err)
	}
	done := make(chan Verdict, 1)
	go func() { done <- run.Attempts(r) }()
	<-r.started
	clock.BlockUntil(1)
	clock.Advance(20 * time.Millisecond)
	return run, done
}

// The hedge answers first: its verdict is the call's, the first attempt is
// cancelled, reported StopHedged and dropped; the budget paid one retry and
// the breaker counts one call.
func TestHedgeWins(t *testing.T) {
	p, clock := hedgingPolicy("20ms", nil)
	r := newRacer(clock, Verdict{Outcome: Success}, Verdict{Outcome: Success})
	run, done := startHedged(t, p, clock, r)
	if n := <-r.started; n != 2 {
		t.Fatalf("attempt %d started, want the hedge, 2", n)
	}
	close(r.gate(2))
	v := <-done
	run.End(run.Outcome())
	if v.Err != nil || run.Made() != 2 || run.Stopped() != StopFinal {
		t.Fatalf("verdict %+v, made %d, stop %v", v, run.Made(), run.Stopped())
	}
	if len(r.kept) != 1 || r.kept[0] != 2 || len(r.dropped) != 1 || r.dropped[0] != 1 || r.stops[1] != StopHedged {
		t.Fatalf("kept %v dropped %v stops %v", r.kept, r.dropped, r.stops)
	}
	if s := p.Budget().Snapshot(); s.Retries != 1 {
		t.Fatalf("budget retries %d, want the hedge's 1", s.Retries)
	}
	if s := p.Breaker().Snapshot(); s.WindowCalls != 1 {
		t.Fatalf("breaker counted %d calls, want 1", s.WindowCalls)
	}
}

// A call that is not hedgeable, and a hedge_after percentile not known
// yet, send no hedge: the loop is the sequential one.
func TestHedgeNotSent(t *testing.T) {
	for _, tc := range []struct {
		name, after string
		hedge       bool
	}{{"not idempotent", "20ms", false}, {"percentile unknown", "p95", true}} {
		p, clock := hedgingPolicy(tc.after, nil)
		var run Run
		if err := p.Begin(context.Background(), &run, RunOpts{Hedge: tc.hedge}); err != nil {
			t.Fatal(err)
		}
		s := &script{clock: clock, verdicts: []Verdict{{Outcome: Success}}}
		run.Attempts(s) // a racer would panic: the sequential loop calls Attempt on it
		run.End(run.Outcome())
		if len(s.records) != 1 {
			t.Fatalf("%s: %d attempts", tc.name, len(s.records))
		}
	}
}

// hedge_after = "p90" reads the dependency's answered latencies: none is
// hedged before hedgeMinSamples, then the delay is their 90th percentile.
func TestHedgePercentile(t *testing.T) {
	p, clock := hedgingPolicy("p90", nil)
	for i := range hedgeMinSamples {
		var run Run
		if err := p.Begin(context.Background(), &run, RunOpts{Hedge: true}); err != nil {
			t.Fatal(err)
		}
		took := time.Duration(i%100+1) * time.Millisecond
		run.Attempts(&script{clock: clock, took: took, verdicts: []Verdict{{Outcome: Success}}})
		run.End(run.Outcome())
	}
	d, ok := p.hedgeDelay()
	if !ok || d < 89*time.Millisecond || d > 92*time.Millisecond {
		t.Fatalf("hedge delay %v %v, want about the 90th percentile of 1..100 ms", d, ok)
	}
}

// A retryable failure of one attempt while the other is in flight does not
// end the call: the other's answer does.
func TestHedgeFailureWaitsForTheOther(t *testing.T) {
	p, clock := hedgingPolicy("20ms", nil)
	refused := Verdict{Err: errors.New("connection refused"), Outcome: Failure, Retry: true}
	r := newRacer(clock, Verdict{Outcome: Success}, refused)
	run, done := startHedged(t, p, clock, r)
	<-r.started
	close(r.gate(2)) // the hedge fails first
	if n := <-r.reported; n != 2 {
		t.Fatalf("attempt %d reported, want the failed hedge", n)
	}
	close(r.gate(1))
	v := <-done
	run.End(run.Outcome())
	if v.Err != nil || len(r.kept) != 1 || r.kept[0] != 1 || r.stops[2] != StopHedged {
		t.Fatalf("verdict %+v kept %v stops %v", v, r.kept, r.stops)
	}
}

func TestParseHedgeAfter(t *testing.T) {
	for s, ok := range map[string]bool{"": true, "20ms": true, "p95": true, "p99.9": true, "p0": false, "p100": false, "px": false, "0s": false, "-1s": false, "fast": false} {
		if _, _, err := ParseHedgeAfter(s); (err == nil) != ok {
			t.Errorf("%q: %v", s, err)
		}
	}
}

// A hedge the retry budget refuses is not sent: it is reported to
// OnHedgeRefused as the retry it is (StopBudget), and the call is its first
// attempt's.
func TestHedgeRefusedIsReported(t *testing.T) {
	clock := NewTestClock(epoch)
	cfg := DefaultPolicyConfig()
	cfg.HedgeAfter = "20ms"
	cfg.RetryBudget = BudgetBucket
	cfg.RetryBudgetMaxTokens = 1
	refused := make(chan Stop, 1)
	p := NewPolicy(PolicyOpts{Name: "billing", Config: cfg, Clock: clock, OnHedgeRefused: func(s Stop) { refused <- s }})
	if !p.Budget().TryRetry() {
		t.Fatal("the bucket did not start with its token")
	}
	r := newRacer(clock, Verdict{Outcome: Success})
	run, done := startHedged(t, p, clock, r)
	if s := <-refused; s != StopBudget {
		t.Fatalf("hedge refused with %v, want StopBudget", s)
	}
	close(r.gate(1))
	v := <-done
	run.End(run.Outcome())
	if v.Err != nil || run.Made() != 1 || len(r.kept) != 1 || r.kept[0] != 1 {
		t.Fatalf("verdict %+v, made %d, kept %v; want the first attempt alone", v, run.Made(), r.kept)
	}
}

// unsentVerdict is the verdict of an attempt that found no instance to
// take it (every one's breaker refusing it): nothing was sent.
var unsentVerdict = Verdict{Err: errors.New("every instance refuses"), Outcome: Ignore, Unsent: true}

// A hedge that sent nothing neither wins nor cancels the attempt in
// flight (with instances, that attempt may be a half-open instance's
// probe): it is reported StopHedged and dropped, its budget is given back,
// the hedge timer is armed again (it was not a hedge sent), and the call's
// answer is the first attempt's.
func TestHedgeUnsentNeitherWinsNorCancels(t *testing.T) {
	p, clock := hedgingPolicy("20ms", nil)
	r := newRacer(clock, Verdict{Outcome: Success}, unsentVerdict)
	run, done := startHedged(t, p, clock, r)
	<-r.started
	close(r.gate(2)) // the hedge finds no instance
	if n := <-r.reported; n != 2 {
		t.Fatalf("attempt %d reported first, want the unsent hedge (2), the first still in flight", n)
	}
	clock.BlockUntil(1) // the hedge timer, armed again
	if s := p.Budget().Snapshot(); s.Retries != 0 {
		t.Fatalf("budget retries %d, want the unsent hedge's given back", s.Retries)
	}
	close(r.gate(1))
	v := <-done
	run.End(run.Outcome())
	if v.Err != nil || run.Stopped() != StopFinal || r.stops[2] != StopHedged {
		t.Fatalf("verdict %+v, stop %v, stops %v; want the first attempt's answer", v, run.Stopped(), r.stops)
	}
	if run.Made() != 2 || run.Sent() != 1 {
		t.Fatalf("made %d, sent %d; want the hedge made and not sent", run.Made(), run.Sent())
	}
	if len(r.kept) != 1 || r.kept[0] != 1 || len(r.dropped) != 1 || r.dropped[0] != 2 {
		t.Fatalf("kept %v dropped %v, want the first kept and the hedge dropped", r.kept, r.dropped)
	}
}

// When the attempt that sent nothing is the last one standing, after the
// one sent failed retryably while it was in flight, the call stops (as a
// retry that finds no instance stops the sequential loop) and keeps the
// attempt sent, whose failure is what the dependency said.
func TestHedgeUnsentLastStandingKeepsTheSentAttempt(t *testing.T) {
	p, clock := hedgingPolicy("20ms", nil)
	refused := Verdict{Err: errors.New("connection refused"), Outcome: Failure, Retry: true}
	r := newRacer(clock, refused, unsentVerdict)
	run, done := startHedged(t, p, clock, r)
	<-r.started
	close(r.gate(1)) // the first fails while the hedge is in flight
	if n := <-r.reported; n != 1 {
		t.Fatalf("attempt %d reported, want the failed first", n)
	}
	close(r.gate(2))
	<-done
	run.End(run.Outcome())
	if run.Stopped() != StopFinal || run.Made() != 2 {
		t.Fatalf("stop %v after %d attempts, want StopFinal after 2", run.Stopped(), run.Made())
	}
	if len(r.kept) != 1 || r.kept[0] != 1 || len(r.dropped) != 1 || r.dropped[0] != 2 {
		t.Fatalf("kept %v dropped %v, want the sent attempt kept and the unsent one dropped", r.kept, r.dropped)
	}
	if s := p.Budget().Snapshot(); s.Retries != 0 {
		t.Fatalf("budget retries %d, want the unsent hedge's given back", s.Retries)
	}
}

// A hedged call holds room for the branches it can run at once, 1 +
// min(max_hedges, attempts − 1), whatever max_hedges says: a policy made
// without validation (max_hedges = 1 000 000, attempts = 3) allocates a
// few kilobytes per call, not tens of megabytes.
func TestHedgedCallSizedByAttempts(t *testing.T) {
	p, clock := hedgingPolicy("20ms", func(c *PolicyConfig) { c.MaxHedges = 1_000_000 })
	r := newRacer(clock, Verdict{Outcome: Success})
	close(r.gate(1))
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	var run Run
	if err := p.Begin(context.Background(), &run, RunOpts{Hedge: true}); err != nil {
		t.Fatal(err)
	}
	if v := run.Attempts(r); v.Err != nil {
		t.Fatal(v.Err)
	}
	run.End(run.Outcome())
	runtime.ReadMemStats(&after)
	if got := after.TotalAlloc - before.TotalAlloc; got > 1<<20 {
		t.Fatalf("a hedged call allocated %d bytes, want well under 1 MiB", got)
	}
}

// A retryable answer (a 503: Err nil) that ends while another attempt is in
// flight is not lost when the attempts still standing then fail with no
// answer (a transport error): it stays held over a later such failure, and
// the call, out of attempts, keeps it before the last one standing, as the
// sequential loop's plugin still has an earlier attempt's response when
// its last got none. An answer held is replaced by a later answer.
func TestHedgeKeepsAnAnswerOverALaterError(t *testing.T) {
	unavailable := Verdict{Outcome: Failure, Retry: true} // the dependency's 503
	reset := Verdict{Err: errors.New("connection reset"), Outcome: Failure, Retry: true}
	for _, tc := range []struct {
		name     string
		verdicts []Verdict
		order    []int // the attempts' ends, the last one standing last
		kept     []int
		dropped  []int
	}{
		{"answer then error", []Verdict{reset, unavailable}, []int{2, 1}, []int{2, 1}, nil},
		{"answer, error, error", []Verdict{reset, unavailable, reset}, []int{2, 3, 1}, []int{2, 1}, []int{3}},
		{"error then answer", []Verdict{unavailable, reset}, []int{2, 1}, []int{1}, []int{2}},
		{"answer, answer, error", []Verdict{reset, unavailable, unavailable}, []int{2, 3, 1}, []int{3, 1}, []int{2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, clock := hedgingPolicy("20ms", func(c *PolicyConfig) { c.Attempts, c.MaxHedges = len(tc.verdicts), len(tc.verdicts)-1 })
			r := newRacer(clock, tc.verdicts...)
			run, done := startHedged(t, p, clock, r)
			for n := 2; n <= len(tc.verdicts); n++ {
				if got := <-r.started; got != n {
					t.Fatalf("attempt %d started, want the hedge %d", got, n)
				}
				if n < len(tc.verdicts) {
					clock.BlockUntil(1) // the next hedge's timer
					clock.Advance(20 * time.Millisecond)
				}
			}
			for i, n := range tc.order {
				close(r.gate(n))
				if i < len(tc.order)-1 {
					if got := <-r.reported; got != n {
						t.Fatalf("attempt %d reported, want %d", got, n)
					}
				}
			}
			<-done
			run.End(run.Outcome())
			if run.Stopped() != StopAttempts {
				t.Fatalf("stop %v, want StopAttempts", run.Stopped())
			}
			if !slices.Equal(r.kept, tc.kept) || !slices.Equal(r.dropped, tc.dropped) {
				t.Fatalf("kept %v dropped %v, want kept %v dropped %v", r.kept, r.dropped, tc.kept, tc.dropped)
			}
		})
	}
}

// A hedge that sent nothing gives its budget back when its result reaches
// the loop only after another attempt won, and cancelLosers drains it: its
// verdict is held back until the winner's is in and the loop has cancelled
// it.
func TestHedgeUnsentDrainedGivesItsBudgetBack(t *testing.T) {
	p, clock := hedgingPolicy("20ms", nil)
	r := newRacer(clock, Verdict{Outcome: Success}, unsentVerdict)
	r.late, r.lateCtx = 2, make(chan context.Context, 1)
	run, done := startHedged(t, p, clock, r)
	<-r.started
	hedgeCtx := <-r.lateCtx
	if s := p.Budget().Snapshot(); s.Retries != 1 {
		t.Fatalf("budget retries %d, want the hedge's 1", s.Retries)
	}
	close(r.gate(1))  // the first wins
	<-hedgeCtx.Done() // the loop cancels the hedge: it read the winner's verdict first
	close(r.gate(2))  // the hedge's verdict, Unsent, reaches cancelLosers
	v := <-done
	run.End(run.Outcome())
	if v.Err != nil || r.stops[2] != StopHedged || len(r.kept) != 1 || r.kept[0] != 1 {
		t.Fatalf("verdict %+v, stops %v, kept %v; want the first attempt's answer", v, r.stops, r.kept)
	}
	if s := p.Budget().Snapshot(); s.Retries != 0 {
		t.Fatalf("budget retries %d, want the drained unsent hedge's given back", s.Retries)
	}
	if run.Sent() != 1 {
		t.Fatalf("sent %d, want the first attempt alone", run.Sent())
	}
}
