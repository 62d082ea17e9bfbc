package resilience

import (
	"context"
	"errors"
	"runtime"
	"testing"
	"time"
)

func TestBreakerTransitionsOverTheLastFifteenMinutes(t *testing.T) {
	t.Parallel()
	s := setupBreaker(t, BreakerOpts{Failures: 2, CoolDown: 10 * time.Second})
	if initial, ts := s.br.Transitions(); initial != StateClosed || ts != nil {
		t.Fatalf("a new breaker: initial %s, transitions %v; want closed and none", initial, ts)
	}
	s.clock.Advance(time.Minute)
	s.call(t, Failure)
	s.call(t, Hang) // the second failure opens it: a change made by a hang
	s.clock.Advance(10 * time.Second)
	s.call(t, Success) // the probe: half-open, then closed

	initial, ts := s.br.Transitions()
	want := []Transition{
		{At: epoch.Add(time.Minute), From: StateClosed, To: StateOpen, Hang: true},
		{At: epoch.Add(70 * time.Second), From: StateOpen, To: StateHalfOpen},
		{At: epoch.Add(70 * time.Second), From: StateHalfOpen, To: StateClosed},
	}
	if initial != StateClosed || len(ts) != len(want) {
		t.Fatalf("initial %s, transitions %+v; want closed and %+v", initial, ts, want)
	}
	for i := range want {
		if !ts[i].At.Equal(want[i].At) || ts[i].From != want[i].From || ts[i].To != want[i].To || ts[i].Hang != want[i].Hang {
			t.Fatalf("transition %d = %+v, want %+v", i, ts[i], want[i])
		}
	}

	// 15 minutes after the opening it has slid out of the span; the state at
	// the start of the span is the one it left.
	s.clock.Advance(HistorySpan - 10*time.Second)
	initial, ts = s.br.Transitions()
	if initial != StateOpen || len(ts) != 2 || ts[0].To != StateHalfOpen {
		t.Fatalf("after 15 min: initial %s, transitions %+v; want open, then half_open and closed", initial, ts)
	}
	s.clock.Advance(10 * time.Second)
	if initial, ts = s.br.Transitions(); initial != StateClosed || ts != nil {
		t.Fatalf("after the span: initial %s, transitions %+v; want closed and none", initial, ts)
	}
}

func TestBreakerHistoryKeepsTheLast128Transitions(t *testing.T) {
	t.Parallel()
	s := setupBreaker(t, BreakerOpts{Failures: 1, CoolDown: time.Second})
	s.call(t, Failure) // 1 transition
	for range 100 {    // 2 each: open → half_open, half_open → open
		s.clock.Advance(time.Second)
		s.call(t, Failure)
	}
	_, ts := s.br.Transitions()
	if len(ts) != historyMax {
		t.Fatalf("%d transitions kept, want %d", len(ts), historyMax)
	}
	if last := ts[len(ts)-1]; last.To != StateOpen || !last.At.Equal(epoch.Add(100*time.Second)) {
		t.Fatalf("last transition %+v, want the opening at 100 s", last)
	}
}

func TestRetryBudgetMinutes(t *testing.T) {
	t.Parallel()
	clock := NewTestClock(epoch)
	b := NewRetryBudget(RetryBudgetOpts{Name: "billing", Ratio: 0.1, MinPerSecond: 1, Clock: clock})
	b.RecordCall()
	// One allowed by the per-second rule, then two refused.
	if got := [3]bool{b.TryRetry(), b.TryRetry(), b.TryRetry()}; got != [3]bool{true, false, false} {
		t.Fatalf("TryRetry ×3 = %v, want one retry allowed, then refusals", got)
	}
	clock.Advance(time.Minute)
	for range 20 {
		b.RecordCall()
	}
	// 2 of 21 calls: each below 0.1 × 21 = 2.1 when asked; a third is not.
	if got := [3]bool{b.TryRetry(), b.TryRetry(), b.TryRetry()}; got != [3]bool{true, true, false} {
		t.Fatalf("TryRetry ×3 = %v, want two retries allowed, then a refusal", got)
	}
	m := b.Minutes()
	if len(m) != 15 {
		t.Fatalf("%d minutes, want 15", len(m))
	}
	prev, last := m[13], m[14]
	if prev.Allowed != 1 || prev.Refused != 2 || !prev.Start.Equal(epoch) {
		t.Fatalf("previous minute %+v, want 1 allowed, 2 refused from %v", prev, epoch)
	}
	if last.Allowed != 2 || last.Refused != 1 || !last.Start.Equal(epoch.Add(time.Minute)) {
		t.Fatalf("current minute %+v, want 2 allowed, 1 refused", last)
	}
	for _, x := range m[:13] {
		if x.Allowed != 0 || x.Refused != 0 || !x.Start.Before(epoch) {
			t.Fatalf("an older minute %+v counts something", x)
		}
	}
	clock.Advance(HistorySpan)
	for _, x := range b.Minutes() {
		if x.Allowed != 0 || x.Refused != 0 {
			t.Fatalf("15 minutes later a minute still counts: %+v", x)
		}
	}
}

