package resilience

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"
)

// hung is an attempt whose own deadline passed with no answer (a read
// timeout shorter than the call's timeout): a Hang, retryable.
var hung = Verdict{Err: context.DeadlineExceeded, Outcome: Hang, Retry: true}

// readGap is how long a hung attempt takes in these tests: a read timeout
// well inside the call's timeout, so a retry would fit.
const readGap = 5 * time.Second

// during is a script that runs fn during attempt n, before its verdict:
// another call answered, or the breaker opened, while the attempt waited.
type during struct {
	script
	n  int
	fn func()
}

func (d *during) Attempt(ctx context.Context, n int) Verdict {
	if n == d.n {
		d.fn()
	}
	return d.script.Attempt(ctx, n)
}

// otherCall runs one more call of p to its end with outcome o.
func otherCall(t *testing.T, p *Policy, o Outcome) {
	t.Helper()
	r := new(Run)
	if err := p.Begin(t.Context(), r, RunOpts{}); err != nil {
		t.Fatalf("another call was refused: %v", err)
	}
	r.End(o)
}

// A hung attempt with nothing answered since the call was admitted opens
// the breaker for a full cool-down at once: the call makes no retry
// (StopOpen, no wait), End counts nothing more, and the request's next
// call is refused without paying the read gap again.
func TestRunHangOpensOnSilence(t *testing.T) {
	t.Parallel()
	s := setupPolicy(t, 3, time.Minute, withBucket)
	otherCall(t, s.p, Success) // an answer before the hung call was admitted does not count
	r := new(Run)
	if err := s.p.Begin(t.Context(), r, RunOpts{}); err != nil {
		t.Fatal(err)
	}
	a := &script{clock: s.clock, took: readGap, verdicts: []Verdict{hung, answered}}
	v := r.Attempts(a)
	r.End(r.Outcome())
	if v.Outcome != Hang || r.Made() != 1 || r.Stopped() != StopOpen || len(s.clock.Sleeps()) != 0 {
		t.Fatalf("verdict %+v after %d attempts, stopped %s, sleeps %v; want one hung attempt, stopped open, no wait",
			v, r.Made(), r.Stopped(), s.clock.Sleeps())
	}
	if got, want := a.stops(), []Stop{StopOpen}; !slices.Equal(got, want) {
		t.Fatalf("stops = %v, want %v", got, want)
	}
	cool := DefaultPolicyConfig().BreakerCoolDown
	snap := s.p.Breaker().Snapshot()
	if snap.State != StateOpen || snap.RetryAfter != cool || snap.Opens != 1 {
		t.Fatalf("breaker = %+v, want open for a full %s, opened once", snap, cool)
	}
	var open *OpenError
	next := new(Run)
	if err := s.p.Begin(t.Context(), next, RunOpts{}); !errors.As(err, &open) {
		t.Fatalf("the request's next call: %v, want refused by the open breaker", err)
	}
	if s.p.Bulkhead().InFlight() != 0 {
		t.Fatal("the bulkhead place was not freed")
	}
	if StopOpen.String() != "open" {
		t.Fatalf("StopOpen = %q", StopOpen.String())
	}
}

// When the dependency answered another call while the attempt hung, it is
// alive: the ticket stays the call's, the retry is made, and the breaker
// counts the call's last outcome as before: one answered call, or one
// failure among answers when every attempt hung (Done(Hang) with answers).
func TestRunHangWhileOthersAnswer(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		attempts int
		verdicts []Verdict
		stops    []Stop
		calls    int // the breaker's window: the other call and this one
		failures int
	}{
		{name: "the retry answers", attempts: 3, verdicts: []Verdict{hung, answered}, stops: []Stop{StopNone, StopFinal}, calls: 2},
		{name: "every attempt hangs", attempts: 2, verdicts: []Verdict{hung}, stops: []Stop{StopNone, StopAttempts}, calls: 2, failures: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := setupPolicy(t, tc.attempts, time.Minute, withBucket)
			r := new(Run)
			if err := s.p.Begin(t.Context(), r, RunOpts{}); err != nil {
				t.Fatal(err)
			}
			a := &during{script: script{clock: s.clock, took: readGap, verdicts: tc.verdicts}, n: 1,
				fn: func() { otherCall(t, s.p, Success) }}
			r.Attempts(a)
			r.End(r.Outcome())
			if got := a.stops(); !slices.Equal(got, tc.stops) {
				t.Fatalf("stops = %v, want %v", got, tc.stops)
			}
			snap := s.p.Breaker().Snapshot()
			if snap.State != StateClosed || snap.WindowCalls != tc.calls || snap.WindowFailures != tc.failures || snap.Consecutive != tc.failures {
				t.Fatalf("breaker = %+v, want closed, %d calls, %d failures", snap, tc.calls, tc.failures)
			}
		})
	}
}

