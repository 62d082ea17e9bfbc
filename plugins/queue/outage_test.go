package queue_test

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jfastframework/jfast/plugins/queue"
	"github.com/jfastframework/jfast/plugins/queue/queuetest"
)

// The broker hangs (a fault proxy in front of the machine's server blackholes
// every byte): enqueue answers a "queue" dependency error within its deadline,
// then the breaker fails it at once; /ready is degraded; when the broker comes
// back the workers resume on the same App and every job enqueued before the
// outage is handled.
func TestBrokerOutage(t *testing.T) {
	t.Parallel()
	for backend, target := range map[string]string{"postgres": "127.0.0.1:5432", "redis": redisAddr} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			brokerOutage(t, backend, target)
		})
	}
}

func brokerOutage(t *testing.T, backend, target string) {
	proxy, clk, name := proxied(t, target)
	var mu sync.Mutex
	handled := map[int]int{}
	var q *queue.Plugin
	svc := startApp(t, backend, queuetest.Config{
		App:   `readiness_timeout = "1s"`,
		Queue: queuetest.QueueTOML(name, 4, `enqueue_timeout = "1s"`, `retry_base = "100ms"`, `retry_max = "1s"`),
	}, func(p *queue.Plugin) {
		q = p
		_ = queue.Handle(p, "order", func(ctx context.Context, r queuetest.Receipt) error {
			mu.Lock()
			handled[r.Order]++
			mu.Unlock()
			return nil
		})
	}, appOpts{addr: proxy.Addr(), clock: clk, routes: ordersRoute(&q)})
	ctx := context.Background()
	count := func(orders ...int) bool { return handledAll(&mu, handled, orders...) }
	enqueueBeforeOutage(t, q)
	queuetest.Eventually(t, 15*time.Second, "jobs 1-5 handled before the outage", func() bool { return count(1, 2, 3, 4, 5) })

	if err := proxy.Blackhole(); err != nil {
		t.Fatal(err)
	}
	enqueueUntilBreakerOpens(t, q, svc)
	ready := svc.Get(t, "/ready")
	if ready.Status != http.StatusOK || !strings.Contains(ready.String(), `"status":"degraded"`) || !strings.Contains(ready.String(), `"queue":{"healthy":false`) {
		t.Fatalf("/ready during the outage = %d %s", ready.Status, ready.String())
	}
	time.Sleep(2 * time.Second) // jobs 6-10 fall due while the broker is away

	if err := proxy.Pass(); err != nil {
		t.Fatal(err)
	}
	recovered := time.Now()
	queuetest.Eventually(t, 60*time.Second, "enqueue succeeds after the broker came back", func() bool {
		clk.Advance(16 * time.Second) // past the breaker's 15 s cool-down: one probe passes
		_, err := q.Enqueue(ctx, "order", queuetest.Receipt{Order: 200})
		return err == nil
	})
	queuetest.Eventually(t, 90*time.Second, "every job enqueued before the outage handled after it, and the new one", func() bool {
		return count(1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 200)
	})
	t.Logf("%s: workers resumed and caught up %s after the broker came back", backend, time.Since(recovered).Round(100*time.Millisecond))
	mu.Lock()
	defer mu.Unlock()
	for o := 100; o <= 105; o++ {
		if handled[o] != 0 {
			t.Fatalf("order %d, refused during the outage, was handled", o)
		}
	}
}
