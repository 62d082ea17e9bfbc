package queue_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"

	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/jfasttest"
	"github.com/jfastframework/jfast/plugins/queue"
	"github.com/jfastframework/jfast/plugins/queue/queuetest"
)

// The same workload on jfast's queue and on the bare library underneath, in the
// same run: enqueue one small job per op, and end to end (b.N jobs enqueued,
// then timed until the last handler returned) with 10 workers.
//
//	go test -run '^$' -bench . -benchtime 3000x ./plugins/queue/

type benchArgs struct {
	Order int    `json:"order"`
	Email string `json:"email"`
}

func (benchArgs) Kind() string { return "bench" }

var benchPayload = benchArgs{Order: 42, Email: "a@example.com"}

func BenchmarkEnqueue(b *testing.B) {
	for _, backend := range []string{"postgres", "redis"} {
		b.Run("jfast-"+backend, func(b *testing.B) {
			q := benchApp(b, backend, nil, false)
			ctx := context.Background()
			b.ResetTimer()
			for range b.N {
				if _, err := q.Enqueue(ctx, "bench", benchPayload); err != nil {
					b.Fatal(err)
				}
			}
			report(b)
		})
	}
	b.Run("river", func(b *testing.B) {
		c := bareRiver(b, nil, "")
		ctx := context.Background()
		queueName := queuetest.QueueName(b)
		b.ResetTimer()
		for range b.N {
			if _, err := c.Insert(ctx, benchPayload, &river.InsertOpts{Queue: queueName}); err != nil {
				b.Fatal(err)
			}
		}
		report(b)
	})
	b.Run("asynq", func(b *testing.B) {
		rdb := sharedRedis(b)
		c := asynq.NewClientFromRedisClient(rdb)
		queueName := queuetest.QueueName(b)
		b.Cleanup(func() { deleteRedisQueues(b, queuetest.Config{Queue: queuetest.QueueTOML(queueName, 1)}) })
		ctx := context.Background()
		b.ResetTimer()
		for range b.N {
			body, _ := json.Marshal(benchPayload)
			if _, err := c.EnqueueContext(ctx, asynq.NewTask("bench", body), asynq.Queue(queueName)); err != nil {
				b.Fatal(err)
			}
		}
		report(b)
	})
}

func BenchmarkEndToEnd(b *testing.B) {
	for _, backend := range []string{"postgres", "redis"} {
		b.Run("jfast-"+backend, func(b *testing.B) {
			var done atomic.Int64
			all := make(chan struct{})
			n := int64(b.N)
			q := benchApp(b, backend, func(q *queue.Plugin) {
				_ = queue.Handle(q, "bench", func(ctx context.Context, a benchArgs) error {
					if done.Add(1) == n {
						close(all)
					}
					return nil
				})
			}, true)
			ctx := context.Background()
			b.ResetTimer()
			for range b.N {
				if _, err := q.Enqueue(ctx, "bench", benchPayload); err != nil {
					b.Fatal(err)
				}
			}
			wait(b, all)
			report(b)
		})
	}
	b.Run("river", func(b *testing.B) {
		var done atomic.Int64
		all := make(chan struct{})
		n := int64(b.N)
		workers := river.NewWorkers()
		river.AddWorker(workers, river.WorkFunc(func(ctx context.Context, j *river.Job[benchArgs]) error {
			if done.Add(1) == n {
				close(all)
			}
			return nil
		}))
		queueName := queuetest.QueueName(b)
		c := bareRiver(b, workers, queueName)
		ctx := context.Background()
		b.ResetTimer()
		for range b.N {
			if _, err := c.Insert(ctx, benchPayload, &river.InsertOpts{Queue: queueName}); err != nil {
				b.Fatal(err)
			}
		}
		wait(b, all)
		report(b)
	})
	b.Run("asynq", func(b *testing.B) {
		var done atomic.Int64
		all := make(chan struct{})
		n := int64(b.N)
		rdb := sharedRedis(b)
		queueName := queuetest.QueueName(b)
		b.Cleanup(func() { deleteRedisQueues(b, queuetest.Config{Queue: queuetest.QueueTOML(queueName, 1)}) })
		srv := asynq.NewServerFromRedisClient(rdb, asynq.Config{Concurrency: 10, Queues: map[string]int{queueName: 1}, LogLevel: asynq.WarnLevel, TaskCheckInterval: 100 * time.Millisecond})
		if err := srv.Start(asynq.HandlerFunc(func(ctx context.Context, t *asynq.Task) error {
			var a benchArgs
			if err := json.Unmarshal(t.Payload(), &a); err != nil {
				return err
			}
			if done.Add(1) == n {
				close(all)
			}
			return nil
		})); err != nil {
			b.Fatal(err)
		}
		defer srv.Shutdown()
		c := asynq.NewClientFromRedisClient(rdb)
		ctx := context.Background()
		b.ResetTimer()
		for range b.N {
			body, _ := json.Marshal(benchPayload)
			if _, err := c.EnqueueContext(ctx, asynq.NewTask("bench", body), asynq.Queue(queueName)); err != nil {
				b.Fatal(err)
			}
		}
		wait(b, all)
		report(b)
	})
}

