package resilience

import (
	"context"
	"runtime"
	"testing"
	"time"
)

// loopCPU runs body in a b.Loop with the goroutine pinned to its thread and
// reports the thread's CPU time per op as "cpu-ns/op".
func loopCPU(b *testing.B, body func()) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	start, ok := threadCPU()
	for b.Loop() {
		body()
	}
	if end, ok2 := threadCPU(); ok && ok2 {
		b.ReportMetric(float64(end-start)/float64(b.N), "cpu-ns/op")
	}
}

// The primitives of a call's hot path: breaker check, budget record,
// bulkhead slot, the call, release, outcome. Plugins run them through
// Policy.Begin and Run.End, which take the bulkhead's slot without waiting
// when one is free and record the budget at the call's start.
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
	loopCPU(b, func() { allowedCall(ctx, br, budget, bh) })
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
	loopCPU(b, func() {
		if _, err := Call(ctx, br, bh, nil, fn); err != nil {
			b.Fatal(err)
		}
	})
}

func BenchmarkBreakerAllowed(b *testing.B) {
	br := NewBreaker(BreakerOpts{Name: "bench"})
	b.ReportAllocs()
	loopCPU(b, func() {
		tk, err := br.Allow()
		if err != nil {
			b.Fatal(err)
		}
		tk.Done(Success)
	})
}

// The same call through a breaker of a Registry whose OnTick is set (a
// service with a status page): what the call pays to find no tick due, and
// once per 10 s a tick that does nothing here.
func BenchmarkBreakerAllowedTicking(b *testing.B) {
	reg := NewRegistry(nil)
	reg.OnTick(10*time.Second, func(time.Time) {})
	br := NewBreaker(BreakerOpts{Name: "bench", Clock: reg.Clock("bench")})
	b.ReportAllocs()
	loopCPU(b, func() {
		tk, err := br.Allow()
		if err != nil {
			b.Fatal(err)
		}
		tk.Done(Success)
	})
}

func BenchmarkRejectedOpenTicking(b *testing.B) {
	reg := NewRegistry(nil)
	reg.OnTick(10*time.Second, func(time.Time) {})
	br := openForBench(reg.Clock("bench"))
	b.ReportAllocs()
	loopCPU(b, func() {
		if _, err := br.Allow(); err == nil {
			b.Fatal("allowed while open")
		}
	})
}

func openForBench(clock Clock) *Breaker {
	br := NewBreaker(BreakerOpts{Name: "bench", CoolDown: time.Hour, Clock: clock})
	for range 5 {
		tk, _ := br.Allow()
		tk.Done(Failure)
	}
	return br
}

func BenchmarkRejectedOpen(b *testing.B) {
	br := openForBench(nil)
	b.ReportAllocs()
	loopCPU(b, func() {
		if _, err := br.Allow(); err == nil {
			b.Fatal("allowed while open")
		}
	})
}

func BenchmarkRejectedOpenParallel(b *testing.B) {
	br := openForBench(nil)
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
	loopCPU(b, func() { _ = bo.Delay(3) })
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
			loopCPU(b, budget.RecordCall)
		})
	}
}

func BenchmarkBulkheadAcquireRelease(b *testing.B) {
	bh := NewBulkhead(BulkheadOpts{})
	ctx := context.Background()
	b.ReportAllocs()
	loopCPU(b, func() {
		p, err := bh.Acquire(ctx)
		if err != nil {
			b.Fatal(err)
		}
		p.Release()
	})
}
