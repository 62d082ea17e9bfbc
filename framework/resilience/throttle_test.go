package resilience

import (
	"context"
	"errors"
	"math/rand/v2"
	"testing"
	"time"
)

// shedder is a dependency that accepts capacity requests per second of the
// test clock and refuses the rest for load (a 429 asking for no wait), as
// an Attempter; it counts what it receives per second.
type shedder struct {
	clock    *TestClock
	capacity int
	received map[int64]int
	accepted map[int64]int
}

func (d *shedder) Attempt(context.Context, int) Verdict {
	s := d.clock.Now().Sub(epoch).Milliseconds() / 1000
	d.received[s]++
	if d.accepted[s] < d.capacity {
		d.accepted[s]++
		return Verdict{Outcome: Success}
	}
	return Verdict{Outcome: Success, Overloaded: true, Retry: true, Asked: true}
}

func (d *shedder) Report(AttemptRecord) {}

// offer sends rate calls per second for secs seconds, evenly spaced on the
// test clock, through a policy of three attempts whose throttle (when k > 0)
// draws from a seeded source, and returns what the dependency received each
// second and how many calls were refused locally.
func offer(t *testing.T, k float64, capacity, rate, secs int) (map[int64]int, int) {
	t.Helper()
	clock := NewTestClock(epoch)
	cfg := DefaultPolicyConfig()
	if k > 0 {
		cfg.Throttle, cfg.ThrottleK = true, k
	}
	p := NewPolicy(PolicyOpts{Name: "billing", Config: cfg, Clock: clock, Rand: rand.New(rand.NewPCG(1, 2)).Float64})
	d := &shedder{clock: clock, capacity: capacity, received: map[int64]int{}, accepted: map[int64]int{}}
	step := time.Second / time.Duration(rate)
	refused := 0
	for range secs * rate {
		var run Run
		if err := p.Begin(context.Background(), &run, RunOpts{}); err != nil {
			var te *ThrottledError
			if !errors.As(err, &te) || te.Name != "billing" || !errors.Is(err, ErrThrottled) {
				t.Fatalf("Begin: %v, want a *ThrottledError naming billing", err)
			}
			refused++
		} else {
			run.Attempts(d)
			run.End(run.Outcome())
		}
		clock.Advance(step)
	}
	return d.received, refused
}

// TestThrottleSettlesAtKTimesCapacity offers 3C to a dependency of capacity
// C: with the throttle it receives about K·C each second once the first
// seconds, within 10 % over every span of 5 s (a bucket of the throttle's
// window, by which its counts move); without, 3C and its retries.
func TestThrottleSettlesAtKTimesCapacity(t *testing.T) {
	// span is the throttle window's bucket: the counts move by one bucket.
	const capacity, rate, secs, settle, span = 100, 300, 65, 5, int64(DefaultThrottleWindow / throttleBuckets / time.Second)
	for _, k := range []float64{DefaultThrottleK, 1.5} {
		received, refused := offer(t, k, capacity, rate, secs)
		want := k * capacity
		for s := int64(settle); s < secs; s += span {
			sum := 0
			for i := range span {
				sum += received[s+i]
			}
			if got := float64(sum) / float64(span); got < 0.9*want || got > 1.1*want {
				t.Errorf("K=%v: seconds %d-%d: the dependency received %v per second, want %v ± 10%%", k, s, s+span, got, want)
			}
		}
		if refused == 0 {
			t.Errorf("K=%v: no call was refused locally", k)
		}
	}
	received, refused := offer(t, 0, capacity, rate, secs)
	if refused != 0 {
		t.Fatalf("without the throttle %d calls were refused", refused)
	}
	for s := int64(settle); s < secs; s++ {
		if received[s] <= rate {
			t.Errorf("without the throttle, second %d: the dependency received %d, want more than the %d offered (retries)", s, received[s], rate)
		}
	}
}

