package queue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	dto "github.com/prometheus/client_model/go"
	"github.com/redis/go-redis/v9"

	"github.com/jfastframework/jfast/framework/resilience"
	"github.com/jfastframework/jfast/problem"
)

// scriptedBackend answers Enqueue with the scripted errors in turn. It tests the
// plugin's enqueue guard (retry once, deadline, breaker) in isolation; every
// broker behaviour is tested against real servers in the external tests.
type scriptedBackend struct {
	Backend
	errs  []error
	calls int
}

func (b *scriptedBackend) Enqueue(ctx context.Context, m *Message) (Result, error) {
	b.calls++
	if len(b.errs) > 0 {
		err := b.errs[0]
		b.errs = b.errs[1:]
		if err != nil {
			return Result{}, err
		}
	}
	return Result{ID: "1", Queue: m.Queue}, nil
}

func guardPlugin(t *testing.T, b Backend, configure ...func(*Config)) *Plugin {
	t.Helper()
	p := New()
	p.cfg.Queues = map[string]QueueConfig{DefaultQueue: {Concurrency: 1}}
	for _, c := range configure {
		c(&p.cfg)
	}
	p.backend = b
	p.usePolicy(resilience.NewTestClock(time.Unix(0, 0)))
	m, err := newMetrics(nil)
	if err != nil {
		t.Fatal(err)
	}
	p.metrics = m
	p.sends = map[string]bool{"job": true}
	p.started = true
	return p
}

func TestEnqueueRetriedOnceOnTransportErrors(t *testing.T) {
	t.Parallel()
	reset := fmt.Errorf("write: %w", syscall.ECONNRESET)
	cases := []struct {
		name      string
		errs      []error
		calls     int
		succeeded bool
	}{
		{"reset then ok", []error{reset, nil}, 2, true},
		{"reset twice", []error{reset, reset}, 2, false},
		{"server reply not retried", []error{&pgconn.PgError{Code: "42P01", Message: "relation does not exist"}}, 1, false},
		{"timeout not retried", []error{context.DeadlineExceeded}, 1, false},
		{"other error not retried", []error{errors.New("boom")}, 1, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := &scriptedBackend{errs: tc.errs}
			p := guardPlugin(t, b)
			_, err := p.Enqueue(context.Background(), "job", struct{}{})
			if b.calls != tc.calls {
				t.Fatalf("backend called %d times, want %d", b.calls, tc.calls)
			}
			if (err == nil) != tc.succeeded {
				t.Fatalf("err = %v, want success %v", err, tc.succeeded)
			}
			var de *problem.DependencyError
			if err != nil && (!errors.As(err, &de) || de.Dependency != "queue") {
				t.Fatalf("err = %v, want a queue dependency error", err)
			}
		})
	}
}

// The retry of a publish spends the retry budget of the policy's loop
// (its defaults: retries below 20 % of the calls of the last 10 s, or
// fewer than 1 in the last second): on the test clock, which does not move,
// the first enqueue's retry is let through by the per-second floor, and
// the second's is refused, so its broker sees one attempt.
func TestEnqueueRetrySpendsTheRetryBudget(t *testing.T) {
	t.Parallel()
	reset := fmt.Errorf("write: %w", syscall.ECONNRESET)
	b := &scriptedBackend{errs: []error{reset, nil, reset, nil}}
	p := guardPlugin(t, b)
	if _, err := p.Enqueue(context.Background(), "job", struct{}{}); err != nil || b.calls != 2 {
		t.Fatalf("first enqueue = %v after %d backend calls, want success on the retry", err, b.calls)
	}
	if _, err := p.Enqueue(context.Background(), "job", struct{}{}); err == nil || b.calls != 3 {
		t.Fatalf("second enqueue = %v after %d backend calls in all, want the reset returned with no retry (3 calls)", err, b.calls)
	}
	if p.policy.Budget().Snapshot().Denied != 1 {
		t.Fatalf("budget %+v, want one refusal", p.policy.Budget().Snapshot())
	}
}

