package resilience

import (
	"context"
	"testing"
	"time"
)

// A call that hung (the plugin's own deadline expired, no answer) with
// nothing answered since it was admitted makes the breaker half-open at
// once: the next call probes while every other fails fast; a probe that
// hangs too opens it for a full cool-down. Sequential calls: one pays the
// deadline, the probe pays one more, the rest are refused.
func TestSilentHangGoesHalfOpenThenProbeDecides(t *testing.T) {
	t.Parallel()
	s := setupBreaker(t, BreakerOpts{CoolDown: 15 * time.Second})
	s.call(t, Success) // an answer before the hung call was admitted does not count
	s.call(t, Hang)
	if s.state() != StateHalfOpen {
		t.Fatalf("state after one silent hang = %s, want half_open", s.state())
	}
	probe, err := s.br.Allow()
	if err != nil || !probe.Probe() {
		t.Fatalf("the next call: %v (probe %v), want the probe", err, probe.Probe())
	}
	if _, err := s.br.Allow(); err == nil {
		t.Fatal("a call passed while the probe was in flight")
	}
	probe.Done(Hang)
	snap := s.br.Snapshot()
	if snap.State != StateOpen || snap.RetryAfter != 15*time.Second || snap.Opens != 1 {
		t.Fatalf("after the probe hung: %+v, want open for a full 15s", snap)
	}
	c := s.Changes()
	if len(c) != 2 || c[0].To != StateHalfOpen || !c[0].Hang || c[0].Consecutive != 1 || c[1].To != StateOpen || !c[1].Hang {
		t.Fatalf("changes = %+v, want closed→half_open (hang) then half_open→open (hang)", c)
	}
}

// One dead pooled connection (the dependency is fine) costs one call: the
// probe after it is answered and the breaker closes.
func TestSilentHangThenAnsweredProbeCloses(t *testing.T) {
	t.Parallel()
	s := setupBreaker(t, BreakerOpts{})
	s.call(t, Hang)
	s.call(t, Success) // the probe, on a new connection
	if snap := s.br.Snapshot(); snap.State != StateClosed || snap.Consecutive != 0 || snap.Opens != 0 {
		t.Fatalf("after an answered probe: %+v, want closed, never opened", snap)
	}
}

// A hung call while the dependency answered others is one failure among
// others: the dependency is alive, the call was the slow one.
func TestHangWhileOthersAnswerCountsAsOneFailure(t *testing.T) {
	t.Parallel()
	s := setupBreaker(t, BreakerOpts{})
	for i := range 4 {
		slow, err := s.br.Allow()
		if err != nil {
			t.Fatal(err)
		}
		s.call(t, Success) // answered while slow waited
		slow.Done(Hang)
		if s.state() != StateClosed {
			t.Fatalf("hang %d with an answer meanwhile opened the breaker", i+1)
		}
	}
	if snap := s.br.Snapshot(); snap.Consecutive != 1 || snap.WindowFailures != 4 {
		t.Fatalf("snapshot %+v, want 1 consecutive (reset by the answers), 4 failures in the window", snap)
	}
	// The first call that hangs after the last answer is silent: it opens.
	s2 := setupBreaker(t, BreakerOpts{})
	before, _ := s2.br.Allow()
	s2.call(t, Success)
	after, _ := s2.br.Allow()
	before.Done(Hang)
	if s2.state() != StateClosed {
		t.Fatal("a hang admitted before the last answer opened the breaker")
	}
	after.Done(Hang)
	if s2.state() != StateHalfOpen {
		t.Fatalf("a hang admitted after the last answer left the breaker %s, want half_open", s2.state())
	}
}

// A refusal (Failure) is weaker evidence: it takes Failures in a row.
func TestFailuresStillNeedTheCount(t *testing.T) {
	t.Parallel()
	s := setupBreaker(t, BreakerOpts{Failures: 3})
	s.call(t, Failure)
	s.call(t, Failure)
	if s.state() != StateClosed {
		t.Fatalf("two refusals opened a 3-failure breaker")
	}
	s.call(t, Failure)
	if s.state() != StateOpen || s.Changes()[0].Hang {
		t.Fatalf("state %s, changes %+v: want open by the count", s.state(), s.Changes())
	}
}

// A half-open probe that hangs reopens for a full cool-down: one deadline
// per cool-down, paid by one call.
func TestProbeHangReopens(t *testing.T) {
	t.Parallel()
	s := setupBreaker(t, BreakerOpts{Failures: 1, CoolDown: 15 * time.Second})
	s.call(t, Failure) // opens (1 failure)
	s.clock.Advance(15 * time.Second)
	probe, err := s.br.Allow()
	if err != nil || !probe.Probe() {
		t.Fatalf("after the cool-down: %v (probe %v)", err, probe.Probe())
	}
	if _, err := s.br.Allow(); err == nil {
		t.Fatal("a second call passed while the probe was in flight")
	}
	probe.Done(Hang)
	snap := s.br.Snapshot()
	if snap.State != StateOpen || snap.RetryAfter != 15*time.Second || snap.Opens != 2 {
		t.Fatalf("after the probe hung: %+v, want open for a full 15s, 2 openings", snap)
	}
}

// A stale hang (admitted before the breaker changed state) decides nothing.
func TestStaleHangIsDropped(t *testing.T) {
	t.Parallel()
	s := setupBreaker(t, BreakerOpts{CoolDown: time.Second})
	old, _ := s.br.Allow()
	s.call(t, Hang)    // half-open
	s.call(t, Success) // the probe closes it
	old.Done(Hang)
	if s.state() != StateClosed {
		t.Fatalf("a hang admitted two states ago moved the breaker to %s", s.state())
	}
}

// Call treats a Hang like a Failure: ignored when the caller's deadline had
// passed, counted when fn's own deadline fired first.
func TestCallHang(t *testing.T) {
	t.Parallel()
	s := setupBreaker(t, BreakerOpts{})
	hang := func(Outcome, error) Outcome { return Hang }
	fn := func(context.Context) (Outcome, error) { return Hang, context.DeadlineExceeded }
	ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()
	for range 3 {
		_, _ = Call(ctx, s.br, nil, hang, fn)
	}
	if snap := s.br.Snapshot(); snap.State != StateClosed || snap.WindowCalls != 0 {
		t.Fatalf("hangs after the caller's deadline counted: %+v", snap)
	}
	_, _ = Call(context.Background(), s.br, nil, hang, fn)
	if s.state() != StateHalfOpen {
		t.Fatalf("a silent hang with the caller still waiting left the breaker %s, want half_open", s.state())
	}
}

func TestOutcomeString(t *testing.T) {
	t.Parallel()
	for o, want := range map[Outcome]string{Success: "success", Failure: "failure", Ignore: "ignore", Hang: "hang", 9: "Outcome(9)"} {
		if got := o.String(); got != want {
			t.Errorf("%d.String() = %q, want %q", o, got, want)
		}
	}
}
