package queue_test

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"github.com/jfastframework/jfast/plugins/queue"
	"github.com/jfastframework/jfast/plugins/queue/queuetest"
)

// BenchmarkEnqueueInterleaved runs one jfast Enqueue and one bare-library
// enqueue per iteration, in alternating order (River on a plain pgxpool of the
// db plugin's size and DSN; asynq on the cache plugin's client),
// and reports the median of each and the overhead: on a shared 2-core machine two
// sub-benchmarks run one after the other disagree by far more than the layer
// costs, while interleaved medians move together. Both calls get the same
// context: context.Background(), or in redis-cancellable a context that can
// be cancelled and has no deadline (as a request's or a job's can end), which
// jfast's enqueue deadline has to follow.
//
//	go test -run '^$' -bench BenchmarkEnqueueInterleaved -benchtime 3000x -count 4 ./plugins/queue/
func BenchmarkEnqueueInterleaved(b *testing.B) {
	for _, bc := range []struct {
		name, backend string
		cancellable   bool
	}{{"postgres", "postgres", false}, {"redis", "redis", false}, {"redis-cancellable", "redis", true}} {
		backend := bc.backend
		b.Run(bc.name, func(b *testing.B) {
			name := queuetest.QueueName(b)
			svc := startApp(b, backend, queuetest.Config{App: `log_level = "warn"`, Queue: queuetest.QueueTOML(name, 1, "workers = false", `kinds = ["bench"]`)}, nil, appOpts{})
			q, err := queue.From(svc.App)
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			if bc.cancellable {
				var cancel context.CancelFunc
				ctx, cancel = context.WithCancel(ctx)
				defer cancel()
			}
			var bare func() error
			switch backend {
			case "postgres":
				// River on a plain pgxpool of the same size as the db plugin's
				// (none of the plugin's hooks: its bounded ping, its breaker).
				plugged := svc.App.Plugin("db").(interface{ Pool() *pgxpool.Pool }).Pool()
				pc, err := pgxpool.ParseConfig(plugged.Config().ConnString())
				if err != nil {
					b.Fatal(err)
				}
				pc.MaxConns = plugged.Config().MaxConns
				pool, err := pgxpool.NewWithConfig(ctx, pc)
				if err != nil {
					b.Fatal(err)
				}
				defer pool.Close()
				c, err := river.NewClient(riverpgxv5.New(pool), &river.Config{})
				if err != nil {
					b.Fatal(err)
				}
				bare = func() error {
					_, err := c.Insert(ctx, benchPayload, &river.InsertOpts{Queue: name})
					return err
				}
			case "redis":
				c := asynq.NewClientFromRedisClient(svc.App.Plugin("cache").(interface{ Client() redis.UniversalClient }).Client())
				bare = func() error {
					body, err := json.Marshal(benchPayload)
					if err != nil {
						return err
					}
					_, err = c.EnqueueContext(ctx, asynq.NewTask("bench", body), asynq.Queue(name))
					return err
				}
			}
			jfast := func() error {
				_, err := q.Enqueue(ctx, "bench", benchPayload)
				return err
			}
			// Warm up both (migrations, connections, script cache).
			for range 20 {
				if err := jfast(); err != nil {
					b.Fatal(err)
				}
				if err := bare(); err != nil {
					b.Fatal(err)
				}
			}
			tj := make([]time.Duration, 0, b.N)
			tb := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for i := range b.N {
				first, second, t1, t2 := jfast, bare, &tj, &tb
				if i%2 == 1 {
					first, second, t1, t2 = bare, jfast, &tb, &tj
				}
				start := time.Now()
				if err := first(); err != nil {
					b.Fatal(err)
				}
				mid := time.Now()
				if err := second(); err != nil {
					b.Fatal(err)
				}
				*t1 = append(*t1, mid.Sub(start))
				*t2 = append(*t2, time.Since(mid))
			}
			b.StopTimer()
			mj, mb := median(tj), median(tb)
			b.ReportMetric(float64(mj.Microseconds()), "jfast-µs")
			b.ReportMetric(float64(mb.Microseconds()), "bare-µs")
			b.ReportMetric(100*(float64(mj)-float64(mb))/float64(mb), "overhead-%")
		})
	}
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}