func TestEnqueueBreakerOpensAfterFiveFailures(t *testing.T) {
	t.Parallel()
	b := &scriptedBackend{errs: []error{errors.New("1"), errors.New("2"), errors.New("3"), errors.New("4"), errors.New("5")}}
	p := guardPlugin(t, b)
	for range 5 {
		if _, err := p.Enqueue(context.Background(), "job", struct{}{}); err == nil {
			t.Fatal("scripted failure succeeded")
		}
	}
	_, err := p.Enqueue(context.Background(), "job", struct{}{})
	var de *problem.DependencyError
	if !errors.Is(err, resilience.ErrOpen) || !errors.As(err, &de) || de.RetryAfter != 15*time.Second || b.calls != 5 {
		t.Fatalf("6th enqueue = %v (%+v), %d backend calls; want the open breaker, retry after 15s, no 6th call", err, de, b.calls)
	}
	// The five that reached the broker are timed; the one the breaker
	// refused is not.
	var timed dto.Metric
	if err := p.metrics.enqDur.Write(&timed); err != nil || timed.GetHistogram().GetSampleCount() != 5 {
		t.Fatalf("jfast_queue_enqueue_duration_seconds counts %d enqueues (%v), want 5", timed.GetHistogram().GetSampleCount(), err)
	}
	// A caller that gave up does not count against the broker.
	q := guardPlugin(t, &scriptedBackend{errs: []error{context.Canceled, context.Canceled, context.Canceled, context.Canceled, context.Canceled, context.Canceled}})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for range 6 {
		_, _ = q.Enqueue(ctx, "job", struct{}{})
	}
	if s := q.breaker.Snapshot(); s.State != resilience.StateClosed {
		t.Fatalf("breaker %s after cancelled calls, want closed", s.State)
	}
}

// The breaker_* keys reach the breaker: two consecutive failures open it
// for a 3 s cool-down; with the consecutive rule out of reach, half of a
// four-call window opens it.
func TestEnqueueBreakerKeys(t *testing.T) {
	t.Parallel()
	fail := errors.New("broker said no")
	b := &scriptedBackend{errs: []error{fail, fail}}
	p := guardPlugin(t, b, func(c *Config) { c.BreakerFailures = 2; c.BreakerCoolDown = 3 * time.Second })
	for range 2 {
		_, _ = p.Enqueue(context.Background(), "job", struct{}{})
	}
	_, err := p.Enqueue(context.Background(), "job", struct{}{})
	var de *problem.DependencyError
	if !errors.Is(err, resilience.ErrOpen) || !errors.As(err, &de) || de.RetryAfter != 3*time.Second || b.calls != 2 {
		t.Fatalf("3rd enqueue = %v (%+v), %d backend calls; want the open breaker, retry after 3s, no 3rd call", err, de, b.calls)
	}

	b = &scriptedBackend{errs: []error{nil, fail, nil, fail}}
	p = guardPlugin(t, b, func(c *Config) {
		c.BreakerFailures = 100
		c.BreakerMinimumCalls = 4
		c.BreakerFailureRate = 0.5
		c.BreakerWindow = time.Minute
	})
	for range 4 {
		_, _ = p.Enqueue(context.Background(), "job", struct{}{})
	}
	if s := p.breaker.Snapshot(); s.State != resilience.StateOpen {
		t.Fatalf("breaker after 2 failures in 4 calls with failure_rate 0.5, minimum_calls 4 = %s, want open", s.State)
	}
}

func TestEncodeEnvelope(t *testing.T) {
	t.Parallel()
	body, err := encodeEnvelope([]byte(`{"order":1}`), `req-"x"`, map[string]string{"traceparent": "00-a-b-01"}, 1500)
	if err != nil {
		t.Fatal(err)
	}
	var env envelope
	if err := json.Unmarshal(body, &env); err != nil {
		t.Fatalf("%s: %v", body, err)
	}
	if string(env.Payload) != `{"order":1}` || env.RequestID != `req-"x"` || env.Metadata["traceparent"] != "00-a-b-01" || env.TimeoutMS != 1500 {
		t.Fatalf("decoded %+v from %s", env, body)
	}
	body, _ = encodeEnvelope([]byte(`[]`), "", nil, 0)
	if string(body) != `{"payload":[]}` {
		t.Fatalf("minimal envelope = %s", body)
	}
}

