package queue_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/jfastframework/jfast/framework/resilience"
	"github.com/jfastframework/jfast/plugins/queue"
	"github.com/jfastframework/jfast/plugins/queue/queuetest"
)

// uniqueLockSetup starts a rabbitmq App behind a fault proxy (enqueue_timeout
// 2 s) and makes one unique-key enqueue of order 7 fail the way a slow link
// makes it fail: with 600 ms per chunk the lock queue's declare takes about
// 1.2 s (0.8 s to spare on a busy machine) and the lock's publish reaches
// the broker, but its confirm would come back after the deadline (2.4 s at
// the soonest: a busy machine only delays it more). The lock then holds the ID of a job that was
// never published; the enqueue must say "not enqueued", within its deadline
// (enqueue_timeout + 0.5 s, the slack the outage tests allow), and the key
// must not stay taken. The proxy passes again when it returns.
func uniqueLockSetup(t *testing.T) (*queue.Plugin, *resilience.TestClock, chan int) {
	t.Helper()
	proxy, clk, name := proxied(t, "127.0.0.1:5672")
	handled := make(chan int, 10)
	var q *queue.Plugin
	svc := startRabbitApp(t, queuetest.Config{
		Queue: queuetest.QueueTOML(name, 1, `enqueue_timeout = "2s"`),
	}, func(p *queue.Plugin) {
		q = p
		_ = queue.Handle(p, "order", func(ctx context.Context, r queuetest.Receipt) error { handled <- r.Order; return nil })
	}, rabbitOpts{url: "amqp://guest:guest@" + proxy.Addr() + "/", clock: clk})
	waitRabbitConnected(t, svc)
	if err := proxy.Latency(600 * time.Millisecond); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	_, err := q.Enqueue(context.Background(), "order", queuetest.Receipt{Order: 7}, queue.UniqueKey("order-7"))
	took := time.Since(began)
	if err := proxy.Pass(); err != nil {
		t.Fatal(err)
	}
	if !errors.Is(err, queue.ErrNotEnqueued) || !strings.Contains(err.Error(), "did not confirm") {
		t.Fatalf("enqueue over the slow link = %v, want not enqueued: the lock's publish was not confirmed", err)
	}
	if took > 2500*time.Millisecond {
		t.Fatalf("enqueue over the slow link took %s, want within enqueue_timeout (2s): the lock is released in the background", took)
	}
	return q, clk, handled
}

