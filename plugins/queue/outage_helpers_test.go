package queue_test

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/plugins/queue"
	"github.com/jfastframework/jfast/plugins/queue/queuetest"
)

// The broker outage tests (outage_test.go on postgres and redis,
// rabbitmq_drill_test.go on rabbitmq) share these.

// ordersRoute mounts POST /orders, which enqueues order 999 on *q: the route a
// client sees answer 503 naming the queue during the outage.
func ordersRoute(q **queue.Plugin) func(app *framework.App, r chi.Router) error {
	return func(app *framework.App, r chi.Router) error {
		r.Method(http.MethodPost, "/orders", framework.Handler(func(w http.ResponseWriter, r *http.Request) error {
			if _, err := (*q).Enqueue(r.Context(), "order", queuetest.Receipt{Order: 999}); err != nil {
				return err
			}
			return framework.JSON(w, http.StatusAccepted, map[string]string{"status": "queued"})
		}))
		return nil
	}
}

// enqueueBeforeOutage enqueues orders 1–5 to run now and 6–10 due in 2 s, so
// they fall due during the outage that follows; none may be lost.
func enqueueBeforeOutage(t *testing.T, q *queue.Plugin) {
	t.Helper()
	ctx := context.Background()
	for i := 1; i <= 10; i++ {
		var opts []queue.Option
		if i > 5 {
			opts = append(opts, queue.Delay(2*time.Second))
		}
		if _, err := q.Enqueue(ctx, "order", queuetest.Receipt{Order: i}, opts...); err != nil {
			t.Fatal(err)
		}
	}
}

// handledAll reports whether every one of orders was handled at least once.
func handledAll(mu *sync.Mutex, handled map[int]int, orders ...int) bool {
	mu.Lock()
	defer mu.Unlock()
	for _, o := range orders {
		if handled[o] == 0 {
			return false
		}
	}
	return true
}