func TestTokenBucketBudgetMinutes(t *testing.T) {
	t.Parallel()
	clock := NewTestClock(epoch)
	b := NewRetryBudget(RetryBudgetOpts{Clock: clock, TokenBucket: &TokenBucketOpts{MaxTokens: 2}})
	for range 3 {
		b.TryRetry()
	}
	if last := b.Minutes()[14]; last.Allowed != 2 || last.Refused != 1 {
		t.Fatalf("current minute %+v, want 2 allowed, 1 refused", last)
	}
}

func TestBulkheadSnapshot(t *testing.T) {
	t.Parallel()
	clock := NewTestClock(epoch)
	bh := NewBulkhead(BulkheadOpts{Name: "billing", MaxConcurrent: 1, Wait: time.Second, Clock: clock})
	p, err := bh.Acquire(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := bh.Acquire(context.Background())
		done <- err
	}()
	clock.BlockUntil(1)
	if s := bh.Snapshot(); s != (BulkheadSnapshot{Name: "billing", InFlight: 1, Waiting: 1, MaxConcurrent: 1}) {
		t.Fatalf("snapshot with one waiting = %+v", s)
	}
	clock.Advance(time.Second)
	if err := <-done; !errors.Is(err, ErrBulkheadFull) {
		t.Fatalf("the waiting call got %v, want a bulkhead rejection", err)
	}
	p.Release()
	if s := bh.Snapshot(); s != (BulkheadSnapshot{Name: "billing", MaxConcurrent: 1, Rejected: 1}) {
		t.Fatalf("snapshot after the rejection = %+v", s)
	}
}

func TestRegistryGroupsByOwnerAndName(t *testing.T) {
	t.Parallel()
	clock := NewTestClock(epoch)
	reg := NewRegistry(clock)
	httpClock := reg.Clock("http")
	br := NewBreaker(BreakerOpts{Name: "billing", Failures: 1, Clock: httpClock})
	budget := NewRetryBudget(RetryBudgetOpts{Name: "billing", Clock: httpClock})
	bh := NewBulkhead(BulkheadOpts{Name: "billing", Clock: httpClock})
	dbBreaker := NewBreaker(BreakerOpts{Name: "db", Clock: reg.Clock("db")})
	outside := NewBreaker(BreakerOpts{Name: "elsewhere", Clock: clock})
	if got := reg.Clock("x").Now(); !got.Equal(epoch) || !reg.Now().Equal(epoch) {
		t.Fatalf("registry clock reads %v, want the base clock's %v", got, epoch)
	}

	tk, _ := br.Allow()
	tk.Done(Failure)
	budget.RecordCall()
	budget.TryRetry()
	p, _ := bh.Acquire(t.Context())
	defer p.Release()

	deps := reg.Snapshot()
	if len(deps) != 2 {
		t.Fatalf("%d dependencies, want 2 (http billing, db): %+v", len(deps), deps)
	}
	d := deps[0]
	if d.Owner != "http" || d.Name != "billing" || d.Breaker == nil || d.Budget == nil || d.Bulkhead == nil {
		t.Fatalf("first dependency %+v, want http billing with a breaker, a budget and a bulkhead", d)
	}
	if d.Breaker.State != StateOpen || len(d.Breaker.Transitions) != 1 || d.Breaker.Failures != 1 || !d.Breaker.Since.Equal(epoch) {
		t.Fatalf("breaker view %+v, want open since %v after one transition", *d.Breaker, epoch)
	}
	if d.Budget.Calls != 1 || d.Budget.Attempts() != 2 || d.Budget.Minutes[14].Allowed != 1 {
		t.Fatalf("budget view %+v, want 1 call, 2 attempts, 1 retry this minute", *d.Budget)
	}
	if d.Bulkhead.InFlight != 1 {
		t.Fatalf("bulkhead %+v, want one in flight", *d.Bulkhead)
	}
	if deps[1].Owner != "db" || deps[1].Breaker == nil || deps[1].Budget != nil || deps[1].Breaker.State != StateClosed {
		t.Fatalf("second dependency %+v, want db with a closed breaker only", deps[1])
	}
	runtime.KeepAlive(dbBreaker)
	runtime.KeepAlive(outside)
}