// ErrNotEnqueued says enqueueing again is safe: once the broker answers again
// the same enqueue stores the job (not Duplicate of the one never published)
// and its handler runs. This process frees the failed enqueue's lock at once
// when the retry meets it, should the background release not have landed.
func TestRabbitMQUniqueKeyFreeAfterNotEnqueued(t *testing.T) {
	t.Parallel()
	q, clk, handled := uniqueLockSetup(t)
	var res queue.Result
	queuetest.Eventually(t, 30*time.Second, "the same enqueue succeeds once the broker answers", func() bool {
		clk.Advance(16 * time.Second) // past the breaker's cool-down: the hang opened it
		var err error
		res, err = q.Enqueue(context.Background(), "order", queuetest.Receipt{Order: 7}, queue.UniqueKey("order-7"))
		return err == nil
	})
	if res.Duplicate {
		t.Fatalf("enqueue again = Duplicate of %s, a job never published: the key stayed taken", res.ID)
	}
	select {
	case o := <-handled:
		if o != 7 {
			t.Fatalf("handled order %d, want 7", o)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("order 7 not handled")
	}
}

// With no enqueue again in this process (what another replica sees), the
// background release frees the lock by itself once the broker answers: the
// broker no longer has the lock queue.
func TestRabbitMQUniqueKeyReleasedInBackground(t *testing.T) {
	t.Parallel()
	q, _, _ := uniqueLockSetup(t)
	lock := ""
	for _, n := range q.Backend().(interface{ Topology() []string }).Topology() {
		if _, name, _ := strings.Cut(n, ":"); strings.Contains(name, ".unique.") {
			lock = name
		}
	}
	if lock == "" {
		t.Fatal("the failed enqueue declared no lock queue")
	}
	conn, err := amqp.Dial(rabbitURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	queuetest.Eventually(t, 30*time.Second, "the failed enqueue's lock queue deleted on the broker", func() bool {
		ch, err := conn.Channel()
		if err != nil {
			t.Fatal(err)
		}
		defer ch.Close()
		_, err = ch.QueueDeclarePassive(lock, true, false, false, false, nil)
		var ae *amqp.Error
		return errors.As(err, &ae) && ae.Code == amqp.NotFound
	})
}

// uniqueHeldSetup starts a rabbitmq App whose "order" jobs are held in their
// handler until the test sends on hold; handled gets each order once done.
// A handler whose job is refused (refuse true) fails it permanently instead.
func uniqueHeldSetup(t *testing.T, refuse *atomic.Bool) (q *queue.Plugin, name string, hold chan struct{}, handled chan int) {
	t.Helper()
	name = queuetest.QueueName(t)
	hold, handled = make(chan struct{}), make(chan int, 100)
	startRabbitApp(t, queuetest.Config{Queue: queuetest.QueueTOML(name, 1)}, func(p *queue.Plugin) {
		q = p
		_ = queue.Handle(p, "order", func(ctx context.Context, r queuetest.Receipt) error {
			if refuse != nil && refuse.Load() {
				return queue.Permanent(fmt.Errorf("order %d refused", r.Order))
			}
			select {
			case <-hold:
			case <-ctx.Done():
				return ctx.Err()
			}
			handled <- r.Order
			return nil
		})
	}, rabbitOpts{})
	return q, name, hold, handled
}

// release lets one held job finish and waits until order is handled.
func release(t *testing.T, hold chan struct{}, handled chan int, order int) {
	t.Helper()
	hold <- struct{}{}
	select {
	case o := <-handled:
		if o != order {
			t.Fatalf("handled order %d, want %d", o, order)
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("order %d not handled", order)
	}
}

// enqueueFree enqueues order with key until it is stored, not Duplicate: the
// key is freed in the background once the job holding it is done.
func enqueueFree(t *testing.T, q *queue.Plugin, order int, key string) queue.Result {
	t.Helper()
	var res queue.Result
	queuetest.Eventually(t, 20*time.Second, "the key "+key+" free again", func() bool {
		var err error
		res, err = q.Enqueue(context.Background(), "order", queuetest.Receipt{Order: order}, queue.UniqueKey(key))
		return err == nil && !res.Duplicate
	})
	return res
}

// Enqueues racing with one key store one job: every other answers Duplicate
// with its ID. Before the change two jobs were stored within the first four
// trials in 6 runs of 6 (a publish landing while another enqueue held the
// lock's message unacked to read it), and the key could stay held after both
// were done. Once the job is done the key is free again: a new enqueue with
// it is stored and runs. Twenty trials, one key each.
func TestRabbitMQUniqueKeyConcurrentEnqueues(t *testing.T) {
	t.Parallel()
	q, _, hold, handled := uniqueHeldSetup(t, nil)
	const racers = 20
	for trial := range 20 {
		key := fmt.Sprintf("race-%d", trial)
		results := make([]queue.Result, racers)
		errs := make([]error, racers)
		var wg sync.WaitGroup
		for i := range racers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				results[i], errs[i] = q.Enqueue(context.Background(), "order", queuetest.Receipt{Order: trial*100 + i}, queue.UniqueKey(key))
			}()
		}
		wg.Wait()
		stored := -1
		for i, res := range results {
			if errs[i] != nil {
				t.Fatalf("trial %d: enqueue %d = %v", trial, i, errs[i])
			}
			if !res.Duplicate {
				if stored >= 0 {
					t.Fatalf("trial %d: enqueues %d and %d both stored a job (%s, %s) for one key", trial, stored, i, results[stored].ID, res.ID)
				}
				stored = i
			}
		}
		if stored < 0 {
			t.Fatalf("trial %d: every enqueue answered Duplicate: %+v", trial, results)
		}
		for i, res := range results {
			if res.ID != results[stored].ID {
				t.Fatalf("trial %d: enqueue %d = %+v, want Duplicate of %s", trial, i, res, results[stored].ID)
			}
		}
		release(t, hold, handled, trial*100+stored)
		enqueueFree(t, q, trial*100+99, key)
		release(t, hold, handled, trial*100+99)
	}
}

// A dead job brought back with RetryDead holds its unique key again, as
// postgres and redis have it: a new enqueue with the key answers Duplicate
// of it (before the change it stored a second job, and both could run at
// once). While another job holds the key RetryDead refuses, naming that job,
// and the job stays dead.
func TestRabbitMQRetryDeadTakesUniqueKey(t *testing.T) {
	t.Parallel()
	var refuse atomic.Bool
	refuse.Store(true)
	q, name, hold, handled := uniqueHeldSetup(t, &refuse)
	ctx := context.Background()
	dead, err := q.Enqueue(ctx, "order", queuetest.Receipt{Order: 1}, queue.UniqueKey("k"))
	if err != nil {
		t.Fatal(err)
	}
	queuetest.Eventually(t, 20*time.Second, "order 1 dead", func() bool {
		jobs, err := q.DeadJobs(ctx, queue.DeadQuery{Queue: name})
		return err == nil && len(jobs) == 1
	})
	refuse.Store(false)
	other := enqueueFree(t, q, 2, "k")
	err = q.Backend().RetryDead(ctx, dead.ID)
	if want := "its unique key is held by job " + other.ID; err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("RetryDead while job %s holds the key = %v, want an error containing %q", other.ID, err, want)
	}
	if jobs, err := q.DeadJobs(ctx, queue.DeadQuery{Queue: name}); err != nil || len(jobs) != 1 || jobs[0].ID != dead.ID {
		t.Fatalf("dead letter after the refused retry = %+v, %v; want job %s still dead", jobs, err, dead.ID)
	}
	release(t, hold, handled, 2)
	queuetest.Eventually(t, 20*time.Second, "RetryDead once the key is free", func() bool {
		return q.RetryDead(ctx, dead.ID) == nil
	})
	dup, err := q.Enqueue(ctx, "order", queuetest.Receipt{Order: 3}, queue.UniqueKey("k"))
	if err != nil || !dup.Duplicate || dup.ID != dead.ID {
		t.Fatalf("enqueue while the retried job is pending = %+v, %v; want Duplicate of %s", dup, err, dead.ID)
	}
	release(t, hold, handled, 1)
	enqueueFree(t, q, 4, "k")
	release(t, hold, handled, 4)
}
