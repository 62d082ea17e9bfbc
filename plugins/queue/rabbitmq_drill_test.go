package queue_test

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jfastframework/jfast/drills"
	"github.com/jfastframework/jfast/plugins/queue"
	"github.com/jfastframework/jfast/plugins/queue/queuetest"
)

// The broker drill: a fault proxy in front of the machine's RabbitMQ hangs
// (every byte blackholed). Enqueue answers a "queue" dependency error within
// its deadline, then the breaker fails it at once (503 naming queue); /ready
// names the queue; the lost connections are noticed by heartbeat; after the
// broker is back, publishing and consuming resume on the same App, the job
// that was running unacked at the loss is redelivered, and every job confirmed
// before the outage is handled.
func TestRabbitMQBrokerDrill(t *testing.T) {
	t.Parallel()
	proxy, clk, name := proxied(t, "127.0.0.1:5672")
	var mu sync.Mutex
	handled := map[int]int{}
	inFlight := make(chan struct{})
	release := make(chan struct{})
	var q *queue.Plugin
	svc := startRabbitApp(t, queuetest.Config{
		App:   `readiness_timeout = "1s"`,
		Queue: queuetest.QueueTOML(name, 4, `enqueue_timeout = "1s"`, `retry_base = "100ms"`, `retry_max = "1s"`),
	}, func(p *queue.Plugin) {
		q = p
		_ = queue.Handle(p, "order", func(ctx context.Context, r queuetest.Receipt) error {
			mu.Lock()
			handled[r.Order]++
			n := handled[r.Order]
			mu.Unlock()
			if r.Order == 50 && n == 1 {
				close(inFlight)
				<-release // still running when the broker hangs; its ack is lost
			}
			return nil
		})
	}, rabbitOpts{url: "amqp://guest:guest@" + proxy.Addr() + "/", heartbeat: "1s", clock: clk, routes: ordersRoute(&q)})
	ctx := context.Background()
	count := func(orders ...int) bool { return handledAll(&mu, handled, orders...) }
	waitRabbitConnected(t, svc)
	enqueueBeforeOutage(t, q)
	if _, err := q.Enqueue(ctx, "order", queuetest.Receipt{Order: 50}); err != nil {
		t.Fatal(err)
	}
	queuetest.Eventually(t, 15*time.Second, "jobs 1-5 handled before the outage", func() bool { return count(1, 2, 3, 4, 5) })
	select {
	case <-inFlight:
	case <-time.After(15 * time.Second):
		t.Fatal("job 50 not running before the outage")
	}

	if err := proxy.Blackhole(); err != nil {
		t.Fatal(err)
	}
	enqueueUntilBreakerOpens(t, q, svc)
	ready := svc.Get(t, "/ready")
	if ready.Status != http.StatusOK || !strings.Contains(ready.String(), `"status":"degraded"`) || !strings.Contains(ready.String(), `"queue":{"healthy":false`) {
		t.Fatalf("/ready during the outage = %d %s", ready.Status, ready.String())
	}
	// Heartbeats (1 s) stop: both connections are given up within ~3 s.
	queuetest.Eventually(t, 10*time.Second, "both lost connections noticed", func() bool {
		return strings.Count(svc.Logs(), "rabbitmq connection lost") >= 2
	})
	close(release) // job 50 returns now: its ack has no connection to go to
	time.Sleep(time.Second)

	if err := proxy.Pass(); err != nil {
		t.Fatal(err)
	}
	recovered := time.Now()
	queuetest.Eventually(t, 60*time.Second, "enqueue succeeds after the broker came back", func() bool {
		clk.Advance(16 * time.Second) // past the breaker's cool-down: one probe passes
		_, err := q.Enqueue(ctx, "order", queuetest.Receipt{Order: 200})
		return err == nil
	})
	queuetest.Eventually(t, 60*time.Second, "every job confirmed before the outage handled after it, and the new one", func() bool {
		return count(1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 200)
	})
	queuetest.Eventually(t, 30*time.Second, "job 50, unacked at the loss, redelivered", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return handled[50] == 2
	})
	t.Logf("publishing and consuming resumed, backlog handled %s after the broker came back", time.Since(recovered).Round(100*time.Millisecond))
	ready = svc.Get(t, "/ready")
	if ready.Status != http.StatusOK || !strings.Contains(ready.String(), `"queue":{"healthy":true`) {
		t.Fatalf("/ready after recovery = %d %s", ready.Status, ready.String())
	}
	mu.Lock()
	defer mu.Unlock()
	for o := 100; o <= 105; o++ {
		if handled[o] != 0 {
			t.Fatalf("order %d, refused during the outage, was handled", o)
		}
	}
	if !strings.Contains(svc.Logs(), "rabbitmq connection re-made") && !strings.Contains(svc.Logs(), "rabbitmq connection lost; reconnecting") {
		t.Fatalf("no reconnection in the logs:\n%s", svc.Logs())
	}
}

// Connections reset (the broker restarted, a load balancer dropped them):
// NotifyClose fires at once, both connections are re-made, and the next
// enqueue and job work on the same App without the breaker opening.
func TestRabbitMQConnectionReset(t *testing.T) {
	t.Parallel()
	proxy, err := drills.StartProxy("127.0.0.1:5672")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { proxy.Close() })
	name := queuetest.QueueName(t)
	got := make(chan int, 10)
	var q *queue.Plugin
	startRabbitApp(t, queuetest.Config{Queue: queuetest.QueueTOML(name, 2)}, func(p *queue.Plugin) {
		q = p
		_ = queue.Handle(p, "order", func(ctx context.Context, r queuetest.Receipt) error { got <- r.Order; return nil })
	}, rabbitOpts{url: "amqp://guest:guest@" + proxy.Addr() + "/"})
	ctx := context.Background()
	if _, err := q.Enqueue(ctx, "order", queuetest.Receipt{Order: 1}); err != nil {
		t.Fatal(err)
	}
	if o := <-got; o != 1 {
		t.Fatalf("handled %d", o)
	}
	accepted := proxy.Accepted()
	if err := proxy.Reset(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	if err := proxy.Pass(); err != nil {
		t.Fatal(err)
	}
	// The next enqueue succeeds: it waits for the new connection within its
	// deadline (and a publish lost with the old one is retried once).
	res, err := q.Enqueue(ctx, "order", queuetest.Receipt{Order: 2})
	if err != nil {
		t.Fatalf("enqueue after the reset = %v", err)
	}
	// Job 1 may run again: its ack can be cut by the reset (at least once).
	for o := 0; o != 2; {
		select {
		case o = <-got:
			if o != 1 && o != 2 {
				t.Fatalf("handled %d", o)
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("job %s not handled after the reset", res.ID)
		}
	}
	queuetest.Eventually(t, 20*time.Second, "both connections re-made", func() bool { return proxy.Accepted() >= accepted+2 })
	if s := q.Breaker().Snapshot().State.String(); s != "closed" {
		t.Fatalf("breaker %s after a reset, want closed", s)
	}
}
