package queue_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/jfastframework/jfast/drills"
	"github.com/jfastframework/jfast/framework/resilience"
	"github.com/jfastframework/jfast/jfasttest"
	"github.com/jfastframework/jfast/plugins/queue"
	"github.com/jfastframework/jfast/plugins/queue/queuetest"
	"github.com/jfastframework/jfast/problem"
)

// assertOutcome checks that err is the queue's 503 and says, alone, whether
// the job may exist; the problem's detail says so when it may.
func assertOutcome(t *testing.T, what string, err error, maybe bool) {
	t.Helper()
	var de *problem.DependencyError
	if !errors.As(err, &de) || de.Dependency != "queue" {
		t.Fatalf("%s = %v, want a queue dependency error", what, err)
	}
	if errors.Is(err, queue.ErrMaybeEnqueued) != maybe || errors.Is(err, queue.ErrNotEnqueued) == maybe {
		t.Fatalf("%s = %v: ErrMaybeEnqueued %v, ErrNotEnqueued %v; want maybe = %v, and exactly one",
			what, err, errors.Is(err, queue.ErrMaybeEnqueued), errors.Is(err, queue.ErrNotEnqueued), maybe)
	}
	p := problem.From(err)
	if p.Status != http.StatusServiceUnavailable || strings.Contains(p.Detail, "may have been enqueued") != maybe {
		t.Fatalf("%s renders %d %q, want 503 saying \"may have been enqueued\" = %v", what, p.Status, p.Detail, maybe)
	}
}

// On redis an enqueue error says whether the job may exist. A private
// redis-server behind a fault proxy:
//
//   - refused (the proxy closes every connection and stops listening): "not
//     enqueued", and the jobs are indeed absent; repeated until a breaker
//     opens, whose refusals are "not enqueued" too;
//   - paused (SIGSTOP: the socket is open, nothing is read): the script that
//     stores the task is written and its reply never comes: "may have been
//     enqueued", in the error and in the 503's detail. Resumed, Redis runs
//     the command it had buffered: the job exists although the enqueue
//     failed. Enqueueing again with the same unique key answers Duplicate
//     with the job's ID: the retry made no second job.
func TestEnqueueOutcomeRedis(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv, err := drills.StartRedis(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Stop() })
	proxy, err := drills.StartProxy(srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { proxy.Close() })
	direct := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { direct.Close() })
	clk := jfasttest.NewClock()
	name := queuetest.QueueName(t)
	var q *queue.Plugin
	svc := startApp(t, "redis", queuetest.Config{
		Queue: queuetest.QueueTOML(name, 1, `workers = false`, `enqueue_timeout = "5s"`, `kinds = ["order"]`),
	}, func(p *queue.Plugin) { q = p }, appOpts{addr: proxy.Addr(), dep: `command_timeout = "500ms"`, clock: clk, routes: ordersRoute(&q)})
	taskExists := func(key string) bool {
		n, err := direct.Exists(ctx, "asynq:{"+name+"}:t:u:order:"+key).Result()
		return err == nil && n == 1
	}
	if _, err := q.Enqueue(ctx, "order", queuetest.Receipt{Order: 1}); err != nil {
		t.Fatal(err) // registers the queue (SADD) and leaves a pooled connection
	}

	// Refused.
	if err := proxy.Refuse(); err != nil {
		t.Fatal(err)
	}
	opened := false
	for i := 0; i < 10 && !opened; i++ {
		key := fmt.Sprint(100 + i)
		_, err := q.Enqueue(ctx, "order", queuetest.Receipt{Order: 100 + i}, queue.UniqueKey(key))
		assertOutcome(t, "enqueue "+key+" refused", err, false)
		opened = errors.Is(err, resilience.ErrOpen)
	}
	if !opened {
		t.Fatal("10 refused enqueues and no breaker opened")
	}
	if err := proxy.Pass(); err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		if key := fmt.Sprint(100 + i); taskExists(key) {
			t.Fatalf("job %s, refused as not enqueued, exists", key)
		}
	}
	queuetest.Eventually(t, 30*time.Second, "enqueue succeeds once Redis is reachable again", func() bool {
		clk.Advance(16 * time.Second) // past the breakers' cool-down
		_, err := q.Enqueue(ctx, "order", queuetest.Receipt{Order: 2})
		return err == nil // the connection it leaves in the pool is the one paused below
	})

	// Paused.
	if err := srv.Pause(); err != nil {
		t.Fatal(err)
	}
	resumed := sync.OnceFunc(func() { _ = srv.Resume() })
	t.Cleanup(resumed)
	_, err = q.Enqueue(ctx, "order", queuetest.Receipt{Order: 300}, queue.UniqueKey("300"))
	assertOutcome(t, "enqueue 300 to the paused server", err, true)
	// That hang opened the redis breaker (nothing answered since it was
	// sent): the next enqueue is refused at once, certainly not enqueued.
	resp := svc.Do(t, http.MethodPost, "/orders", "")
	if resp.Status != http.StatusServiceUnavailable || strings.Contains(resp.String(), "may have been enqueued") || !strings.Contains(resp.String(), `"dependency":"queue"`) || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("POST /orders after the hang = %d %s, want the open breaker's 503 naming queue with Retry-After, not \"may have been enqueued\"", resp.Status, resp.String())
	}
	resumed()
	queuetest.Eventually(t, 10*time.Second, "the job whose enqueue failed exists once Redis ran its buffered command", func() bool {
		return taskExists("300")
	})
	// The paused enqueue hung and opened the breaker: past the cool-down,
	// the next one probes.
	clk.Advance(16 * time.Second)
	res, err := q.Enqueue(ctx, "order", queuetest.Receipt{Order: 300}, queue.UniqueKey("300"))
	if err != nil || !res.Duplicate || res.ID != name+"/u:order:300" {
		t.Fatalf("enqueue 300 again = %+v, %v; want Duplicate with ID %s/u:order:300", res, err, name)
	}
}

