package resilience

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestCallClassifiesAndReleases(t *testing.T) {
	t.Parallel()
	s := setupBreaker(t, BreakerOpts{Failures: 2})
	bh := NewBulkhead(BulkheadOpts{MaxConcurrent: 1, Clock: s.clock})
	classify := HTTPOutcome
	call := func(status int, err error) (int, error) {
		return Call(t.Context(), s.br, bh, classify, func(context.Context) (int, error) {
			if bh.InFlight() != 1 {
				t.Errorf("InFlight during the call = %d, want 1", bh.InFlight())
			}
			return status, err
		})
	}
	// Each answer but a 502, 503 or 504 resets the run of failures: a 500,
	// a 429 and a 400 between two 503s keep a 2-failure breaker closed.
	for _, st := range []int{503, 500, 503, 429, 503, 400, 503} {
		if got, err := call(st, nil); got != st || err != nil {
			t.Fatalf("Call = %d, %v", got, err)
		}
	}
	if snap := s.br.Snapshot(); snap.State != StateClosed || snap.Consecutive != 1 || snap.WindowCalls != 7 {
		t.Fatalf("snapshot = %+v, want closed, 1 consecutive, 7 calls", snap)
	}
	boom := errors.New("connection refused")
	if _, err := call(0, boom); !errors.Is(err, boom) {
		t.Fatalf("Call error = %v, want fn's error", err)
	}
	if _, err := call(200, nil); !errors.Is(err, ErrOpen) {
		t.Fatalf("Call after 2 failures = %v, want ErrOpen", err)
	}
	if bh.InFlight() != 0 {
		t.Fatalf("InFlight = %d after calls", bh.InFlight())
	}
}

func TestCallCancelledProbeReleasesSlot(t *testing.T) {
	t.Parallel()
	s := openBreaker(t)
	s.clock.Advance(15 * time.Second)
	ctx, cancel := context.WithCancel(t.Context())
	_, err := Call(ctx, s.br, nil, nil, func(context.Context) (struct{}, error) {
		cancel() // the caller gives up while the probe is in flight
		return struct{}{}, context.Canceled
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v", err)
	}
	if got := s.state(); got != StateHalfOpen {
		t.Fatalf("state = %s, want half_open (cancelled probe neither closes nor reopens)", got)
	}
	if _, err := Call(t.Context(), s.br, nil, nil, func(context.Context) (int, error) { return 1, nil }); err != nil {
		t.Fatalf("next probe refused: %v", err)
	}
	if got := s.state(); got != StateClosed {
		t.Fatalf("state = %s, want closed", got)
	}
}

func TestCallBulkheadRejectionIsNotAFailure(t *testing.T) {
	t.Parallel()
	s := openBreaker(t)
	s.clock.Advance(15 * time.Second)
	bh := NewBulkhead(BulkheadOpts{MaxConcurrent: 1, Clock: s.clock})
	p, _ := bh.Acquire(t.Context())
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := Call(ctx, s.br, bh, nil, func(context.Context) (int, error) {
		t.Error("fn ran without a bulkhead slot")
		return 0, nil
	})
	if err == nil {
		t.Fatal("want an error")
	}
	p.Release()
	if got := s.state(); got != StateHalfOpen {
		t.Fatalf("state = %s, want half_open", got)
	}
	tk, err := s.br.Allow()
	if err != nil || !tk.Probe() {
		t.Fatalf("probe slot not released: %v", err)
	}
	tk.Done(Success)
}

func TestCallPanicReleasesProbeAndSlot(t *testing.T) {
	t.Parallel()
	s := openBreaker(t)
	s.clock.Advance(15 * time.Second)
	bh := NewBulkhead(BulkheadOpts{MaxConcurrent: 1, Clock: s.clock})
	func() {
		defer func() {
			if r := recover(); r != "boom" {
				t.Fatalf("recovered %v, want the original panic value", r)
			}
		}()
		_, _ = Call(t.Context(), s.br, bh, nil, func(context.Context) (int, error) { panic("boom") })
	}()
	if bh.InFlight() != 0 {
		t.Fatalf("InFlight after panic = %d", bh.InFlight())
	}
	if got := s.state(); got != StateHalfOpen {
		t.Fatalf("state = %s, want half_open", got)
	}
	if tk, err := s.br.Allow(); err != nil || !tk.Probe() {
		t.Fatalf("probe slot not released after panic: %v", err)
	}
}
