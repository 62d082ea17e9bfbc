// Package queuetest is the conformance suite every queue backend passes: the same
// tests, run by each backend's own test package with a [Harness] that starts an
// App on that backend.
//
//	func TestConformance(t *testing.T) {
//		queuetest.Run(t, queuetest.Harness{Backend: "redis", Start: startRedisApp})
//	}
package queuetest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jfastframework/jfast/jfasttest"
	"github.com/jfastframework/jfast/plugins/queue"
	"github.com/jfastframework/jfast/requestid"
)

// Config is what a test asks of the App: extra [app] lines and the
// [plugin.queue] lines (backend excepted: the harness sets it).
type Config struct {
	App   string
	Queue string
}

// Harness starts Apps on one backend.
type Harness struct {
	// Backend is the [plugin.queue] backend under test.
	Backend string
	// Start starts an App with the queue plugin configured by cfg, calling
	// register on the plugin before the App starts. The harness stops the App
	// when the test ends (tests may stop it earlier).
	Start func(t *testing.T, cfg Config, register func(q *queue.Plugin)) *jfasttest.Service
	// Begin, for backends with EnqueueTx, begins a transaction on the database
	// the backend uses.
	Begin func(t *testing.T) pgx.Tx
}

// QueueName returns a queue name no other test uses.
func QueueName(t testing.TB) string {
	var b [5]byte
	_, _ = rand.Read(b[:])
	return "t" + hex.EncodeToString(b[:])
}

// QueueTOML is the [plugin.queue] lines for one queue with a concurrency.
func QueueTOML(name string, concurrency int, extra ...string) string {
	return fmt.Sprintf("poll_interval = \"100ms\"\n%s\n[plugin.queue.queues.%s]\nconcurrency = %d\n", strings.Join(extra, "\n"), name, concurrency)
}