func TestRegistryForgetsWhatItsOwnerDropped(t *testing.T) {
	reg := NewRegistry(nil)
	kept := NewBreaker(BreakerOpts{Name: "kept", Clock: reg.Clock("http")})
	func() {
		NewBreaker(BreakerOpts{Name: "evicted", Clock: reg.Clock("http")})
	}()
	runtime.GC()
	runtime.GC()
	deps := reg.Snapshot()
	if len(deps) != 1 || deps[0].Name != "kept" {
		t.Fatalf("after the GC: %+v, want only the breaker still referenced", deps)
	}
	if n := len(reg.entries); n != 1 {
		t.Fatalf("registry keeps %d entries, want 1", n)
	}
	runtime.KeepAlive(kept)
}

func TestRegistryTwoObjectsOfOneKindAndName(t *testing.T) {
	t.Parallel()
	reg := NewRegistry(NewTestClock(epoch))
	a := NewBreaker(BreakerOpts{Name: "same", Clock: reg.Clock("http")})
	b := NewBreaker(BreakerOpts{Name: "same", Clock: reg.Clock("http")})
	if deps := reg.Snapshot(); len(deps) != 2 {
		t.Fatalf("two breakers of one name: %d dependencies, want 2", len(deps))
	}
	var nilReg *Registry
	if nilReg.Snapshot() != nil {
		t.Fatal("a nil registry has dependencies")
	}
	runtime.KeepAlive(a)
	runtime.KeepAlive(b)
}

// OnTick runs on the calls' own path: the first call after it is set, then
// the first call at or after each multiple of the period, allowed or refused
// by an open breaker; no call, no tick.
func TestRegistryOnTickRunsOnTheCalls(t *testing.T) {
	t.Parallel()
	clock := NewTestClock(epoch)
	reg := NewRegistry(clock)
	clock.Advance(3 * time.Second) // the breaker's origin differs from the registry's
	br := NewBreaker(BreakerOpts{Name: "billing", Failures: 2, CoolDown: time.Minute, Clock: reg.Clock("http")})
	var ticks []time.Time
	call := func(o Outcome) {
		if tk, err := br.Allow(); err == nil {
			tk.Done(o)
		}
	}
	call(Success) // before OnTick: nothing to run
	reg.OnTick(10*time.Second, func(now time.Time) { ticks = append(ticks, now) })
	call(Success) // the first call finds a tick due
	clock.Advance(2 * time.Second)
	call(Success) // 5 s since the registry's origin: none due until 10 s
	clock.Advance(30 * time.Second)
	// No call for 30 s: nothing ran meanwhile.
	if len(ticks) != 1 || !ticks[0].Equal(epoch.Add(3*time.Second)) {
		t.Fatalf("ticks %v, want one at %v", ticks, epoch.Add(3*time.Second))
	}
	call(Failure) // at 35 s: due (the one of 30 s)
	call(Failure) // opens the breaker; no tick due until 40 s
	clock.Advance(10 * time.Second)
	call(Success) // refused by the open breaker, at 45 s: due
	clock.Advance(time.Second)
	call(Success) // refused at 46 s: not due
	want := []time.Time{epoch.Add(3 * time.Second), epoch.Add(35 * time.Second), epoch.Add(45 * time.Second)}
	if len(ticks) != len(want) {
		t.Fatalf("ticks %v, want %v", ticks, want)
	}
	for i := range want {
		if !ticks[i].Equal(want[i]) {
			t.Fatalf("tick %d at %v, want %v", i, ticks[i], want[i])
		}
	}
	reg.OnTick(0, nil)
	clock.Advance(time.Hour)
	call(Success)
	if len(ticks) != len(want) {
		t.Fatalf("a tick after OnTick(0, nil): %v", ticks)
	}
}

// A breaker on another clock never ticks a registry.
func TestRegistryOnTickIgnoresOtherBreakers(t *testing.T) {
	t.Parallel()
	clock := NewTestClock(epoch)
	reg := NewRegistry(clock)
	ran := false
	reg.OnTick(time.Second, func(time.Time) { ran = true })
	br := NewBreaker(BreakerOpts{Clock: clock})
	tk, _ := br.Allow()
	tk.Done(Success)
	if ran {
		t.Fatal("a breaker built on a plain clock ran the registry's tick")
	}
}