// On rabbitmq the same distinction, at the publisher confirm. A fault proxy
// in front of the machine's broker:
//
//   - held (every byte waits in the proxy, as with a paused broker): the
//     publish is written and its confirm does not come within
//     enqueue_timeout: "may have been enqueued". Released, the broker gets the
//     publish and stores it: the job is handled although its enqueue failed;
//   - refused, once the backend saw its connection go: no connection to
//     publish on within enqueue_timeout: "not enqueued", and the job is never
//     handled (the job enqueued after it, on the same queue, is).
func TestEnqueueOutcomeRabbitMQ(t *testing.T) {
	t.Parallel()
	proxy, clk, name := proxied(t, "127.0.0.1:5672")
	var mu sync.Mutex
	handled := map[int]int{}
	var q *queue.Plugin
	svc := startRabbitApp(t, queuetest.Config{
		App:   `readiness_timeout = "1s"`,
		Queue: queuetest.QueueTOML(name, 1, `enqueue_timeout = "1s"`),
	}, func(p *queue.Plugin) {
		q = p
		_ = queue.Handle(p, "order", func(ctx context.Context, r queuetest.Receipt) error {
			mu.Lock()
			handled[r.Order]++
			mu.Unlock()
			return nil
		})
	}, rabbitOpts{url: "amqp://guest:guest@" + proxy.Addr() + "/", clock: clk})
	ctx := context.Background()
	count := func(orders ...int) bool { return handledAll(&mu, handled, orders...) }
	waitRabbitConnected(t, svc)
	if _, err := q.Enqueue(ctx, "order", queuetest.Receipt{Order: 1}); err != nil {
		t.Fatal(err)
	}
	queuetest.Eventually(t, 15*time.Second, "job 1 handled", func() bool { return count(1) })

	// Held.
	if err := proxy.Hold(); err != nil {
		t.Fatal(err)
	}
	_, err := q.Enqueue(ctx, "order", queuetest.Receipt{Order: 2})
	assertOutcome(t, "enqueue 2 to the held broker", err, true)
	// That hang opened the queue's breaker (the broker answered nothing
	// since the publish): a request's next enqueue is refused at once
	// instead of waiting enqueue_timeout again.
	began := time.Now()
	_, err = q.Enqueue(ctx, "order", queuetest.Receipt{Order: 5})
	if took := time.Since(began); !errors.Is(err, resilience.ErrOpen) || took >= 500*time.Millisecond {
		t.Fatalf("enqueue right after the hang = %v after %s; want the open breaker's refusal at once", err, took)
	}
	assertOutcome(t, "enqueue 5 refused by the open breaker", err, false)
	if err := proxy.Pass(); err != nil {
		t.Fatal(err)
	}
	queuetest.Eventually(t, 15*time.Second, "job 2, whose enqueue failed unconfirmed, handled once the broker got it", func() bool { return count(2) })

	// Refused.
	if err := proxy.Refuse(); err != nil {
		t.Fatal(err)
	}
	queuetest.Eventually(t, 15*time.Second, "the backend has lost its connection", func() bool {
		return strings.Contains(svc.Get(t, "/ready").String(), `"queue":{"healthy":false`)
	})
	_, err = q.Enqueue(ctx, "order", queuetest.Receipt{Order: 3})
	assertOutcome(t, "enqueue 3 with no connection", err, false)
	if err := proxy.Pass(); err != nil {
		t.Fatal(err)
	}
	queuetest.Eventually(t, 30*time.Second, "enqueue succeeds once the broker is reachable again", func() bool {
		clk.Advance(16 * time.Second) // past the breaker's cool-down, should the reconnection take a few tries
		_, err := q.Enqueue(ctx, "order", queuetest.Receipt{Order: 4})
		return err == nil
	})
	queuetest.Eventually(t, 15*time.Second, "job 4 handled", func() bool { return count(4) })
	mu.Lock()
	defer mu.Unlock()
	for _, o := range []int{3, 5} {
		if handled[o] != 0 {
			t.Fatalf("job %d, refused as not enqueued, was handled", o)
		}
	}
}
