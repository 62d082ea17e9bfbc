package queue_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/jfastframework/jfast/plugins/queue"
	"github.com/jfastframework/jfast/plugins/queue/queuetest"
)

// The rabbitmq backend against bare amqp091-go doing the same work in the same
// run: a durable queue, persistent JSON messages, one publish at a time each
// waiting for its publisher confirm; end to end with prefetch 10 and 10
// handlers acking after decoding the payload.
//
//	go test -run '^$' -bench RabbitMQ -benchtime 3000x ./plugins/queue/

func BenchmarkRabbitMQEnqueue(b *testing.B) {
	b.Run("jfast-rabbitmq", func(b *testing.B) {
		q := rabbitBenchApp(b, nil, false)
		ctx := context.Background()
		b.ResetTimer()
		for range b.N {
			if _, err := q.Enqueue(ctx, "bench", benchPayload); err != nil {
				b.Fatal(err)
			}
		}
		report(b)
	})
	b.Run("amqp091", func(b *testing.B) {
		ch, queueName := bareRabbit(b)
		ctx := context.Background()
		b.ResetTimer()
		for range b.N {
			if err := barePublish(ctx, ch, queueName); err != nil {
				b.Fatal(err)
			}
		}
		report(b)
	})
}

func BenchmarkRabbitMQEndToEnd(b *testing.B) {
	b.Run("jfast-rabbitmq", func(b *testing.B) {
		var done atomic.Int64
		all := make(chan struct{})
		n := int64(b.N)
		q := rabbitBenchApp(b, func(q *queue.Plugin) {
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
	b.Run("amqp091", func(b *testing.B) {
		var done atomic.Int64
		all := make(chan struct{})
		n := int64(b.N)
		ch, queueName := bareRabbit(b)
		conn, err := amqp.Dial(rabbitURL)
		if err != nil {
			b.Fatal(err)
		}
		cch, err := conn.Channel()
		if err != nil {
			b.Fatal(err)
		}
		if err := cch.Qos(10, 0, false); err != nil {
			b.Fatal(err)
		}
		deliveries, err := cch.Consume(queueName, "", false, false, false, false, nil)
		if err != nil {
			b.Fatal(err)
		}
		var wg sync.WaitGroup
		for range 10 {
			wg.Go(func() {
				for d := range deliveries {
					var a benchArgs
					if err := json.Unmarshal(d.Body, &a); err != nil {
						_ = d.Nack(false, false)
						continue
					}
					_ = d.Ack(false)
					if done.Add(1) == n {
						close(all)
					}
				}
			})
		}
		b.Cleanup(func() { _ = conn.Close(); wg.Wait() })
		ctx := context.Background()
		b.ResetTimer()
		for range b.N {
			if err := barePublish(ctx, ch, queueName); err != nil {
				b.Fatal(err)
			}
		}
		wait(b, all)
		report(b)
	})
}

func rabbitBenchApp(b *testing.B, register func(*queue.Plugin), workers bool) *queue.Plugin {
	name := queuetest.QueueName(b)
	extra := []string{`kinds = ["bench", "warmup"]`} // enqueued here, handled or not
	if !workers {
		extra = append(extra, "workers = false")
	}
	svc := startRabbitApp(b, queuetest.Config{App: `log_level = "warn"`, Queue: queuetest.QueueTOML(name, 10, extra...)}, register, rabbitOpts{})
	q, err := queue.From(svc.App)
	if err != nil {
		b.Fatal(err)
	}
	if workers {
		queuetest.WorkersRunning(b, svc, 10*time.Second)
	}
	// Warm up: connection, topology.
	if _, err := q.Enqueue(context.Background(), "warmup", struct{}{}, queue.Delay(time.Hour)); err != nil {
		b.Fatal(err)
	}
	return q
}

// bareRabbit is a confirm-mode channel on its own connection and a durable
// queue of the test's, deleted afterwards.
func bareRabbit(b *testing.B) (*amqp.Channel, string) {
	conn, err := amqp.Dial(rabbitURL)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = conn.Close() })
	ch, err := conn.Channel()
	if err != nil {
		b.Fatal(err)
	}
	if err := ch.Confirm(false); err != nil {
		b.Fatal(err)
	}
	name := "jt.bare." + queuetest.QueueName(b)
	if _, err := ch.QueueDeclare(name, true, false, false, false, nil); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _, _ = ch.QueueDelete(name, false, false, false) })
	return ch, name
}

