package queue_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jfastframework/jfast/framework/resilience"
	"github.com/jfastframework/jfast/plugins/queue"
	"github.com/jfastframework/jfast/plugins/queue/queuetest"
	"github.com/jfastframework/jfast/problem"
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
	for i := range 5 {
		start := time.Now()
		_, err := q.Enqueue(ctx, "order", queuetest.Receipt{Order: 100 + i})
		took := time.Since(start)
		var de *problem.DependencyError
		if !errors.As(err, &de) || de.Dependency != "queue" {
			t.Fatalf("enqueue %d during the outage = %v, want a queue dependency error", i, err)
		}
		if took > 1500*time.Millisecond {
			t.Fatalf("enqueue %d took %s, want within enqueue_timeout (1s)", i, took)
		}
	}
	start := time.Now()
	_, err := q.Enqueue(ctx, "order", queuetest.Receipt{Order: 105})
	var de *problem.DependencyError
	if !errors.As(err, &de) || !errors.Is(err, errOpen) || de.RetryAfter <= 0 {
		t.Fatalf("enqueue after 5 failures = %v (%+v), want the open breaker with a retry-after", err, de)
	}
	if took := time.Since(start); took > 50*time.Millisecond {
		t.Fatalf("enqueue with the breaker open took %s, want at once", took)
	}
	resp := svc.Do(t, http.MethodPost, "/orders", "")
	if resp.Status != http.StatusServiceUnavailable || !strings.Contains(resp.String(), `"dependency":"queue"`) || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("POST /orders during the outage = %d %s %v", resp.Status, resp.String(), resp.Header)
	}
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

var errOpen = resilience.ErrOpen
