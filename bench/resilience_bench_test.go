package bench

import (
	"context"
	"errors"
	"runtime"
	"testing"
	"time"

	"github.com/failsafe-go/failsafe-go"
	"github.com/failsafe-go/failsafe-go/budget"
	"github.com/failsafe-go/failsafe-go/bulkhead"
	"github.com/failsafe-go/failsafe-go/circuitbreaker"
	"github.com/failsafe-go/failsafe-go/retrypolicy"
	"github.com/sony/gobreaker/v2"

	"github.com/jfastframework/jfast/framework/resilience"
)

// The composition benchmarked everywhere: a breaker (5 consecutive
// failures, 15 s open), a retry budget (0.2 of calls) around up to 3
// attempts, a bulkhead of 50 with a 0.5 s wait, and a call that succeeds at
// once. Only the allowed, successful path and the rejected-while-open path
// are measured: they are what every request pays.

func call(context.Context) (int, error) { return 200, nil }

var errUpstream = errors.New("upstream: 503")

func failing() (int, error) { return 0, errUpstream }

// --- jfast ---

type jfast struct {
	br     *resilience.Breaker
	budget *resilience.RetryBudget
	bh     *resilience.Bulkhead
}

func newJfast() jfast {
	return jfast{
		br:     resilience.NewBreaker(resilience.BreakerOpts{Name: "bench"}),
		budget: resilience.NewRetryBudget(resilience.RetryBudgetOpts{}),
		bh:     resilience.NewBulkhead(resilience.BulkheadOpts{Name: "bench"}),
	}
}

// do is one call with up to 3 attempts, written out with the core's
// primitives (breaker, budget, bulkhead) as the other rows are with their
// libraries'. The plugins run them through resilience.Policy instead, which
// holds one bulkhead place for the whole call (not one per attempt) and
// records the budget at the call's start; this row measures the primitives.
func (j jfast) do(ctx context.Context) (int, error) {
	tk, err := j.br.Allow()
	if err != nil {
		return 0, err
	}
	j.budget.RecordCall()
	for attempt := 1; ; attempt++ {
		p, err := j.bh.Acquire(ctx)
		if err != nil {
			tk.Done(resilience.Ignore)
			return 0, err
		}
		v, err := call(ctx)
		p.Release()
		if err == nil || attempt == 3 || !j.budget.TryRetry() {
			if err != nil {
				tk.Done(resilience.Failure)
			} else {
				tk.Done(resilience.Success)
			}
			return v, err
		}
	}
}

func (j jfast) open() jfast {
	for range 5 {
		tk, _ := j.br.Allow()
		tk.Done(resilience.Failure)
	}
	return j
}

// --- gobreaker v2: it has no budget or bulkhead; the row uses a buffered
// channel as the bulkhead (the usual idiom) and jfast's RetryBudget. ---

type gobreakerComp struct {
	cb     *gobreaker.CircuitBreaker[int]
	budget *resilience.RetryBudget
	sem    chan struct{}
}

func newGobreaker() gobreakerComp {
	return gobreakerComp{
		cb: gobreaker.NewCircuitBreaker[int](gobreaker.Settings{
			Name:        "bench",
			Timeout:     15 * time.Second,
			ReadyToTrip: func(c gobreaker.Counts) bool { return c.ConsecutiveFailures >= 5 },
		}),
		budget: resilience.NewRetryBudget(resilience.RetryBudgetOpts{}),
		sem:    make(chan struct{}, 50),
	}
}

func (g gobreakerComp) do(ctx context.Context) (int, error) {
	return g.cb.Execute(func() (int, error) {
		g.budget.RecordCall()
		for attempt := 1; ; attempt++ {
			select {
			case g.sem <- struct{}{}:
			default:
				t := time.NewTimer(500 * time.Millisecond)
				select {
				case g.sem <- struct{}{}:
					t.Stop()
				case <-t.C:
					return 0, errors.New("bulkhead full")
				case <-ctx.Done():
					t.Stop()
					return 0, ctx.Err()
				}
			}
			v, err := call(ctx)
			<-g.sem
			if err == nil || attempt == 3 || !g.budget.TryRetry() {
				return v, err
			}
		}
	})
}

func (g gobreakerComp) open() gobreakerComp {
	for range 5 {
		_, _ = g.cb.Execute(failing)
	}
	return g
}

// --- failsafe-go: Retry (3 attempts, its budget, no retry of a refusal) +
// CircuitBreaker + Bulkhead. Its budget bounds concurrent retries rather
// than a windowed ratio, the nearest it offers. ---

func newFailsafe() failsafe.Executor[int] {
	rp := retrypolicy.NewBuilder[int]().
		WithMaxAttempts(3).
		AbortOnErrors(circuitbreaker.ErrOpen, bulkhead.ErrFull).
		WithBackoff(100*time.Millisecond, 5*time.Second).
		WithBudget(budget.NewBuilder().WithMaxRate(0.2).Build()).
		Build()
	cb := circuitbreaker.NewBuilder[int]().
		WithFailureThreshold(5).
		WithDelay(15 * time.Second).
		Build()
	bh := bulkhead.NewBuilder[int](50).WithMaxWaitTime(500 * time.Millisecond).Build()
	return failsafe.With[int](rp, cb, bh)
}

func failsafeDo(ctx context.Context, ex failsafe.Executor[int]) (int, error) {
	return ex.WithContext(ctx).Get(func() (int, error) { return call(ctx) })
}

