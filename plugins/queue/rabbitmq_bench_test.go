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
	var extra []string
	if !workers {
		extra = append(extra, "workers = false")
	}
	svc := startRabbitApp(b, queuetest.Config{App: `log_level = "warn"`, Queue: queuetest.QueueTOML(name, 10, extra...)}, register, rabbitOpts{})
	q, err := queue.From(svc.App)
	if err != nil {
		b.Fatal(err)
	}
	if workers {
		queuetest.Eventually(b, 10*time.Second, "workers running", func() bool {
			return contains(svc.Get(b, "/ready").String(), `"workers":"running"`)
		})
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