// An open breaker's own counts restart at the opening; its view keeps the
// counts that opened it, and which rule did.
func TestBreakerViewKeepsWhatTrippedIt(t *testing.T) {
	t.Parallel()
	s := setupBreaker(t, BreakerOpts{Failures: 3, CoolDown: 10 * time.Second})
	if v := s.br.view(); v.Tripped != nil {
		t.Fatalf("a breaker that never left closed: Tripped = %+v, want nil", v.Tripped)
	}
	s.call(t, Success)
	s.clock.Advance(time.Second)
	for range 3 {
		s.call(t, Failure)
	}
	v := s.br.view()
	if v.State != StateOpen || v.Consecutive != 0 || v.WindowCalls != 0 {
		t.Fatalf("open: state %s, consecutive %d, window calls %d; want open, 0, 0", v.State, v.Consecutive, v.WindowCalls)
	}
	tr := v.Tripped
	if tr == nil || tr.From != StateClosed || tr.To != StateOpen || !tr.At.Equal(epoch.Add(time.Second)) ||
		tr.Consecutive != 3 || tr.WindowCalls != 4 || tr.WindowFailures != 3 || tr.Hang {
		t.Fatalf("Tripped = %+v, want closed → open at 1s by 3 consecutive failures of 4 calls", tr)
	}
	// A failed probe reopens it: what tripped it is still the first opening.
	s.clock.Advance(10 * time.Second)
	s.call(t, Failure)
	if v := s.br.view(); v.Opens != 2 || v.Tripped == nil || v.Tripped.Consecutive != 3 || !v.Tripped.At.Equal(epoch.Add(time.Second)) {
		t.Fatalf("reopened by the probe: opens %d, Tripped %+v; want 2 and the first opening", v.Opens, v.Tripped)
	}
	// Closed again, then the silence rule of a hang makes it half-open.
	s.clock.Advance(10 * time.Second)
	s.call(t, Success)
	s.clock.Advance(time.Second)
	s.call(t, Hang)
	if v := s.br.view(); v.State != StateHalfOpen || v.Tripped == nil || v.Tripped.To != StateHalfOpen || !v.Tripped.Hang || v.Tripped.Consecutive != 1 {
		t.Fatalf("after a hang: state %s, Tripped %+v; want half_open by one hang", v.State, v.Tripped)
	}
}

// A half-open breaker says whether its probe is in flight; its detail says
// what a call meets.
func TestBreakerSnapshotProbingAndSuspension(t *testing.T) {
	t.Parallel()
	s := setupBreaker(t, BreakerOpts{Failures: 1, CoolDown: 10 * time.Second})
	if d := s.br.Snapshot().Suspension("'billing'"); d != "" {
		t.Fatalf("closed: %q, want none", d)
	}
	s.call(t, Failure)
	s.clock.Advance(4 * time.Second)
	if d, want := s.br.Snapshot().Suspension("'billing'"), "calls to 'billing' are suspended for 6.0s"; d != want {
		t.Fatalf("open: %q, want %q", d, want)
	}
	s.clock.Advance(6 * time.Second)
	snap := s.br.Snapshot()
	if want := "the breaker of calls to 'billing' is half-open, waiting for the next call to probe"; snap.State != StateHalfOpen || snap.Probing || snap.Suspension("'billing'") != want {
		t.Fatalf("cool-down over, no call: %+v %q, want half_open, not probing, %q", snap, snap.Suspension("'billing'"), want)
	}
	probe, err := s.br.Allow()
	if err != nil || !probe.Probe() {
		t.Fatalf("the next call: %v, probe %v; want the probe", err, probe.Probe())
	}
	snap = s.br.Snapshot()
	if want := "calls to 'billing' are suspended while a probe call is in flight"; !snap.Probing || snap.Suspension("'billing'") != want {
		t.Fatalf("probe in flight: %+v %q, want probing, %q", snap, snap.Suspension("'billing'"), want)
	}
	probe.Done(Ignore) // the caller gave up: the slot is free again
	if snap = s.br.Snapshot(); snap.State != StateHalfOpen || snap.Probing {
		t.Fatalf("after an ignored probe: %+v, want half_open, not probing", snap)
	}
}