func openFailsafe() failsafe.Executor[int] {
	cb := circuitbreaker.NewBuilder[int]().WithFailureThreshold(5).WithDelay(15 * time.Second).Build()
	ex := failsafe.With[int](
		retrypolicy.NewBuilder[int]().WithMaxAttempts(3).
			AbortOnErrors(circuitbreaker.ErrOpen, bulkhead.ErrFull).
			WithBudget(budget.NewBuilder().WithMaxRate(0.2).Build()).Build(),
		cb,
		bulkhead.NewBuilder[int](50).WithMaxWaitTime(500*time.Millisecond).Build(),
	)
	for range 5 {
		_, _ = failsafe.With[int](cb).Get(failing)
	}
	if !cb.IsOpen() {
		panic("failsafe breaker did not open")
	}
	return ex
}

// loopCPU runs body in a b.Loop with the goroutine pinned to its thread and
// reports the thread's CPU time per op as "cpu-ns/op": unlike wall time, it
// does not count the time the thread waited for a core on a busy machine.
func loopCPU(b *testing.B, body func()) {
	b.ReportAllocs()
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

// --- allowed path ---

func BenchmarkAllowed(b *testing.B) {
	ctx := context.Background()
	b.Run("impl=jfast", func(b *testing.B) {
		j := newJfast()
		loopCPU(b, func() {
			if _, err := j.do(ctx); err != nil {
				b.Fatal(err)
			}
		})
	})
	b.Run("impl=gobreaker", func(b *testing.B) {
		g := newGobreaker()
		loopCPU(b, func() {
			if _, err := g.do(ctx); err != nil {
				b.Fatal(err)
			}
		})
	})
	b.Run("impl=failsafe-go", func(b *testing.B) {
		ex := newFailsafe()
		loopCPU(b, func() {
			if _, err := failsafeDo(ctx, ex); err != nil {
				b.Fatal(err)
			}
		})
	})
}

func BenchmarkAllowedParallel(b *testing.B) {
	ctx := context.Background()
	b.Run("impl=jfast", func(b *testing.B) {
		j := newJfast()
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := j.do(ctx); err != nil {
					panic(err)
				}
			}
		})
	})
	b.Run("impl=gobreaker", func(b *testing.B) {
		g := newGobreaker()
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := g.do(ctx); err != nil {
					panic(err)
				}
			}
		})
	})
	b.Run("impl=failsafe-go", func(b *testing.B) {
		ex := newFailsafe()
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := failsafeDo(ctx, ex); err != nil {
					panic(err)
				}
			}
		})
	})
}

// --- rejected while open ---

func BenchmarkOpen(b *testing.B) {
	ctx := context.Background()
	b.Run("impl=jfast", func(b *testing.B) {
		j := newJfast().open()
		loopCPU(b, func() {
			if _, err := j.do(ctx); err == nil {
				b.Fatal("allowed while open")
			}
		})
	})
	b.Run("impl=gobreaker", func(b *testing.B) {
		g := newGobreaker().open()
		loopCPU(b, func() {
			if _, err := g.do(ctx); err == nil {
				b.Fatal("allowed while open")
			}
		})
	})
	b.Run("impl=failsafe-go", func(b *testing.B) {
		ex := openFailsafe()
		loopCPU(b, func() {
			if _, err := failsafeDo(ctx, ex); err == nil {
				b.Fatal("allowed while open")
			}
		})
	})
}

func BenchmarkOpenParallel(b *testing.B) {
	ctx := context.Background()
	b.Run("impl=jfast", func(b *testing.B) {
		j := newJfast().open()
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := j.do(ctx); err == nil {
					panic("allowed while open")
				}
			}
		})
	})
	b.Run("impl=gobreaker", func(b *testing.B) {
		g := newGobreaker().open()
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := g.do(ctx); err == nil {
					panic("allowed while open")
				}
			}
		})
	})
	b.Run("impl=failsafe-go", func(b *testing.B) {
		ex := openFailsafe()
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := failsafeDo(ctx, ex); err == nil {
					panic("allowed while open")
				}
			}
		})
	})
}

// --- the breaker alone ---

func BenchmarkBreakerOnly(b *testing.B) {
	b.Run("impl=jfast", func(b *testing.B) {
		br := resilience.NewBreaker(resilience.BreakerOpts{Name: "bench"})
		loopCPU(b, func() {
			tk, err := br.Allow()
			if err != nil {
				b.Fatal(err)
			}
			_, err = call(context.TODO())
			if err != nil {
				tk.Done(resilience.Failure)
			} else {
				tk.Done(resilience.Success)
			}
		})
	})
	b.Run("impl=gobreaker", func(b *testing.B) {
		cb := gobreaker.NewCircuitBreaker[int](gobreaker.Settings{Name: "bench", Timeout: 15 * time.Second})
		fn := func() (int, error) { return call(context.TODO()) }
		loopCPU(b, func() {
			if _, err := cb.Execute(fn); err != nil {
				b.Fatal(err)
			}
		})
	})
	b.Run("impl=failsafe-go", func(b *testing.B) {
		ex := failsafe.With[int](circuitbreaker.NewBuilder[int]().WithFailureThreshold(5).WithDelay(15 * time.Second).Build())
		fn := func() (int, error) { return call(context.TODO()) }
		loopCPU(b, func() {
			if _, err := ex.Get(fn); err != nil {
				b.Fatal(err)
			}
		})
	})
}