// Every enqueue error says whether the job may exist, and only one thing: the
// backends' marks, the retry's combination, the plugin's own refusals.
func TestEnqueueOutcome(t *testing.T) {
	t.Parallel()
	reset := fmt.Errorf("read: %w", syscall.ECONNRESET)
	cases := []struct {
		name  string
		errs  []error
		kind  string
		maybe bool
	}{
		{"not sent", []error{notEnqueued(errors.New("dial: refused"))}, "job", false},
		{"sent, not confirmed", []error{maybeEnqueued(errors.New("no confirm"))}, "job", true},
		{"unmarked is maybe", []error{errors.New("something")}, "job", true},
		{"not sent twice", []error{notEnqueued(reset), notEnqueued(reset)}, "job", false},
		{"maybe, then not sent", []error{maybeEnqueued(reset), notEnqueued(reset)}, "job", true},
		{"not sent, then maybe", []error{notEnqueued(reset), maybeEnqueued(reset)}, "job", true},
		{"bad kind", nil, "bad kind!", false},
		{"undeclared kind", nil, "nobody.handles", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := guardPlugin(t, &scriptedBackend{errs: tc.errs})
			_, err := p.Enqueue(context.Background(), tc.kind, struct{}{})
			if err == nil {
				t.Fatal("scripted failure succeeded")
			}
			if errors.Is(err, ErrMaybeEnqueued) != tc.maybe || errors.Is(err, ErrNotEnqueued) == tc.maybe {
				t.Fatalf("err = %v: maybe %v, not %v; want maybe = %v and exactly one", err, errors.Is(err, ErrMaybeEnqueued), errors.Is(err, ErrNotEnqueued), tc.maybe)
			}
			if tc.kind != "job" {
				return // refused before the broker: not a dependency error
			}
			var de *problem.DependencyError
			if !errors.As(err, &de) || de.Dependency != Name {
				t.Fatalf("err = %v, want a queue dependency error", err)
			}
			pr := problem.From(err)
			says := strings.Contains(pr.Detail, "may have been enqueued")
			if pr.Status != 503 || says != tc.maybe {
				t.Fatalf("problem = %d %q, want 503 saying \"may have been enqueued\" = %v", pr.Status, pr.Detail, tc.maybe)
			}
			if tc.maybe && !strings.Contains(err.Error(), "may have been enqueued") {
				t.Fatalf("err text %q does not say the job may exist", err)
			}
		})
	}
}