// A breaker another call opened while this call's attempt hung refuses the
// retry too: the call stops (StopOpen) instead of waiting the read gap
// again, and its stale ticket counts nothing at End.
func TestRunHangAfterAnotherOpenedStops(t *testing.T) {
	t.Parallel()
	s := setupPolicy(t, 3, time.Minute, withBucket)
	r := new(Run)
	if err := s.p.Begin(t.Context(), r, RunOpts{}); err != nil {
		t.Fatal(err)
	}
	a := &during{script: script{clock: s.clock, took: readGap, verdicts: []Verdict{hung, answered}}, n: 1,
		fn: func() {
			otherCall(t, s.p, Success) // something answered: this call's hang alone would not trip
			s.p.Breaker().Trip()
		}}
	r.Attempts(a)
	r.End(r.Outcome())
	if r.Made() != 1 || r.Stopped() != StopOpen {
		t.Fatalf("%d attempts, stopped %s; want 1, open", r.Made(), r.Stopped())
	}
	if snap := s.p.Breaker().Snapshot(); snap.State != StateOpen || snap.Opens != 1 {
		t.Fatalf("breaker = %+v, want open once", snap)
	}
}

// The half-open breaker's probe that hangs opens it again for a full
// cool-down at once, and makes no retry in the same call.
func TestRunProbeHangStops(t *testing.T) {
	t.Parallel()
	s := setupPolicy(t, 3, time.Minute, func(c *PolicyConfig) { withBucket(c); c.BreakerFailures = 1 })
	otherCall(t, s.p, Failure)
	cool := DefaultPolicyConfig().BreakerCoolDown
	s.clock.Advance(cool)
	r := new(Run)
	if err := s.p.Begin(t.Context(), r, RunOpts{}); err != nil || !r.Probe() {
		t.Fatalf("after the cool-down: %v (probe %v), want the probe", err, r.Probe())
	}
	a := &script{clock: s.clock, took: readGap, verdicts: []Verdict{hung, answered}}
	r.Attempts(a)
	r.End(r.Outcome())
	if r.Made() != 1 || r.Stopped() != StopOpen {
		t.Fatalf("%d attempts, stopped %s; want 1, open", r.Made(), r.Stopped())
	}
	if snap := s.p.Breaker().Snapshot(); snap.State != StateOpen || snap.RetryAfter != cool || snap.Opens != 2 {
		t.Fatalf("breaker = %+v, want open again for a full %s", snap, cool)
	}
}

// An attempt cut by the caller is no evidence: no silence rule, the
// breaker stays closed.
func TestRunHangCutByCallerIsIgnored(t *testing.T) {
	t.Parallel()
	s := setupPolicy(t, 3, time.Minute, withBucket)
	ctx, cancel := context.WithCancel(t.Context())
	r := new(Run)
	if err := s.p.Begin(ctx, r, RunOpts{}); err != nil {
		t.Fatal(err)
	}
	a := &during{script: script{clock: s.clock, verdicts: []Verdict{hung}}, n: 1, fn: cancel}
	r.Attempts(a)
	r.End(r.Outcome())
	if snap := s.p.Breaker().Snapshot(); snap.State != StateClosed || snap.Opens != 0 || snap.WindowCalls != 0 {
		t.Fatalf("breaker = %+v, want closed, nothing counted", snap)
	}
}

// instances is an Attempter over two instances with breakers of their own,
// as the http and grpc plugins' are: attempt n goes to instance n-1, takes
// its breaker's ticket, and Report ends it with DoneAttempt.
type instances struct {
	script
	brs    []*Breaker
	ticket Ticket
}

func (in *instances) Attempt(ctx context.Context, n int) Verdict {
	t, err := in.brs[n-1].Allow()
	if err != nil {
		return Verdict{Err: err, Outcome: Ignore}
	}
	in.ticket = t
	return in.script.Attempt(ctx, n)
}

