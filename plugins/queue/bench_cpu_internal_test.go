package queue

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/jfastframework/jfast/framework/resilience"
)

// BenchmarkEnqueueCPU measures the processor time of one redis enqueue with the
// round trip taken out: jfast's Enqueue (message, guard, asynq with the options
// jfast sets, the script recorder) against the bare asynq call of
// BenchmarkEnqueueInterleaved, both on a go-redis client whose only hook answers
// the enqueue script itself instead of sending it. Nothing is sent to Redis:
// the difference is the layer's own processor time, per caller's context
// (none, a deadline sooner than enqueue_timeout, one that can be cancelled),
// alone and interleaved with the bare call; run with -benchmem and
// -cpuprofile to see where it goes. With the round trip
// (BenchmarkEnqueueInterleaved) the overhead measured 3-4 times this
// difference on a 2-core machine, and a timer per enqueue far more than its
// share here (docs/performance.md).
//
//	go test -run '^$' -bench BenchmarkEnqueueCPU -benchmem -count 3 ./plugins/queue/
func BenchmarkEnqueueCPU(b *testing.B) {
	type args struct {
		Order int    `json:"order"`
		Email string `json:"email"`
	}
	payload := args{Order: 42, Email: "a@example.com"}
	const queue = "bench-cpu"
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:0"})
	rdb.AddHook(answerHook{})
	b.Cleanup(func() { _ = rdb.Close() })
	ctx := context.Background()

	p := New()
	p.cfg.Backend = "redis"
	p.cfg.Queues = map[string]QueueConfig{queue: {Concurrency: 1}}
	// Longer than a run, so that a caller's deadline made once below can
	// come sooner than enqueue_timeout and last the whole run.
	p.cfg.EnqueueTimeout = 2 * time.Minute
	p.usePolicy(resilience.NewTestClock(time.Unix(0, 0)))
	m, err := newMetrics(nil)
	if err != nil {
		b.Fatal(err)
	}
	p.metrics = m
	p.backend = &asynqBackend{}
	if err := p.backend.Open(ctx, BackendEnv{Config: p.cfg, Queues: p.cfg.queueNames(), Shared: redis.UniversalClient(rdb)}); err != nil {
		b.Fatal(err)
	}
	p.defQueue = p.defaultQueue()
	_, p.sharedTimer = p.backend.(sharedTimerBackend)
	p.sends = map[string]bool{"bench": true}
	p.started = true
	jfast := func(ctx context.Context) error {
		_, err := p.Enqueue(ctx, "bench", payload)
		return err
	}
	c := asynq.NewClientFromRedisClient(rdb)
	bare := func(ctx context.Context) error {
		body, err := json.Marshal(payload)
		if err != nil {
			return err
		}
		_, err = c.EnqueueContext(ctx, asynq.NewTask("bench", body), asynq.Queue(queue))
		return err
	}
	// A caller whose deadline is sooner than enqueue_timeout (a request's).
	deadline, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	// A caller whose context can end, with no deadline.
	cancellable, cancel2 := context.WithCancel(ctx)
	defer cancel2()

	for _, bc := range []struct {
		name string
		ctx  context.Context
		fn   func(context.Context) error
	}{{"jfast", ctx, jfast}, {"jfast-deadline", deadline, jfast}, {"jfast-cancellable", cancellable, jfast}, {"bare", ctx, bare}} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if err := bc.fn(bc.ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	// Both in one loop, alternating, medians: the machine's drift moves both.
	for _, ic := range []struct {
		name string
		ctx  context.Context
	}{{"interleaved", ctx}, {"interleaved-deadline", deadline}, {"interleaved-cancellable", cancellable}} {
		b.Run(ic.name, func(b *testing.B) {
			tj := make([]time.Duration, 0, b.N)
			tb := make([]time.Duration, 0, b.N)
			for i := range b.N {
				first, second, t1, t2 := jfast, bare, &tj, &tb
				if i%2 == 1 {
					first, second, t1, t2 = bare, jfast, &tb, &tj
				}
				start := time.Now()
				if err := first(ic.ctx); err != nil {
					b.Fatal(err)
				}
				mid := time.Now()
				if err := second(ic.ctx); err != nil {
					b.Fatal(err)
				}
				*t1 = append(*t1, mid.Sub(start))
				*t2 = append(*t2, time.Since(mid))
			}
			mj, mb := medianOf(tj), medianOf(tb)
			b.ReportMetric(float64(mj.Nanoseconds()), "jfast-ns")
			b.ReportMetric(float64(mb.Nanoseconds()), "bare-ns")
			b.ReportMetric(float64((mj - mb).Nanoseconds()), "extra-ns")
		})
	}
}

func medianOf(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

// answerHook answers every command itself, as Redis would answer asynq's
// enqueue (the script's 1: stored; SADD's 1), and sends nothing.
type answerHook struct{}

func (answerHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (answerHook) ProcessHook(redis.ProcessHook) redis.ProcessHook {
	return func(_ context.Context, cmd redis.Cmder) error {
		switch c := cmd.(type) {
		case *redis.Cmd:
			c.SetVal(int64(1))
		case *redis.IntCmd:
			c.SetVal(1)
		}
		return nil
	}
}

func (answerHook) ProcessPipelineHook(redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(context.Context, []redis.Cmder) error { return nil }
}
