package queue_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/jfastframework/jfast/plugins/queue"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"

	"github.com/jfastframework/jfast/drills"
	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/framework/resilience"
	"github.com/jfastframework/jfast/jfasttest"
	"github.com/jfastframework/jfast/plugins/cache"
	"github.com/jfastframework/jfast/plugins/db"
	"github.com/jfastframework/jfast/plugins/queue/queuetest"
	"github.com/jfastframework/jfast/problem"
)

// depPlugin returns the plugin the backend shares its connections with: the db
// plugin (its pool) for postgres, the cache plugin (its client) for redis, with
// its [plugin.X] table pointing at addr, followed by the lines of extra.
func depPlugin(backend, addr, extra string) (framework.Plugin, string) {
	if backend == "postgres" {
		return db.New(), fmt.Sprintf("[plugin.db]\nurl = %q\npool_size = 20\n%s\n", pgURL(or(addr, "127.0.0.1:5432")), extra)
	}
	return cache.New(), fmt.Sprintf("[plugin.cache]\nurl = %q\n%s\n", "redis://"+or(addr, redisAddr)+"/0", extra)
}

// appOpts are what a test may change about the App a harness starts.
type appOpts struct {
	addr   string // broker address; default the machine's server
	dep    string // more lines for the db or cache plugin's table
	clock  resilience.Clock
	routes func(app *framework.App, r chi.Router) error
}

func startApp(t testing.TB, backend string, cfg queuetest.Config, register func(*queue.Plugin), o appOpts) *jfasttest.Service {
	t.Helper()
	q := queue.New()
	if register != nil {
		register(q)
	}
	dep, depTOML := depPlugin(backend, o.addr, o.dep)
	if backend == "redis" {
		t.Cleanup(func() { deleteRedisQueues(t, cfg) })
	}
	toml := fmt.Sprintf("[app]\nlisten = \"127.0.0.1:0\"\n%s\n[plugins]\nenabled = [%q, \"queue\"]\n%s[plugin.queue]\nbackend = %q\n%s",
		cfg.App, dep.Name(), depTOML, backend, cfg.Queue)
	return jfasttest.Start(t, jfasttest.Options{TOML: toml, Plugins: []framework.Plugin{dep, q}, Clock: o.clock, Routes: o.routes})
}

func or(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// deleteRedisQueues removes the asynq keys of the test's queues from the shared
// Redis (never anything else).
func deleteRedisQueues(t testing.TB, cfg queuetest.Config) {
	c := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, name := range queueNamesIn(cfg.Queue) {
		iter := c.Scan(ctx, 0, "asynq:{"+name+"}:*", 500).Iterator()
		for iter.Next(ctx) {
			c.Del(ctx, iter.Val())
		}
		c.SRem(ctx, "asynq:queues", name)
	}
}

// queueNamesIn finds the [plugin.queue.queues.X] names in a TOML fragment.
func queueNamesIn(toml string) []string {
	var names []string
	const marker = "[plugin.queue.queues."
	for _, line := range strings.Split(toml, "\n") {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), marker); ok {
			if name, _, ok := strings.Cut(rest, "]"); ok {
				names = append(names, name)
			}
		}
	}
	return names
}

func harness(backend string) queuetest.Harness {
	h := queuetest.Harness{
		Backend: backend,
		Start: func(t *testing.T, cfg queuetest.Config, register func(*queue.Plugin)) *jfasttest.Service {
			return startApp(t, backend, cfg, register, appOpts{})
		},
	}
	if backend == "postgres" {
		h.Begin = func(t *testing.T) pgx.Tx {
			conn, err := pgx.Connect(context.Background(), pgURL("127.0.0.1:5432"))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { conn.Close(context.Background()) })
			tx, err := conn.Begin(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			return tx
		}
	}
	return h
}

// proxied starts a fault proxy in front of target, closed with the test, and
// returns it with a test clock and a queue name of the test's own: the start
// of every outage test.
func proxied(t *testing.T, target string) (*drills.Proxy, *resilience.TestClock, string) {
	t.Helper()
	proxy, err := drills.StartProxy(target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { proxy.Close() })
	return proxy, jfasttest.NewClock(), queuetest.QueueName(t)
}

// enqueueUntilBreakerOpens enqueues during an outage: five enqueues each fail
// within enqueue_timeout (1 s) with a queue dependency error, the sixth is
// refused at once by the open breaker with a Retry-After, and a route that
// enqueues answers 503 naming queue.
func enqueueUntilBreakerOpens(t *testing.T, q *queue.Plugin, svc *jfasttest.Service) {
	t.Helper()
	ctx := context.Background()
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
	if !errors.As(err, &de) || !errors.Is(err, resilience.ErrOpen) || de.RetryAfter <= 0 {
		t.Fatalf("enqueue after 5 failures = %v (%+v), want the open breaker with a retry-after", err, de)
	}
	if took := time.Since(start); took > 50*time.Millisecond {
		t.Fatalf("enqueue with the breaker open took %s, want at once", took)
	}
	resp := svc.Do(t, http.MethodPost, "/orders", "")
	if resp.Status != http.StatusServiceUnavailable || !strings.Contains(resp.String(), `"dependency":"queue"`) || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("POST /orders during the outage = %d %s %v", resp.Status, resp.String(), resp.Header)
	}
}