// TestThrottleRefusesRetries: a retry the throttle refuses stops the loop
// with StopThrottled before the budget is asked, and the throttle counted it.
func TestThrottleRefusesRetries(t *testing.T) {
	b := setupPolicy(t, 3, 10*time.Second, func(c *PolicyConfig) { c.Throttle = true })
	b.p.throttle.rand = func() float64 { return 0 } // refuse whenever the probability is above 0
	refusedForLoad := Verdict{Outcome: Success, Overloaded: true, Retry: true}
	var run Run
	if err := b.p.Begin(context.Background(), &run, RunOpts{}); err != nil {
		t.Fatal(err)
	}
	s := &script{clock: b.clock, verdicts: []Verdict{refusedForLoad}}
	run.Attempts(s)
	run.End(run.Outcome())
	if got := s.stops(); len(got) != 1 || got[0] != StopThrottled {
		t.Fatalf("stops = %v, want [throttled]", got)
	}
	snap := b.p.Throttle().Snapshot()
	if snap.Requests != 2 || snap.Accepts != 0 || snap.Rejected != 1 {
		t.Fatalf("snapshot = %+v, want 2 requests (the attempt, the refused retry), 0 accepts, 1 rejected", snap)
	}
	if n := b.p.Budget().Snapshot().Retries; n != 0 {
		t.Fatalf("the budget granted %d retries, want none asked", n)
	}
}

// TestThrottleCounts: timeouts and refusals for load are not accepts, other
// answers are, and attempts cut by the caller are not counted; the window
// forgets.
func TestThrottleCounts(t *testing.T) {
	clock := NewTestClock(epoch)
	th := NewThrottle(ThrottleOpts{Name: "x", Clock: clock, Rand: func() float64 { return 0.999 }})
	th.Record(true)
	th.Record(false)
	th.Record(false)
	th.Record(false)
	snap := th.Snapshot()
	if snap.Requests != 4 || snap.Accepts != 1 {
		t.Fatalf("snapshot = %+v", snap)
	}
	if want := (4 - DefaultThrottleK*1) / 5; snap.Probability != want {
		t.Fatalf("probability = %v, want %v", snap.Probability, want)
	}
	clock.Advance(DefaultThrottleWindow)
	if snap := th.Snapshot(); snap.Requests != 0 || snap.Probability != 0 {
		t.Fatalf("after a window: %+v, want forgotten", snap)
	}
	var nilT *Throttle
	if err := nilT.Allow(); err != nil {
		t.Fatal(err)
	}
	// A refusal for load that is no breaker evidence (gRPC's
	// RESOURCE_EXHAUSTED) still counts; an ignored answer does not.
	th2 := NewThrottle(ThrottleOpts{Clock: clock})
	th2.record(Verdict{Outcome: Ignore, Overloaded: true})
	th2.record(Verdict{Outcome: Ignore})
	if s := th2.Snapshot(); s.Requests != 1 || s.Accepts != 0 {
		t.Fatalf("snapshot %+v, want one request, not accepted", s)
	}
}

// TestThrottleSeesRecovery: a dependency that refused every call for two
// windows still receives about 1 − ThrottleMaxDrop of the calls offered;
// once it accepts them all again, every call reaches it within two windows
// (the cap's doing: without it the throttle, counting its own drops as
// requests, sends almost nothing and needs about four).
func TestThrottleSeesRecovery(t *testing.T) {
	const rate = 50 // calls offered per second
	clock := NewTestClock(epoch)
	cfg := DefaultPolicyConfig()
	cfg.Throttle, cfg.Attempts = true, 1
	p := NewPolicy(PolicyOpts{Name: "billing", Config: cfg, Clock: clock, Rand: rand.New(rand.NewPCG(1, 2)).Float64})
	d := &shedder{clock: clock, received: map[int64]int{}, accepted: map[int64]int{}}
	window := int64(DefaultThrottleWindow / time.Second)
	down, secs := 2*window, 5*window
	for range secs * rate {
		if clock.Now().Sub(epoch) >= time.Duration(down)*time.Second {
			d.capacity = rate
		}
		var run Run
		if p.Begin(context.Background(), &run, RunOpts{}) == nil {
			run.Attempts(d)
			run.End(run.Outcome())
		}
		clock.Advance(time.Second / rate)
	}
	during := 0
	for s := window; s < down; s++ {
		during += d.received[s]
	}
	if floor := (1 - ThrottleMaxDrop) * rate * float64(window); float64(during) < 0.8*floor {
		t.Errorf("the outage's second window: the dependency received %d calls, want about %v", during, floor)
	}
	// Recovered: from some second on, every span of 5 s (a bucket) delivers
	// all but a few of the calls offered.
	const span = 5
	recovered := secs
	for s := secs - span; s >= down; s-- {
		sum := 0
		for i := range int64(span) {
			sum += d.received[s+i]
		}
		if sum < rate*span*95/100 {
			break
		}
		recovered = s
	}
	if recovered-down > 2*window {
		t.Fatalf("every call reached the dependency again %d s after it recovered, want within two windows (%d s)", recovered-down, 2*window)
	}
	t.Logf("recovered %d s after the dependency did; %d calls received in the outage's second window", recovered-down, during)
}
