package resilience

import (
	"context"
	"testing"
	"time"
)

// The hot path every plugin runs per call: breaker check, budget record,
// bulkhead slot, the call, release, outcome.
func allowedCall(ctx context.Context, br *Breaker, budget *RetryBudget, bh *Bulkhead) {
	tk, err := br.Allow()
	if err != nil {
		panic(err)
	}
	budget.RecordCall()
	p, err := bh.Acquire(ctx)
	if err != nil {
		panic(err)
	}
	p.Release()
	tk.Done(Success)
}

func newComposition() (*Breaker, *RetryBudget, *Bulkhead) {
	return NewBreaker(BreakerOpts{Name: "bench"}),
		NewRetryBudget(RetryBudgetOpts{}),
		NewBulkhead(BulkheadOpts{Name: "bench"})
}

func BenchmarkAllowedCall(b *testing.B) {
	br, budget, bh := newComposition()
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		allowedCall(ctx, br, budget, bh)
	}
}

func BenchmarkAllowedCallParallel(b *testing.B) {
	br, budget, bh := newComposition()
	ctx := context.Background()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			allowedCall(ctx, br, budget, bh)
		}
	})
}

func BenchmarkAllowedCallHelper(b *testing.B) {
	br, _, bh := newComposition()
	ctx := context.Background()
	fn := func(context.Context) (int, error) { return 200, nil }
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Call(ctx, br, bh, nil, fn); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkBreakerAllowed(b *testing.B) {
	br := NewBreaker(BreakerOpts{Name: "bench"})
	b.ReportAllocs()
	for b.Loop() {
		tk, err := br.Allow()
		if err != nil {
			b.Fatal(err)
		}
		tk.Done(Success)
	}
}

func openForBench() *Breaker {
	br := NewBreaker(BreakerOpts{Name: "bench", CoolDown: time.Hour})
	for range 5 {
		tk, _ := br.Allow()
		tk.Done(Failure)
	}
	return br
}

func BenchmarkRejectedOpen(b *testing.B) {
	br := openForBench()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := br.Allow(); err == nil {
			b.Fatal("allowed while open")
		}
	}
}

func BenchmarkRejectedOpenParallel(b *testing.B) {
	br := openForBench()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := br.Allow(); err == nil {
				panic("allowed while open")
			}
		}
	})
}

func BenchmarkBackoffDelay(b *testing.B) {
	bo := Backoff{}
	b.ReportAllocs()
	for b.Loop() {
		_ = bo.Delay(3)
	}
}

func BenchmarkBudgetRecordCall(b *testing.B) {
	for _, tc := range []struct {
		name string
		o    RetryBudgetOpts
	}{
		{"mode=ratio", RetryBudgetOpts{}},
		{"mode=token_bucket", RetryBudgetOpts{TokenBucket: &TokenBucketOpts{}}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			budget := NewRetryBudget(tc.o)
			b.ReportAllocs()
			for b.Loop() {
				budget.RecordCall()
			}
		})
	}
}

func BenchmarkBulkheadAcquireRelease(b *testing.B) {
	bh := NewBulkhead(BulkheadOpts{})
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		p, err := bh.Acquire(ctx)
		if err != nil {
			b.Fatal(err)
		}
		p.Release()
	}
}