// Eventually polls cond every 20 ms until it is true or d passed.
func Eventually(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %s: %s", d, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// WorkersRunning waits until svc's /ready says its queue workers are running
// (a backend may start them in the background), failing t after d.
func WorkersRunning(t testing.TB, svc *jfasttest.Service, d time.Duration) {
	t.Helper()
	Eventually(t, d, "workers running in /ready", func() bool {
		return strings.Contains(svc.Get(t, "/ready").String(), `"workers":"running"`)
	})
}

// Receipt is the typed payload of the suite's jobs.
type Receipt struct {
	Order int      `json:"order"`
	Email string   `json:"email"`
	Lines []string `json:"lines"`
}

func plugin(t *testing.T, svc *jfasttest.Service) *queue.Plugin {
	t.Helper()
	q, err := queue.From(svc.App)
	if err != nil {
		t.Fatal(err)
	}
	return q
}

// Run runs the conformance suite against h.
func Run(t *testing.T, h Harness) {
	t.Run("RoundTrip", func(t *testing.T) { t.Parallel(); roundTrip(t, h) })
	t.Run("RequestIDAndMetadata", func(t *testing.T) { t.Parallel(); requestID(t, h) })
	t.Run("DeadlineNotInherited", func(t *testing.T) { t.Parallel(); deadlineNotInherited(t, h) })
	t.Run("RetriesWithBackoff", func(t *testing.T) { t.Parallel(); retries(t, h) })
	t.Run("RetryAfter", func(t *testing.T) { t.Parallel(); retryAfter(t, h) })
	t.Run("PermanentError", func(t *testing.T) { t.Parallel(); permanent(t, h) })
	t.Run("DeadLetter", func(t *testing.T) { t.Parallel(); deadLetter(t, h) })
	t.Run("JobTimeout", func(t *testing.T) { t.Parallel(); jobTimeout(t, h) })
	t.Run("UniqueKey", func(t *testing.T) { t.Parallel(); uniqueKey(t, h) })
	t.Run("Delay", func(t *testing.T) { t.Parallel(); delay(t, h) })
	t.Run("GracefulShutdown", func(t *testing.T) { t.Parallel(); graceful(t, h) })
	t.Run("InterruptedJobRedelivered", func(t *testing.T) { t.Parallel(); interrupted(t, h) })
	t.Run("EnqueueTx", func(t *testing.T) { t.Parallel(); enqueueTx(t, h) })
	t.Run("Ready", func(t *testing.T) { t.Parallel(); ready(t, h) })
	t.Run("ReadyBeforeAnyJob", func(t *testing.T) { t.Parallel(); readyBeforeAnyJob(t, h) })
	t.Run("UnknownKindDeadLetter", func(t *testing.T) { t.Parallel(); unknownKind(t, h) })
	t.Run("UndeclaredKindRefused", func(t *testing.T) { t.Parallel(); undeclaredKind(t, h) })
}

func roundTrip(t *testing.T, h Harness) {
	name := QueueName(t)
	got := make(chan Receipt, 10)
	infos := make(chan queue.Info, 10)
	svc := h.Start(t, Config{Queue: QueueTOML(name, 4)}, func(q *queue.Plugin) {
		must(t, queue.Handle(q, "send_receipt", func(ctx context.Context, r Receipt) error {
			info, _ := queue.JobFromContext(ctx)
			infos <- info
			got <- r
			return nil
		}))
	})
	q := plugin(t, svc)
	want := Receipt{Order: 42, Email: "a@example.com", Lines: []string{"tea", "cake"}}
	res, err := q.Enqueue(context.Background(), "send_receipt", want)
	must(t, err)
	if res.ID == "" || res.Queue != name || res.Duplicate {
		t.Fatalf("result = %+v", res)
	}
	select {
	case r := <-got:
		if r.Order != want.Order || r.Email != want.Email || strings.Join(r.Lines, ",") != "tea,cake" {
			t.Fatalf("payload = %+v, want %+v", r, want)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("job not handled within 10s")
	}
	info := <-infos
	if info.ID != res.ID || info.Kind != "send_receipt" || info.Queue != name || info.Attempt != 1 || info.MaxAttempts != 10 {
		t.Fatalf("info = %+v (result %+v)", info, res)
	}
	// A payload that does not decode into the handler's type is permanent.
	_, err = q.Enqueue(context.Background(), "send_receipt", map[string]any{"order": "not a number"})
	must(t, err)
	Eventually(t, 10*time.Second, "undecodable payload in the dead letter", func() bool {
		dead, err := q.DeadJobs(context.Background(), queue.DeadQuery{Queue: name})
		return err == nil && len(dead) == 1 && strings.Contains(dead[0].LastError, "decode") && dead[0].Attempts == 1
	})
}

func requestID(t *testing.T, h Harness) {
	name := QueueName(t)
	type seen struct{ rid, trace string }
	got := make(chan seen, 1)
	type traceKey struct{}
	svc := h.Start(t, Config{Queue: QueueTOML(name, 1)}, func(q *queue.Plugin) {
		q.AddMetadataHooks(
			func(ctx context.Context, md map[string]string) {
				if v, ok := ctx.Value(traceKey{}).(string); ok {
					md["traceparent"] = v
				}
			},
			func(ctx context.Context, md map[string]string) context.Context {
				return context.WithValue(ctx, traceKey{}, md["traceparent"])
			})
		must(t, queue.Handle(q, "rid", func(ctx context.Context, _ struct{}) error {
			tr, _ := ctx.Value(traceKey{}).(string)
			got <- seen{requestid.FromContext(ctx), tr}
			return nil
		}))
	})
	ctx := requestid.NewContext(context.Background(), "req-0123456789abcdef")
	ctx = context.WithValue(ctx, traceKey{}, "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	_, err := plugin(t, svc).Enqueue(ctx, "rid", struct{}{})
	must(t, err)
	select {
	case s := <-got:
		if s.rid != "req-0123456789abcdef" {
			t.Fatalf("request ID in the job = %q", s.rid)
		}
		if s.trace != "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01" {
			t.Fatalf("trace metadata in the job = %q", s.trace)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("job not handled")
	}
}

// A job does not inherit the deadline of the context that enqueued it (a
// request's, which its caller's Jfast-Timeout-Ms may have shortened): it runs
// later, under job_timeout (5 min by default), whatever time the request had
// left.
func deadlineNotInherited(t *testing.T, h Harness) {
	name := QueueName(t)
	got := make(chan time.Duration, 1)
	svc := h.Start(t, Config{Queue: QueueTOML(name, 1)}, func(q *queue.Plugin) {
		must(t, queue.Handle(q, "after_request", func(ctx context.Context, _ struct{}) error {
			d, ok := ctx.Deadline()
			if !ok {
				d = time.Now()
			}
			got <- time.Until(d)
			return nil
		}))
	})
	// Long enough for a first enqueue (migrations, a broker connection),
	// far shorter than job_timeout.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := plugin(t, svc).Enqueue(ctx, "after_request", struct{}{})
	must(t, err)
	select {
	case left := <-got:
		if left < time.Minute {
			t.Fatalf("the job's deadline was %s away; want job_timeout's, not the enqueuing context's 5s", left)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("job not handled")
	}
}

func retries(t *testing.T, h Harness) {
	name := QueueName(t)
	var mu sync.Mutex
	var attempts []int
	var at []time.Time
	done := make(chan struct{})
	svc := h.Start(t, Config{Queue: QueueTOML(name, 1, `retry_base = "50ms"`, `retry_max = "200ms"`)}, func(q *queue.Plugin) {
		must(t, queue.Handle(q, "flaky", func(ctx context.Context, _ struct{}) error {
			info, _ := queue.JobFromContext(ctx)
			mu.Lock()
			defer mu.Unlock()
			attempts = append(attempts, info.Attempt)
			at = append(at, time.Now())
			if info.Attempt < 3 {
				return errors.New("upstream said 503")
			}
			close(done)
			return nil
		}))
	})
	enqueueAndAwait(t, svc, "flaky", done, "job not done after 3 attempts within 20s")
	time.Sleep(300 * time.Millisecond) // nothing runs after success
	mu.Lock()
	defer mu.Unlock()
	if fmt.Sprint(attempts) != "[1 2 3]" {
		t.Fatalf("attempts = %v, want [1 2 3]", attempts)
	}
	dead, err := plugin(t, svc).DeadJobs(context.Background(), queue.DeadQuery{Queue: name})
	must(t, err)
	if len(dead) != 0 {
		t.Fatalf("dead letter = %+v, want empty", dead)
	}
}

// awaitDead waits up to within for the dead letter of queue name to hold n
// jobs, and returns them; past it the test fails with what.
func awaitDead(t *testing.T, q *queue.Plugin, name string, n int, within time.Duration, what string) []queue.DeadJob {
	t.Helper()
	var dead []queue.DeadJob
	Eventually(t, within, what, func() bool {
		var err error
		dead, err = q.DeadJobs(context.Background(), queue.DeadQuery{Queue: name})
		return err == nil && len(dead) == n
	})
	return dead
}

// enqueueAndAwait enqueues a job of kind and waits up to 20s for its handler
// to close done; past it the test fails with what.
func enqueueAndAwait(t *testing.T, svc *jfasttest.Service, kind string, done <-chan struct{}, what string) {
	t.Helper()
	_, err := plugin(t, svc).Enqueue(context.Background(), kind, struct{}{})
	must(t, err)
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal(what)
	}
}

func retryAfter(t *testing.T, h Harness) {
	name := QueueName(t)
	var mu sync.Mutex
	var at []time.Time
	done := make(chan struct{})
	svc := h.Start(t, Config{Queue: QueueTOML(name, 1, `retry_base = "10ms"`, `retry_max = "10ms"`)}, func(q *queue.Plugin) {
		must(t, queue.Handle(q, "later", func(ctx context.Context, _ struct{}) error {
			mu.Lock()
			defer mu.Unlock()
			at = append(at, time.Now())
			if len(at) == 1 {
				return queue.RetryAfter(1500*time.Millisecond, errors.New("rate limited"))
			}
			close(done)
			return nil
		}))
	})
	enqueueAndAwait(t, svc, "later", done, "retried job not done within 20s")
	mu.Lock()
	defer mu.Unlock()
	if gap := at[1].Sub(at[0]); gap < 1500*time.Millisecond {
		t.Fatalf("second attempt %s after the first, want at least the 1.5s asked for", gap)
	}
}

func permanent(t *testing.T, h Harness) {
	name := QueueName(t)
	var calls atomic.Int32
	svc := h.Start(t, Config{Queue: QueueTOML(name, 1, `retry_base = "10ms"`)}, func(q *queue.Plugin) {
		must(t, queue.Handle(q, "bounce", func(ctx context.Context, r Receipt) error {
			calls.Add(1)
			return queue.Permanent(fmt.Errorf("550 mailbox %s does not exist", r.Email))
		}))
	})
	q := plugin(t, svc)
	res, err := q.Enqueue(context.Background(), "bounce", Receipt{Order: 7, Email: "nobody@example.com"})
	must(t, err)
	dead := awaitDead(t, q, name, 1, 10*time.Second, "permanent failure in the dead letter")
	time.Sleep(300 * time.Millisecond)
	if n := calls.Load(); n != 1 {
		t.Fatalf("handler called %d times, want 1 (no retry)", n)
	}
	d := dead[0]
	if d.ID != res.ID || d.Kind != "bounce" || d.Attempts != 1 || !strings.Contains(d.LastError, "550 mailbox nobody@example.com") || payloadOrder(t, d.Payload) != 7 {
		t.Fatalf("dead job = %+v", d)
	}
	if strings.Contains(d.LastError, "skip retry") {
		t.Fatalf("dead job's last error %q carries the backend's own words", d.LastError)
	}
}

func deadLetter(t *testing.T, h Harness) {
	name := QueueName(t)
	var heal atomic.Bool
	var calls, healed atomic.Int32
	svc := h.Start(t, Config{Queue: QueueTOML(name, 2, `retry_base = "10ms"`, `retry_max = "20ms"`, `attempts = 3`)}, func(q *queue.Plugin) {
		must(t, queue.Handle(q, "doomed", func(ctx context.Context, r Receipt) error {
			calls.Add(1)
			if heal.Load() {
				healed.Add(1)
				return nil
			}
			return fmt.Errorf("smtp 451 for order %d", r.Order)
		}))
	})
	q := plugin(t, svc)
	ctx := requestid.NewContext(context.Background(), "req-dead-letter-0001")
	a, err := q.Enqueue(ctx, "doomed", Receipt{Order: 1})
	must(t, err)
	b, err := q.Enqueue(ctx, "doomed", Receipt{Order: 2})
	must(t, err)
	dead := awaitDead(t, q, name, 2, 30*time.Second, "both jobs dead after 3 attempts")
	if n := calls.Load(); n != 6 {
		t.Fatalf("handler called %d times, want 6 (2 jobs × attempts 3)", n)
	}
	byID := map[string]queue.DeadJob{}
	for _, d := range dead {
		byID[d.ID] = d
		if d.Attempts != 3 || d.Kind != "doomed" || d.RequestID != "req-dead-letter-0001" || d.DiedAt.IsZero() {
			t.Fatalf("dead job = %+v", d)
		}
	}
	if !strings.Contains(byID[a.ID].LastError, "smtp 451 for order 1") || payloadOrder(t, byID[a.ID].Payload) != 1 {
		t.Fatalf("dead job a = %+v", byID[a.ID])
	}
	if !strings.Contains(byID[b.ID].LastError, "smtp 451 for order 2") {
		t.Fatalf("dead job b = %+v", byID[b.ID])
	}
	// Unknown IDs.
	for _, id := range []string{"999999999", "nope", name + "/nope"} {
		if err := q.RetryDead(context.Background(), id); !errors.Is(err, queue.ErrNotFound) {
			t.Fatalf("RetryDead(%q) = %v, want ErrNotFound", id, err)
		}
		if err := q.DeleteDead(context.Background(), id); !errors.Is(err, queue.ErrNotFound) {
			t.Fatalf("DeleteDead(%q) = %v, want ErrNotFound", id, err)
		}
	}
	// Delete one, retry the other once the cause is fixed.
	must(t, q.DeleteDead(context.Background(), b.ID))
	if err := q.DeleteDead(context.Background(), b.ID); !errors.Is(err, queue.ErrNotFound) {
		t.Fatalf("second DeleteDead = %v, want ErrNotFound", err)
	}
	heal.Store(true)
	must(t, q.RetryDead(context.Background(), a.ID))
	Eventually(t, 10*time.Second, "retried dead job handled", func() bool { return healed.Load() == 1 })
	awaitDead(t, q, name, 0, 5*time.Second, "dead letter empty")
	if err := q.RetryDead(context.Background(), a.ID); !errors.Is(err, queue.ErrNotFound) {
		t.Fatalf("RetryDead of a job no longer dead = %v, want ErrNotFound", err)
	}
}

func jobTimeout(t *testing.T, h Harness) {
	name := QueueName(t)
	var calls atomic.Int32
	errs := make(chan error, 4)
	svc := h.Start(t, Config{Queue: QueueTOML(name, 1, `job_timeout = "300ms"`, `rescue_after = "30s"`, `retry_base = "10ms"`, `retry_max = "10ms"`, `attempts = 2`)}, func(q *queue.Plugin) {
		must(t, queue.Handle(q, "slow", func(ctx context.Context, _ struct{}) error {
			calls.Add(1)
			start := time.Now()
			<-ctx.Done()
			if took := time.Since(start); took > 2*time.Second {
				errs <- fmt.Errorf("context ended after %s, want about 300ms", took)
			}
			errs <- ctx.Err()
			return ctx.Err()
		}))
	})
	q := plugin(t, svc)
	_, err := q.Enqueue(context.Background(), "slow", struct{}{})
	must(t, err)
	dead := awaitDead(t, q, name, 1, 20*time.Second, "timed-out job dead after 2 attempts")
	if n := calls.Load(); n != 2 {
		t.Fatalf("attempts = %d, want 2", n)
	}
	for range 2 {
		if e := <-errs; !errors.Is(e, context.DeadlineExceeded) {
			t.Fatalf("handler context error = %v, want deadline exceeded", e)
		}
	}
	if d := dead[0]; d.Attempts != 2 || !strings.Contains(d.LastError, "exceeded its timeout of 300ms") {
		t.Fatalf("dead job = %+v", d)
	}
	// A per-job timeout may shorten job_timeout, not lengthen it.
	if _, err := q.Enqueue(context.Background(), "slow", struct{}{}, queue.Timeout(time.Second)); err == nil {
		t.Fatal("Timeout above job_timeout accepted")
	}
}

func uniqueKey(t *testing.T, h Harness) {
	name := QueueName(t)
	var calls atomic.Int32
	svc := h.Start(t, Config{Queue: QueueTOML(name, 1)}, func(q *queue.Plugin) {
		must(t, queue.Handle(q, "welcome", func(ctx context.Context, _ Receipt) error { calls.Add(1); return nil }))
		must(t, queue.Handle(q, "welcome:vip", func(ctx context.Context, _ Receipt) error { return nil }))
	})
	q := plugin(t, svc)
	ctx := context.Background()
	later := queue.Delay(time.Hour)
	// The keys are this run's own: a key is per kind across queues on
	// postgres, and the jobs delayed by an hour outlive the run in a
	// database the next run (go test -count=2) shares.
	key := func(k string) queue.Option { return queue.UniqueKey(name + "-" + k) }
	a, err := q.Enqueue(ctx, "welcome", Receipt{Order: 1}, key("user-1"), later)
	must(t, err)
	b, err := q.Enqueue(ctx, "welcome", Receipt{Order: 2}, key("user-1"), later)
	must(t, err)
	if a.Duplicate || !b.Duplicate || a.ID != b.ID {
		t.Fatalf("first %+v, second %+v: want the second a duplicate of the first", a, b)
	}
	c, err := q.Enqueue(ctx, "welcome", Receipt{Order: 3}, key("user-2"), later)
	must(t, err)
	if c.Duplicate || c.ID == a.ID {
		t.Fatalf("another key = %+v, want a new job", c)
	}
	// A kind may hold a colon: the kind welcome:vip with a key and the kind
	// welcome with vip: before the same key are two jobs, not one.
	vip, err := q.Enqueue(ctx, "welcome:vip", Receipt{Order: 6}, key("user-4"), later)
	must(t, err)
	plain, err := q.Enqueue(ctx, "welcome", Receipt{Order: 7}, queue.UniqueKey("vip:"+name+"-user-4"), later)
	must(t, err)
	if vip.Duplicate || plain.Duplicate || vip.ID == plain.ID {
		t.Fatalf("kind welcome:vip = %+v, kind welcome with the key vip:… = %+v: want two new jobs", vip, plain)
	}
	// Without delay: runs once; after it finished the key is free again.
	d, err := q.Enqueue(ctx, "welcome", Receipt{Order: 4}, key("user-3"))
	must(t, err)
	Eventually(t, 10*time.Second, "unique job handled", func() bool { return calls.Load() == 1 })
	Eventually(t, 10*time.Second, "unique key free after the job completed", func() bool {
		e, err := q.Enqueue(ctx, "welcome", Receipt{Order: 5}, key("user-3"), later)
		return err == nil && !e.Duplicate && e.ID != "" && (e.ID != d.ID || h.Backend == "redis")
	})
}

// delayedWithin bounds when a job delayed by 1 s runs, loosely: it is the
// worst case of a backend whose delayed jobs wait for a leader's scheduler, as
// River's did (a leader gone without resigning, another test's client,
// stopped, holds leadership for its TTL, the elect interval, 5 s, plus 10 s of
// padding; the next election waits up to one elect interval, 5 s; the
// scheduler then runs every 5 s). The backends here are well within it: the
// postgres backend stores a delayed job available, fetched within about
// poll_interval (its own tight test, TestPostgresDelayedJobIsDueWithinPollInterval),
// asynq moves it within 1 s + 2.5 × poll_interval, and RabbitMQ delays in its
// delayed-message exchange.
const delayedWithin = time.Second + (5+10)*time.Second + 5*time.Second + 5*time.Second

func delay(t *testing.T, h Harness) {
	name := QueueName(t)
	got := make(chan time.Time, 1)
	svc := h.Start(t, Config{Queue: QueueTOML(name, 1)}, func(q *queue.Plugin) {
		must(t, queue.Handle(q, "later", func(ctx context.Context, _ struct{}) error { got <- time.Now(); return nil }))
	})
	start := time.Now()
	_, err := plugin(t, svc).Enqueue(context.Background(), "later", struct{}{}, queue.Delay(time.Second))
	must(t, err)
	select {
	case at := <-got:
		if at.Sub(start) < time.Second {
			t.Fatalf("delayed job ran after %s, want at least 1s", at.Sub(start))
		}
	case <-time.After(delayedWithin):
		t.Fatalf("delayed job not run within %s", delayedWithin)
	}
}

func graceful(t *testing.T, h Harness) {
	name := QueueName(t)
	var started, finished atomic.Int32
	svc := h.Start(t, Config{App: `plugin_stop_timeout = "10s"`, Queue: QueueTOML(name, 4)}, func(q *queue.Plugin) {
		must(t, queue.Handle(q, "work", func(ctx context.Context, _ struct{}) error {
			started.Add(1)
			select {
			case <-time.After(700 * time.Millisecond):
				finished.Add(1)
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		}))
	})
	q := plugin(t, svc)
	for range 4 {
		_, err := q.Enqueue(context.Background(), "work", struct{}{})
		must(t, err)
	}
	Eventually(t, 10*time.Second, "4 jobs running", func() bool { return started.Load() == 4 })
	must(t, svc.App.Stop(context.Background()))
	if f := finished.Load(); f != 4 {
		t.Fatalf("%d of 4 running jobs finished during a graceful stop with time to spare", f)
	}
}

func interrupted(t *testing.T, h Harness) {
	name := QueueName(t)
	var first atomic.Int32
	cfg := Config{App: `plugin_stop_timeout = "1s"`, Queue: QueueTOML(name, 1, `attempts = 1`)}
	svc := h.Start(t, cfg, func(q *queue.Plugin) {
		must(t, queue.Handle(q, "long", func(ctx context.Context, _ struct{}) error {
			first.Add(1)
			<-ctx.Done() // runs until shutdown cancels it
			return ctx.Err()
		}))
	})
	_, err := plugin(t, svc).Enqueue(context.Background(), "long", struct{}{})
	must(t, err)
	Eventually(t, 10*time.Second, "long job running", func() bool { return first.Load() == 1 })
	start := time.Now()
	must(t, svc.App.Stop(context.Background()))
	if took := time.Since(start); took > 8*time.Second {
		t.Fatalf("stop took %s with plugin_stop_timeout 1s", took)
	}
	// With attempts = 1 a counted attempt would have killed the job: an
	// interrupted attempt is not counted, and the next worker completes it.
	done := make(chan queue.Info, 1)
	svc2 := h.Start(t, Config{Queue: QueueTOML(name, 1, `attempts = 1`)}, func(q *queue.Plugin) {
		must(t, queue.Handle(q, "long", func(ctx context.Context, _ struct{}) error {
			info, _ := queue.JobFromContext(ctx)
			done <- info
			return nil
		}))
	})
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		dead, _ := plugin(t, svc2).DeadJobs(context.Background(), queue.DeadQuery{Queue: name})
		t.Fatalf("interrupted job not redelivered within 30s (dead letter: %+v)", dead)
	}
}

func enqueueTx(t *testing.T, h Harness) {
	name := QueueName(t)
	got := make(chan Receipt, 4)
	svc := h.Start(t, Config{Queue: QueueTOML(name, 1)}, func(q *queue.Plugin) {
		must(t, queue.Handle(q, "tx", func(ctx context.Context, r Receipt) error { got <- r; return nil }))
	})
	q := plugin(t, svc)
	if h.Begin == nil {
		if _, err := q.EnqueueTx(context.Background(), nil, "tx", Receipt{}); err == nil || !strings.Contains(err.Error(), "postgres") {
			t.Fatalf("EnqueueTx on %s = %v, want an error naming the postgres backend", h.Backend, err)
		}
		return
	}
	ctx := context.Background()
	tx := h.Begin(t)
	_, err := q.EnqueueTx(ctx, tx, "tx", Receipt{Order: 1})
	must(t, err)
	must(t, tx.Rollback(ctx))
	tx = h.Begin(t)
	_, err = q.EnqueueTx(ctx, tx, "tx", Receipt{Order: 2})
	must(t, err)
	select {
	case r := <-got:
		t.Fatalf("job %+v handled before its transaction committed", r)
	case <-time.After(500 * time.Millisecond):
	}
	must(t, tx.Commit(ctx))
	select {
	case r := <-got:
		if r.Order != 2 {
			t.Fatalf("handled order %d, want 2 (1 was rolled back)", r.Order)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("committed job not handled")
	}
	select {
	case r := <-got:
		t.Fatalf("rolled-back job %+v handled", r)
	case <-time.After(1500 * time.Millisecond):
	}
}

func ready(t *testing.T, h Harness) {
	name := QueueName(t)
	svc := h.Start(t, Config{Queue: QueueTOML(name, 1)}, func(q *queue.Plugin) {
		must(t, queue.Handle(q, "noop", func(ctx context.Context, _ struct{}) error { return nil }))
	})
	q := plugin(t, svc)
	for range 3 {
		_, err := q.Enqueue(context.Background(), "noop", struct{}{}, queue.Delay(time.Hour))
		must(t, err)
	}
	Eventually(t, 10*time.Second, "workers running in /ready", func() bool {
		r := svc.Get(t, "/ready")
		return r.Status == 200 && strings.Contains(r.String(), `"workers":"running"`)
	})
	r := svc.Get(t, "/ready")
	body := r.String()
	for _, want := range []string{`"queue":{"healthy":true`, `"depth":{"` + name + `":3}`, `"dead":0`, `"state":"closed"`, `"breaker":{"consecutive_failures":0,`, `"backend":"` + h.Backend + `"`} {
		if !strings.Contains(body, want) {
			t.Fatalf("/ready = %s\nwant it to contain %s", body, want)
		}
	}
}

// readyBeforeAnyJob: a queue no job was ever enqueued to (a new service's,
// on a fresh broker) is healthy with depth 0 in /ready, not a failure.
func readyBeforeAnyJob(t *testing.T, h Harness) {
	name := QueueName(t)
	svc := h.Start(t, Config{Queue: QueueTOML(name, 1)}, func(q *queue.Plugin) {
		must(t, queue.Handle(q, "noop", func(ctx context.Context, _ struct{}) error { return nil }))
	})
	WorkersRunning(t, svc, 10*time.Second)
	r := svc.Get(t, "/ready")
	body := r.String()
	for _, want := range []string{`"queue":{"healthy":true`, `"depth":{"` + name + `":0}`, `"dead":0`} {
		if r.Status != 200 || !strings.Contains(body, want) {
			t.Fatalf("/ready = %d %s\nwant it to contain %s", r.Status, body, want)
		}
	}
}

// unknownKind: a job of a kind the working process has no handler for (the
// kinds key lets it be enqueued, as a producer-only service would) fails each
// attempt and goes to the dead letter once its attempts are spent, like any failing
// job, while the process's own kinds keep running.
func unknownKind(t *testing.T, h Harness) {
	name := QueueName(t)
	var known atomic.Int32
	svc := h.Start(t, Config{Queue: QueueTOML(name, 2, `retry_base = "10ms"`, `retry_max = "20ms"`, `attempts = 3`, `kinds = ["orphan"]`)}, func(q *queue.Plugin) {
		must(t, queue.Handle(q, "known", func(ctx context.Context, _ struct{}) error { known.Add(1); return nil }))
	})
	q := plugin(t, svc)
	res, err := q.Enqueue(context.Background(), "orphan", Receipt{Order: 9})
	must(t, err)
	_, err = q.Enqueue(context.Background(), "known", struct{}{})
	must(t, err)
	dead := awaitDead(t, q, name, 1, 30*time.Second, "the orphan job dead after 3 attempts")
	d := dead[0]
	if d.ID != res.ID || d.Kind != "orphan" || d.Attempts != 3 || !strings.Contains(d.LastError, "orphan") || payloadOrder(t, d.Payload) != 9 {
		t.Fatalf("dead job = %+v, want the orphan job after 3 attempts naming its kind", d)
	}
	Eventually(t, 10*time.Second, "the known kind handled", func() bool { return known.Load() == 1 })
}

// undeclaredKind: an Enqueue of a kind neither handled here nor listed in
// kinds fails at the call, stores nothing, and names the fix.
func undeclaredKind(t *testing.T, h Harness) {
	name := QueueName(t)
	svc := h.Start(t, Config{Queue: QueueTOML(name, 1, `kinds = ["sent.elsewhere"]`)}, func(q *queue.Plugin) {
		must(t, queue.Handle(q, "here", func(ctx context.Context, _ struct{}) error { return nil }))
	})
	q := plugin(t, svc)
	_, err := q.Enqueue(context.Background(), "sent.elswhere", struct{}{}, queue.Delay(time.Hour))
	if err == nil || !errors.Is(err, queue.ErrNotEnqueued) {
		t.Fatalf("undeclared kind: %v, want an error matching ErrNotEnqueued", err)
	}
	for _, want := range []string{`"sent.elswhere" is not declared`, "here, sent.elsewhere", "queue.Handle", "[plugin.queue] kinds"} {
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("error %q does not say %q", err, want)
		}
	}
	// Both declared kinds are accepted: the handled one and the listed one.
	for _, kind := range []string{"here", "sent.elsewhere"} {
		_, err := q.Enqueue(context.Background(), kind, struct{}{}, queue.Delay(time.Hour))
		must(t, err)
	}
	Eventually(t, 10*time.Second, "two jobs waiting", func() bool {
		r := svc.Get(t, "/ready")
		return strings.Contains(r.String(), `"depth":{"`+name+`":2}`)
	})
}

// payloadOrder decodes a dead job's payload (backends may re-encode the JSON,
// as PostgreSQL's jsonb does, so it is compared decoded).
func payloadOrder(t testing.TB, raw json.RawMessage) int {
	t.Helper()
	var r Receipt
	if err := json.Unmarshal(raw, &r); err != nil {
		t.Fatalf("dead job payload %s: %v", raw, err)
	}
	return r.Order
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