func benchApp(b *testing.B, backend string, register func(*queue.Plugin), workers bool) *queue.Plugin {
	name := queuetest.QueueName(b)
	extra := []string{`kinds = ["bench", "warmup"]`} // enqueued here, handled or not
	if !workers {
		extra = append(extra, "workers = false")
	}
	svc := startApp(b, backend, queuetest.Config{App: `log_level = "warn"`, Queue: queuetest.QueueTOML(name, 10, extra...)}, register, appOpts{})
	q, err := queue.From(svc.App)
	if err != nil {
		b.Fatal(err)
	}
	if workers {
		queuetest.WorkersRunning(b, svc, 10*time.Second)
	}
	// Warm up: migrations, connections.
	if _, err := q.Enqueue(context.Background(), "warmup", struct{}{}, queue.Delay(time.Hour)); err != nil {
		b.Fatal(err)
	}
	return q
}

// sharedApp starts an App with only the backend's connection plugin, so the
// bare libraries run on the same pool or client (with its deadlines and
// breaker hooks) as jfast's queue: the comparison is the queue layer alone.
func sharedApp(b *testing.B, backend string) framework.Plugin {
	dep, depTOML := depPlugin(backend, "", "")
	jfasttest.Start(b, jfasttest.Options{
		TOML:    fmt.Sprintf("[app]\nlisten = \"127.0.0.1:0\"\nlog_level = \"warn\"\n[plugins]\nenabled = [%q]\n%s", dep.Name(), depTOML),
		Plugins: []framework.Plugin{dep},
	})
	return dep
}

func sharedRedis(b *testing.B) redis.UniversalClient {
	return sharedApp(b, "redis").(interface{ Client() redis.UniversalClient }).Client()
}

// bareRiver is River on the db plugin's pool with the settings jfast gives it.
func bareRiver(b *testing.B, workers *river.Workers, queueName string) *river.Client[pgx.Tx] {
	ctx := context.Background()
	pool := sharedApp(b, "postgres").(interface{ Pool() *pgxpool.Pool }).Pool()
	m, err := rivermigrate.New(riverpgxv5.New(pool), nil)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := m.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		b.Fatal(err)
	}
	cfg := &river.Config{FetchPollInterval: 100 * time.Millisecond}
	if workers != nil {
		cfg.Workers = workers
		cfg.Queues = map[string]river.QueueConfig{queueName: {MaxWorkers: 10}}
	}
	c, err := river.NewClient(riverpgxv5.New(pool), cfg)
	if err != nil {
		b.Fatal(err)
	}
	if workers != nil {
		if err := c.Start(ctx); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = c.Stop(context.Background()) })
	}
	if _, err := c.Insert(ctx, benchPayload, &river.InsertOpts{Queue: "warmup", ScheduledAt: time.Now().Add(time.Hour)}); err != nil {
		b.Fatal(err)
	}
	return c
}

func wait(b *testing.B, all chan struct{}) {
	select {
	case <-all:
	case <-time.After(5 * time.Minute):
		b.Fatal("not every job handled within 5 minutes")
	}
}

func report(b *testing.B) {
	b.StopTimer()
	b.ReportAllocs()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "jobs/s")
}
