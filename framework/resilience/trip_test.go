package resilience

import (
	"testing"
	"time"
)

// TripOnSilence: a hang with nothing answered since the call was admitted
// opens the breaker for a full cool-down, so the next call is refused
// instead of being a probe that waits out the same deadline.
func TestTripOnSilenceOpens(t *testing.T) {
	t.Parallel()
	s := setupBreaker(t, BreakerOpts{CoolDown: 15 * time.Second})
	s.call(t, Success) // answered before the hung call was admitted: does not count
	tk, err := s.br.Allow()
	if err != nil {
		t.Fatal(err)
	}
	tk.TripOnSilence()
	snap := s.br.Snapshot()
	if snap.State != StateOpen || snap.RetryAfter != 15*time.Second || snap.Opens != 1 {
		t.Fatalf("after a silent hang: %+v, want open for a full 15s", snap)
	}
	if _, err := s.br.Allow(); err == nil {
		t.Fatal("the next call was let through")
	}
	c := s.Changes()
	if len(c) != 1 || c[0].From != StateClosed || c[0].To != StateOpen || !c[0].Hang || c[0].Consecutive != 1 {
		t.Fatalf("changes = %+v, want one closed→open (hang) after one failure", c)
	}
}

// When the dependency answered another call while this one hung, the
// dependency is alive: TripOnSilence is one failure, as Done(Hang) is.
func TestTripOnSilenceWhileOthersAnswer(t *testing.T) {
	t.Parallel()
	s := setupBreaker(t, BreakerOpts{})
	tk, err := s.br.Allow()
	if err != nil {
		t.Fatal(err)
	}
	s.call(t, Success)
	tk.TripOnSilence()
	if snap := s.br.Snapshot(); snap.State != StateClosed || snap.Consecutive != 1 {
		t.Fatalf("after a hang while another call was answered: %+v, want closed with one failure", snap)
	}
}

// A probe's TripOnSilence opens the breaker as a hung probe does; a stale
// ticket's changes nothing.
func TestTripOnSilenceProbeAndStale(t *testing.T) {
	t.Parallel()
	s := setupBreaker(t, BreakerOpts{CoolDown: time.Second})
	stale, _ := s.br.Allow()
	s.br.Trip()
	s.clock.Advance(time.Second)
	probe, err := s.br.Allow()
	if err != nil || !probe.Probe() {
		t.Fatalf("after the cool-down: %v, want the probe", err)
	}
	stale.TripOnSilence() // admitted before the trip: stale
	if st := s.state(); st != StateHalfOpen {
		t.Fatalf("a stale ticket changed the state to %s", st)
	}
	probe.TripOnSilence()
	if snap := s.br.Snapshot(); snap.State != StateOpen || snap.Opens != 2 {
		t.Fatalf("after the probe hung: %+v, want open a second time", snap)
	}
}

// Trip opens the breaker from closed and from half-open (the probe in
// flight is forgotten), and leaves an open breaker's cool-down alone.
func TestTrip(t *testing.T) {
	t.Parallel()
	s := setupBreaker(t, BreakerOpts{CoolDown: 10 * time.Second})
	if !s.br.Trip() {
		t.Fatal("Trip on a closed breaker reported no change")
	}
	s.clock.Advance(4 * time.Second)
	if s.br.Trip() {
		t.Fatal("Trip on an open breaker reported a change")
	}
	if snap := s.br.Snapshot(); snap.RetryAfter != 6*time.Second || snap.Opens != 1 {
		t.Fatalf("after a second Trip: %+v, want the first cool-down, 6s left", snap)
	}
	s.clock.Advance(6 * time.Second)
	probe, err := s.br.Allow()
	if err != nil || !probe.Probe() {
		t.Fatalf("after the cool-down: %v, want the probe", err)
	}
	if !s.br.Trip() {
		t.Fatal("Trip on a half-open breaker reported no change")
	}
	probe.Done(Success) // stale: the trip bumped the generation
	if snap := s.br.Snapshot(); snap.State != StateOpen || snap.RetryAfter != 10*time.Second || snap.Opens != 2 {
		t.Fatalf("after Trip during the probe: %+v, want open for a full 10s", snap)
	}
	c := s.Changes()
	if len(c) != 3 || !c[0].Hang || c[0].To != StateOpen || c[2].From != StateHalfOpen || c[2].To != StateOpen || !c[2].Hang {
		t.Fatalf("changes = %+v", c)
	}
	var nilBreaker *Breaker
	if nilBreaker.Trip() {
		t.Fatal("a nil breaker tripped")
	}
}