func (in *instances) Report(rec AttemptRecord) {
	in.ticket.DoneAttempt(rec.Verdict.Outcome)
	in.ticket = Ticket{}
	in.script.Report(rec)
}

// Per-instance tickets follow the same rule: the instance that hung in
// silence is open for a full cool-down, the retry goes to the other one,
// and the next call to the hung instance is refused at once.
func TestRunInstanceHangOpensItsBreaker(t *testing.T) {
	t.Parallel()
	s := setupPolicy(t, 3, time.Minute, withBucket)
	cool := DefaultPolicyConfig().BreakerCoolDown
	var brs []*Breaker
	for _, name := range []string{"billing a", "billing b"} {
		brs = append(brs, NewBreaker(DefaultPolicyConfig().Opts(name, s.clock, nil)))
	}
	r := new(Run)
	if err := s.p.Begin(t.Context(), r, RunOpts{NoBreaker: true}); err != nil {
		t.Fatal(err)
	}
	a := &instances{script: script{clock: s.clock, took: readGap, verdicts: []Verdict{hung, answered}}, brs: brs}
	v := r.Attempts(a)
	r.End(r.Outcome())
	if v.Err != nil || r.Made() != 2 {
		t.Fatalf("verdict %+v after %d attempts; want the second instance's answer", v, r.Made())
	}
	// Opened when the first attempt hung: since then the wait and the
	// second attempt passed.
	if snap, left := brs[0].Snapshot(), cool-a.records[0].Wait-readGap; snap.State != StateOpen || snap.RetryAfter != left {
		t.Fatalf("the hung instance's breaker = %+v, want open for a full %s (%s left)", snap, cool, left)
	}
	if snap := brs[1].Snapshot(); snap.State != StateClosed {
		t.Fatalf("the answering instance's breaker = %+v, want closed", snap)
	}
	if _, err := brs[0].Allow(); err == nil {
		t.Fatal("the next call to the hung instance was let through")
	}
	// With an answer from the instance meanwhile, DoneAttempt(Hang) is one
	// failure, as Done(Hang) is.
	tk, _ := brs[1].Allow()
	other, _ := brs[1].Allow()
	other.DoneAttempt(Success)
	tk.DoneAttempt(Hang)
	if snap := brs[1].Snapshot(); snap.State != StateClosed || snap.Consecutive != 1 {
		t.Fatalf("after a hang while the instance answered: %+v, want closed with one failure", snap)
	}
}

// Hedged: a hang while the other attempt is in flight decides nothing (the
// other answers, the breaker closes on it); when the last attempt standing
// hangs too, the silence rule opens the breaker and the call stops.
func TestHedgedHang(t *testing.T) {
	t.Run("the hedge answers", func(t *testing.T) {
		p, clock := hedgingPolicy("20ms", nil)
		r := newRacer(clock, hung, Verdict{Outcome: Success})
		run, done := startHedged(t, p, clock, r)
		<-r.started
		close(r.gate(1)) // the first attempt hangs while the hedge is in flight
		if n := <-r.reported; n != 1 {
			t.Fatalf("attempt %d reported, want the hung one", n)
		}
		close(r.gate(2))
		v := <-done
		run.End(run.Outcome())
		if v.Err != nil || r.stops[1] != StopHedged || r.stops[2] != StopFinal {
			t.Fatalf("verdict %+v stops %v", v, r.stops)
		}
		if snap := p.Breaker().Snapshot(); snap.State != StateClosed || snap.WindowCalls != 1 || snap.WindowFailures != 0 {
			t.Fatalf("breaker = %+v, want closed, one call answered", snap)
		}
	})
	t.Run("both hang", func(t *testing.T) {
		p, clock := hedgingPolicy("20ms", nil)
		r := newRacer(clock, hung, hung, Verdict{Outcome: Success})
		run, done := startHedged(t, p, clock, r)
		<-r.started
		close(r.gate(1))
		<-r.reported
		close(r.gate(2))
		v := <-done
		run.End(run.Outcome())
		if v.Outcome != Hang || run.Made() != 2 || run.Stopped() != StopOpen || r.stops[2] != StopOpen {
			t.Fatalf("verdict %+v after %d attempts, stopped %s, stops %v; want 2 hung attempts, stopped open",
				v, run.Made(), run.Stopped(), r.stops)
		}
		if snap := p.Breaker().Snapshot(); snap.State != StateOpen || snap.Opens != 1 {
			t.Fatalf("breaker = %+v, want open once", snap)
		}
	})
}
