package queue_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jfastframework/jfast/framework/resilience"
	"github.com/jfastframework/jfast/jfasttest"
	"github.com/jfastframework/jfast/plugins/cache"
	"github.com/jfastframework/jfast/plugins/db"
	"github.com/jfastframework/jfast/plugins/queue"
	"github.com/jfastframework/jfast/plugins/queue/queuetest"
	"github.com/jfastframework/jfast/problem"
)

// With the db plugin's connection breaker open, an enqueue on the postgres
// backend fails at once: the 503 names the queue, carries the db breaker's
// Retry-After and says the job was not enqueued. The database hangs behind a
// fault proxy (blackhole) and enqueue_timeout is 30 s, so an enqueue that
// reached for a connection would end with a ping timeout or the deadline;
// the breaker's error, on a test clock that has not moved, shows that it did
// not (no timing is asserted). The queue's own breaker counts none of these.
// Once the database is back and the db breaker's cool-down has passed,
// enqueues work on the same App.
func TestEnqueueFailsFastOnOpenDBBreaker(t *testing.T) {
	t.Parallel()
	proxy, clk, name := proxied(t, "127.0.0.1:5432")
	var q *queue.Plugin
	svc := startApp(t, "postgres", queuetest.Config{
		Queue: queuetest.QueueTOML(name, 1, `workers = false`, `enqueue_timeout = "30s"`, `kinds = ["order"]`),
	}, func(p *queue.Plugin) { q = p }, appOpts{
		addr:   proxy.Addr(),
		dep:    "ping_timeout = \"300ms\"\nconnect_timeout = \"1s\"\nbreaker_failures = 1\nbreaker_cool_down = \"15s\"",
		clock:  clk,
		routes: ordersRoute(&q),
	})
	ctx := context.Background()
	if _, err := q.Enqueue(ctx, "order", queuetest.Receipt{Order: 1}); err != nil {
		t.Fatal(err) // migrates the job tables and leaves a pooled connection
	}

	// The db plugin pings a pooled connection idle for over a second
	// (pgxpool's real clock); one used less recently is trusted, and a
	// statement on it without a deadline would wait as long as the server.
	time.Sleep(1200 * time.Millisecond)
	if err := proxy.Blackhole(); err != nil {
		t.Fatal(err)
	}
	d, err := db.Get(svc.App)
	if err != nil {
		t.Fatal(err)
	}
	// The pooled connection's ping goes unanswered (a hang: half-open) and
	// its replacement, the probe, too: the db breaker is open.
	_, err = d.Exec(ctx, "SELECT 1")
	var dbErr *problem.DependencyError
	if !errors.As(err, &dbErr) || dbErr.Dependency != "db" {
		t.Fatalf("SELECT 1 on the hung database = %v, want a db dependency error", err)
	}
	if s := d.Breaker(); s.State != resilience.StateOpen {
		t.Fatalf("db breaker after the failed ping = %s, want open", s.State)
	}

	for i := range 3 {
		_, err := q.Enqueue(ctx, "order", queuetest.Receipt{Order: 10 + i})
		var de *problem.DependencyError
		if !errors.As(err, &de) || de.Dependency != "queue" {
			t.Fatalf("enqueue %d with the db breaker open = %v, want a queue dependency error", i, err)
		}
		if !errors.Is(err, resilience.ErrOpen) || !errors.Is(err, queue.ErrNotEnqueued) || errors.Is(err, queue.ErrMaybeEnqueued) {
			t.Fatalf("enqueue %d = %v, want the db breaker's refusal, not enqueued", i, err)
		}
		if de.RetryAfter != 15*time.Second {
			t.Fatalf("enqueue %d retry-after = %s, want the db breaker's cool-down (15s; the clock has not moved)", i, de.RetryAfter)
		}
	}
	if s := q.Breaker().Snapshot(); s.State != resilience.StateClosed || s.Consecutive != 0 {
		t.Fatalf("queue breaker = %+v, want closed with nothing counted: the db breaker holds the evidence", s)
	}
	resp := svc.Do(t, http.MethodPost, "/orders", "")
	if resp.Status != http.StatusServiceUnavailable || !strings.Contains(resp.String(), `"dependency":"queue"`) || resp.Header.Get("Retry-After") != "15" {
		t.Fatalf("POST /orders with the db breaker open = %d %s %v, want 503 naming queue, Retry-After 15", resp.Status, resp.String(), resp.Header)
	}

	if err := proxy.Pass(); err != nil {
		t.Fatal(err)
	}
	queuetest.Eventually(t, 30*time.Second, "enqueue succeeds once the database is back", func() bool {
		clk.Advance(16 * time.Second) // past the db breaker's cool-down: its probe passes
		_, err := q.Enqueue(ctx, "order", queuetest.Receipt{Order: 20})
		return err == nil
	})
}

// An enqueue the cache plugin's breaker refuses does no I/O, so
// jfast_queue_enqueue_duration_seconds does not time it: after one enqueue
// that reached Redis, the tripped breaker (on a test clock that does not
// move, so it stays open) refuses three, and the histogram still counts one.
func TestEnqueueRefusedByCacheBreakerIsNotTimed(t *testing.T) {
	t.Parallel()
	var q *queue.Plugin
	svc := startApp(t, "redis", queuetest.Config{
		Queue: queuetest.QueueTOML(queuetest.QueueName(t), 1, `workers = false`, `kinds = ["order"]`),
	}, func(p *queue.Plugin) { q = p }, appOpts{clock: jfasttest.NewClock()})
	ctx := context.Background()
	if _, err := q.Enqueue(ctx, "order", queuetest.Receipt{Order: 1}); err != nil {
		t.Fatal(err)
	}
	c, err := cache.From(svc.App)
	if err != nil {
		t.Fatal(err)
	}
	if !c.Breaker().Trip() {
		t.Fatal("the cache breaker did not trip")
	}
	for i := range 3 {
		_, err := q.Enqueue(ctx, "order", queuetest.Receipt{Order: 10 + i})
		if !errors.Is(err, resilience.ErrOpen) || !errors.Is(err, queue.ErrNotEnqueued) {
			t.Fatalf("enqueue %d with the cache breaker open = %v, want its refusal, not enqueued", i, err)
		}
	}
	if n := enqueuesTimed(t, svc); n != 1 {
		t.Fatalf("jfast_queue_enqueue_duration_seconds counts %d enqueues, want 1: the three the cache breaker refused are not timed", n)
	}
}

// enqueuesTimed reads how many enqueues the App's enqueue histogram counts.
func enqueuesTimed(t *testing.T, svc *jfasttest.Service) uint64 {
	t.Helper()
	families, err := svc.App.Metrics().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == "jfast_queue_enqueue_duration_seconds" {
			return f.GetMetric()[0].GetHistogram().GetSampleCount()
		}
	}
	t.Fatal("no jfast_queue_enqueue_duration_seconds in the App's metrics")
	return 0
}
