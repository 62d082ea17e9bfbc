package resilience

import (
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestBreakerConcurrentStress runs many goroutines making calls with random
// outcomes while another moves the clock, and checks that at most one probe
// is ever in flight and that the hook sees a consistent chain of changes. The workers themselves move the clock.
// Run under -race it also checks the lock-free fast paths.
func TestBreakerConcurrentStress(t *testing.T) {
	t.Parallel()
	clock := NewTestClock(epoch)
	var mu sync.Mutex
	var changes []StateChange
	br := NewBreaker(BreakerOpts{
		Name: "stress", Failures: 3, CoolDown: time.Second, Clock: clock,
		OnStateChange: func(c StateChange) {
			_ = br0(c) // the hook may call back into the breaker
			mu.Lock()
			changes = append(changes, c)
			mu.Unlock()
		},
	})
	hookBreaker.Store(br)
	var inFlightProbes, maxProbes atomic.Int32
	var workers sync.WaitGroup
	for w := range 8 {
		workers.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 1))
			for range 3000 {
				if rng.IntN(4) == 0 {
					clock.Advance(50 * time.Millisecond)
				}
				tk, err := br.Allow()
				if err != nil {
					continue
				}
				if tk.Probe() {
					n := inFlightProbes.Add(1)
					for {
						m := maxProbes.Load()
						if n <= m || maxProbes.CompareAndSwap(m, n) {
							break
						}
					}
				}
				o := Outcome(rng.IntN(3))
				if tk.Probe() {
					inFlightProbes.Add(-1)
				}
				tk.Done(o)
			}
		})
	}
	workers.Wait()
	if maxProbes.Load() > 1 {
		t.Fatalf("%d probes in flight at once", maxProbes.Load())
	}
	mu.Lock()
	defer mu.Unlock()
	if len(changes) < 10 {
		t.Fatalf("only %d state changes: the stress did not exercise the breaker", len(changes))
	}
	prev := StateClosed
	var opens uint64
	for i, c := range changes {
		if c.From != prev {
			t.Fatalf("change %d is %s->%s after %s: hooks out of order", i, c.From, c.To, prev)
		}
		prev = c.To
		if c.To == StateOpen {
			opens++
		}
	}
	if s := br.Snapshot(); s.Opens != opens {
		t.Fatalf("Opens = %d, hook saw %d", s.Opens, opens)
	}
}

var hookBreaker atomic.Pointer[Breaker]

// br0 calls Snapshot from inside a hook, which must not deadlock.
func br0(StateChange) BreakerSnapshot {
	if b := hookBreaker.Load(); b != nil {
		return b.Snapshot()
	}
	return BreakerSnapshot{}
}

func TestBreakerHookMayCallBreaker(t *testing.T) {
	t.Parallel()
	clock := NewTestClock(epoch)
	var br *Breaker
	var seen []BreakerSnapshot
	br = NewBreaker(BreakerOpts{Failures: 1, CoolDown: time.Second, Clock: clock, OnStateChange: func(c StateChange) {
		seen = append(seen, br.Snapshot())
		if c.To == StateOpen {
			_, _ = br.Allow() // refused: still open
		}
	}})
	tk, _ := br.Allow()
	tk.Done(Failure)
	clock.Advance(time.Second)
	probe, err := br.Allow()
	if err != nil {
		t.Fatal(err)
	}
	probe.Done(Success)
	if len(seen) != 3 || seen[0].State != StateOpen || seen[2].State != StateClosed {
		t.Fatalf("hook snapshots = %+v", seen)
	}
}

func TestBreakerSnapshotMovesOpenToHalfOpen(t *testing.T) {
	t.Parallel()
	s := openBreaker(t)
	s.clock.Advance(14 * time.Second)
	if snap := s.br.Snapshot(); snap.State != StateOpen || snap.RetryAfter != time.Second {
		t.Fatalf("snapshot = %+v, want open with 1s left", snap)
	}
	s.clock.Advance(time.Second)
	if snap := s.br.Snapshot(); snap.State != StateHalfOpen || snap.RetryAfter != 0 {
		t.Fatalf("snapshot = %+v, want half_open", snap)
	}
	if ch := s.Changes(); len(ch) != 2 || ch[1].To != StateHalfOpen || !ch[1].At.Equal(epoch.Add(15*time.Second)) {
		t.Fatalf("changes = %+v", ch)
	}
	tk, err := s.br.Allow()
	if err != nil || !tk.Probe() {
		t.Fatalf("after Snapshot's transition Allow = %v, want the probe", err)
	}
}

func TestBreakerHookPanicDoesNotWedge(t *testing.T) {
	t.Parallel()
	clock := NewTestClock(epoch)
	calls := 0
	br := NewBreaker(BreakerOpts{Failures: 1, Clock: clock, CoolDown: time.Second, OnStateChange: func(StateChange) {
		calls++
		if calls == 1 {
			panic("hook bug")
		}
	}})
	func() {
		defer func() { _ = recover() }()
		tk, _ := br.Allow()
		tk.Done(Failure)
	}()
	clock.Advance(time.Second)
	if _, err := br.Allow(); err != nil {
		t.Fatal(err)
	}
	if calls != 2 {
		t.Fatalf("hook calls = %d, want 2 (the breaker kept delivering after a panicking hook)", calls)
	}
}