func barePublish(ctx context.Context, ch *amqp.Channel, queueName string) error {
	body, err := json.Marshal(benchPayload)
	if err != nil {
		return err
	}
	dc, err := ch.PublishWithDeferredConfirmWithContext(ctx, "", queueName, false, false, amqp.Publishing{
		ContentType: "application/json", DeliveryMode: amqp.Persistent, Body: body, Timestamp: time.Now(),
	})
	if err != nil {
		return err
	}
	ok, err := dc.WaitContext(ctx)
	if err != nil || !ok {
		return fmt.Errorf("not confirmed: ok=%v err=%v", ok, err)
	}
	return nil
}

// BenchmarkRabbitMQInterleaved alternates jfast and bare amqp091-go within each
// iteration (the order flips every iteration) and reports medians: on a shared
// 2-core machine, sub-benchmarks run one after the other disagree by more than
// the layer costs. enqueue: one confirmed publish each. end-to-end: a batch of
// 100 jobs published (each confirmed) then handled by 10 handlers with prefetch
// 10; the metric is the batch's jobs/s.
//
//	go test -run '^$' -bench BenchmarkRabbitMQInterleaved -benchtime 1000x ./plugins/queue/
func BenchmarkRabbitMQInterleaved(b *testing.B) {
	b.Run("enqueue", func(b *testing.B) {
		q := rabbitBenchApp(b, nil, false)
		ch, queueName := bareRabbit(b)
		ctx := context.Background()
		jfast := func() error { _, err := q.Enqueue(ctx, "bench", benchPayload); return err }
		bare := func() error { return barePublish(ctx, ch, queueName) }
		interleave(b, jfast, bare, 1)
	})
	b.Run("end-to-end", func(b *testing.B) {
		const batch = 100
		jdone := make(chan struct{}, batch)
		q := rabbitBenchApp(b, func(q *queue.Plugin) {
			_ = queue.Handle(q, "bench", func(ctx context.Context, a benchArgs) error { jdone <- struct{}{}; return nil })
		}, true)
		ch, queueName := bareRabbit(b)
		bdone := make(chan struct{}, batch)
		bareConsumer(b, queueName, bdone)
		ctx := context.Background()
		run := func(publish func() error, done chan struct{}) func() error {
			return func() error {
				for range batch {
					if err := publish(); err != nil {
						return err
					}
				}
				for range batch {
					select {
					case <-done:
					case <-time.After(time.Minute):
						return fmt.Errorf("batch not handled within a minute")
					}
				}
				return nil
			}
		}
		jfast := run(func() error { _, err := q.Enqueue(ctx, "bench", benchPayload); return err }, jdone)
		bare := run(func() error { return barePublish(ctx, ch, queueName) }, bdone)
		interleave(b, jfast, bare, batch)
	})
}

// interleave times jfast and bare alternately b.N times and reports medians.
func interleave(b *testing.B, jfast, bare func() error, jobs int) {
	for range 5 { // warm up
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
	b.ReportMetric(float64(jobs)/mj.Seconds(), "jfast-jobs/s")
	b.ReportMetric(float64(jobs)/mb.Seconds(), "bare-jobs/s")
	b.ReportMetric(100*(float64(mj)-float64(mb))/float64(mb), "overhead-%")
}

// bareConsumer consumes queueName with prefetch 10 and 10 handlers that decode
// the payload and ack, signalling done per message.
func bareConsumer(b *testing.B, queueName string, done chan<- struct{}) {
	conn, err := amqp.Dial(rabbitURL)
	if err != nil {
		b.Fatal(err)
	}
	cch, err := conn.Channel()
	if err != nil {
		b.Fatal(err)
	}
	if err := cch.Qos(10, 0, false); err != nil {
		b.Fatal(err)
	}
	deliveries, err := cch.Consume(queueName, "", false, false, false, false, nil)
	if err != nil {
		b.Fatal(err)
	}
	var wg sync.WaitGroup
	for range 10 {
		wg.Go(func() {
			for d := range deliveries {
				var a benchArgs
				if err := json.Unmarshal(d.Body, &a); err != nil {
					_ = d.Nack(false, false)
					continue
				}
				_ = d.Ack(false)
				done <- struct{}{}
			}
		})
	}
	b.Cleanup(func() { _ = conn.Close(); wg.Wait() })
}