// A breaker the backend goes through (the db or cache plugin's) refusing the
// call: not enqueued, its Retry-After, and it does not count against the
// queue's breaker; the queue's own open breaker is "not enqueued" too.
func TestEnqueueRefusedByBreaker(t *testing.T) {
	t.Parallel()
	clk := resilience.NewTestClock(time.Unix(0, 0))
	dep := resilience.NewBreaker(resilience.BreakerOpts{Name: "db", Failures: 1, CoolDown: 7 * time.Second, Clock: clk})
	tk, _ := dep.Allow()
	tk.Done(resilience.Failure)
	_, open := dep.Allow()
	if open == nil {
		t.Fatal("dependency breaker did not open")
	}
	refused := notEnqueued(&problem.DependencyError{Dependency: "db", Err: open})
	b := &scriptedBackend{errs: []error{refused, refused, refused, refused, refused, refused}}
	p := guardPlugin(t, b)
	for i := range 6 {
		_, err := p.Enqueue(context.Background(), "job", struct{}{})
		var de *problem.DependencyError
		if !errors.As(err, &de) || de.Dependency != Name || !errors.Is(err, resilience.ErrOpen) || !errors.Is(err, ErrNotEnqueued) || errors.Is(err, ErrMaybeEnqueued) {
			t.Fatalf("enqueue %d = %v, want the queue's dependency error, breaker open, not enqueued", i, err)
		}
		if de.RetryAfter != 7*time.Second {
			t.Fatalf("enqueue %d retry-after = %s, want the db breaker's 7s", i, de.RetryAfter)
		}
	}
	if b.calls != 6 {
		t.Fatalf("backend called %d times, want 6 (no retry of a refusal)", b.calls)
	}
	if s := p.breaker.Snapshot(); s.State != resilience.StateClosed || s.Consecutive != 0 {
		t.Fatalf("queue breaker after 6 refusals by the db breaker = %+v, want closed with nothing counted", s)
	}

	fail := maybeEnqueued(errors.New("no answer"))
	p = guardPlugin(t, &scriptedBackend{errs: []error{fail, fail, fail, fail, fail}})
	for range 5 {
		_, _ = p.Enqueue(context.Background(), "job", struct{}{})
	}
	_, err := p.Enqueue(context.Background(), "job", struct{}{})
	if !errors.Is(err, resilience.ErrOpen) || !errors.Is(err, ErrNotEnqueued) || errors.Is(err, ErrMaybeEnqueued) {
		t.Fatalf("enqueue on the queue's open breaker = %v, want not enqueued", err)
	}
}

// A caller that gave up keeps the outcome: its request may have been sent.
func TestEnqueueCancelledKeepsOutcome(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	p := guardPlugin(t, &scriptedBackend{errs: []error{maybeEnqueued(context.Canceled)}})
	_, err := p.Enqueue(ctx, "job", struct{}{})
	var de *problem.DependencyError
	if !errors.Is(err, ErrMaybeEnqueued) || errors.Is(err, ErrNotEnqueued) || errors.As(err, &de) {
		t.Fatalf("cancelled enqueue = %v, want maybe enqueued, not a dependency error", err)
	}
}

// The postgres backend's COMMIT: an answer or a COMMIT never sent is "not
// enqueued"; a lost answer is "maybe". (The errors are pgx's own values: a
// COMMIT whose reply is lost cannot be produced on demand against a server.)
func TestCommitOutcome(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		err   error
		maybe bool
	}{
		{"server error", &pgconn.PgError{Code: "40001", Message: "could not serialize access"}, false},
		{"rolled back", pgx.ErrTxCommitRollback, false},
		{"timeout after sending", &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}, true},
		{"connection broke", io.ErrUnexpectedEOF, true},
	}
	for _, tc := range cases {
		err := commitOutcome(fmt.Errorf("commit: %w", tc.err))
		if errors.Is(err, ErrMaybeEnqueued) != tc.maybe || errors.Is(err, ErrNotEnqueued) == tc.maybe {
			t.Errorf("%s: %v, want maybe = %v", tc.name, err, tc.maybe)
		}
	}
}

// Redis: what shows the command was not run, and what does not.
func TestRedisNotSent(t *testing.T) {
	t.Parallel()
	clk := resilience.NewTestClock(time.Unix(0, 0))
	br := resilience.NewBreaker(resilience.BreakerOpts{Name: "redis", Failures: 1, Clock: clk})
	tk, _ := br.Allow()
	tk.Done(resilience.Failure)
	_, open := br.Allow()
	cases := []struct {
		name    string
		err     error
		notSent bool
	}{
		{"breaker open", fmt.Errorf("redis unreachable: %w", open), true},
		{"dial refused", &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}, true},
		{"write failed", &net.OpError{Op: "write", Net: "tcp", Err: syscall.EPIPE}, true},
		{"pool timeout", redis.ErrPoolTimeout, true},
		{"client closed", redis.ErrClosed, true},
		{"read timed out", &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}, false},
		{"read reset", &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}, false},
		{"EOF", io.EOF, false},
	}
	for _, tc := range cases {
		if got := redisNotSent(tc.err); got != tc.notSent {
			t.Errorf("%s: redisNotSent = %v, want %v", tc.name, got, tc.notSent)
		}
	}
}
