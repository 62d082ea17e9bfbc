package resilience

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestBulkheadFiftyFirstWaitsThenIsRejected(t *testing.T) {
	t.Parallel()
	clock := NewTestClock(epoch)
	bh := NewBulkhead(BulkheadOpts{Name: "billing", Clock: clock})
	permits := make([]Permit, 0, 50)
	for i := range 50 {
		p, err := bh.Acquire(t.Context())
		if err != nil {
			t.Fatalf("acquire %d: %v", i+1, err)
		}
		permits = append(permits, p)
	}
	if bh.InFlight() != 50 || bh.MaxConcurrent() != 50 || bh.Name() != "billing" {
		t.Fatalf("InFlight = %d, MaxConcurrent = %d, Name = %q", bh.InFlight(), bh.MaxConcurrent(), bh.Name())
	}
	type result struct {
		err error
		at  time.Time
	}
	done := make(chan result, 1)
	go func() {
		_, err := bh.Acquire(context.Background())
		done <- result{err, clock.Now()}
	}()
	clock.BlockUntil(1)
	clock.Advance(499 * time.Millisecond)
	select {
	case r := <-done:
		t.Fatalf("51st returned before 0.5 s: %v", r.err)
	default:
	}
	clock.Advance(time.Millisecond)
	r := <-done
	var full *BulkheadFullError
	if !errors.As(r.err, &full) || !errors.Is(r.err, ErrBulkheadFull) || errors.Is(r.err, ErrOpen) {
		t.Fatalf("51st = %v, want *BulkheadFullError", r.err)
	}
	if got := r.at.Sub(epoch); got != 500*time.Millisecond {
		t.Fatalf("rejected at %v of test-clock time, want 500ms", got)
	}
	if got, want := r.err.Error(), "bulkhead for 'billing' is full: 50 calls in flight, waited 500ms"; got != want {
		t.Fatalf("error = %q, want %q", got, want)
	}
	for _, p := range permits {
		p.Release()
	}
	if bh.InFlight() != 0 {
		t.Fatalf("InFlight after release = %d", bh.InFlight())
	}
}

func TestBulkheadWaiterGetsFreedSlot(t *testing.T) {
	t.Parallel()
	clock := NewTestClock(epoch)
	bh := NewBulkhead(BulkheadOpts{MaxConcurrent: 1, Clock: clock})
	p, _ := bh.Acquire(t.Context())
	done := make(chan error, 1)
	go func() {
		p2, err := bh.Acquire(context.Background())
		p2.Release()
		done <- err
	}()
	clock.BlockUntil(1)
	clock.Advance(300 * time.Millisecond)
	p.Release()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("waiter: %v", err)
		}
	case <-time.After(5 * time.Second): // real time: the test clock stands still
		t.Fatal("the waiter was not handed the released slot")
	}
}

func TestBulkheadContextCancellation(t *testing.T) {
	t.Parallel()
	clock := NewTestClock(epoch)
	bh := NewBulkhead(BulkheadOpts{Name: "billing", MaxConcurrent: 1, Clock: clock})
	p, _ := bh.Acquire(t.Context())
	defer p.Release()

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := bh.Acquire(ctx)
		done <- err
	}()
	clock.BlockUntil(1)
	cancel()
	err := <-done
	if !errors.Is(err, context.Canceled) || errors.Is(err, ErrBulkheadFull) {
		t.Fatalf("cancelled wait = %v, want context.Canceled", err)
	}
	if clock.Waiters() != 0 {
		t.Fatalf("cancelled wait left %d timers", clock.Waiters())
	}
	// An already-ended context fails at once.
	if _, err := bh.Acquire(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Acquire with a done ctx = %v", err)
	}
}

func TestBulkheadDoubleReleaseIsHarmless(t *testing.T) {
	t.Parallel()
	bh := NewBulkhead(BulkheadOpts{MaxConcurrent: 2})
	p1, _ := bh.Acquire(t.Context())
	copyOfP1 := p1
	p1.Release()
	p1.Release()
	p2, _ := bh.Acquire(t.Context()) // may reuse p1's slot
	p3, _ := bh.Acquire(t.Context())
	copyOfP1.Release() // stale: must not free p2's or p3's slot
	if bh.InFlight() != 2 {
		t.Fatalf("InFlight = %d, want 2 (a stale release freed a slot)", bh.InFlight())
	}
	p2.Release()
	p3.Release()
	Permit{}.Release()
	var nilBH *Bulkhead
	if p, err := nilBH.Acquire(t.Context()); err != nil {
		t.Fatalf("nil bulkhead: %v", err)
	} else {
		p.Release()
	}
}

// TestBulkheadConcurrentStress has 32 goroutines share 4 slots. It checks
// that no more than 4 calls are ever inside, and that no call waits for its
// full 5 s: a waiter that slept next to a free slot (a lost wake-up) would.
func TestBulkheadConcurrentStress(t *testing.T) {
	t.Parallel()
	bh := NewBulkhead(BulkheadOpts{MaxConcurrent: 4, Wait: 5 * time.Second})
	var inside, maxInside atomic.Int32
	var rejected atomic.Int32
	start := time.Now()
	var wg sync.WaitGroup
	for range 32 {
		wg.Go(func() {
			for i := range 300 {
				p, err := bh.Acquire(context.Background())
				if err != nil {
					rejected.Add(1)
					continue
				}
				n := inside.Add(1)
				for {
					m := maxInside.Load()
					if n <= m || maxInside.CompareAndSwap(m, n) {
						break
					}
				}
				if i%3 == 0 {
					time.Sleep(20 * time.Microsecond) // hold the slot so others must wait
				} else {
					runtime.Gosched()
				}
				inside.Add(-1)
				p.Release()
			}
		})
	}
	wg.Wait()
	if maxInside.Load() > 4 {
		t.Fatalf("%d calls inside a bulkhead of 4", maxInside.Load())
	}
	if rejected.Load() != 0 || time.Since(start) > 4*time.Second {
		t.Fatalf("%d rejections in %v: a waiter missed a freed slot", rejected.Load(), time.Since(start))
	}
	if bh.InFlight() != 0 {
		t.Fatalf("InFlight = %d at the end", bh.InFlight())
	}
}

func TestBulkheadLargeCapacity(t *testing.T) {
	t.Parallel()
	bh := NewBulkhead(BulkheadOpts{MaxConcurrent: 200, Wait: time.Millisecond})
	var ps []Permit
	for range 200 {
		p, err := bh.Acquire(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		ps = append(ps, p)
	}
	if _, err := bh.Acquire(t.Context()); !errors.Is(err, ErrBulkheadFull) {
		t.Fatalf("201st = %v", err)
	}
	for _, p := range ps {
		p.Release()
	}
	if bh.InFlight() != 0 {
		t.Fatalf("InFlight = %d", bh.InFlight())
	}
}
