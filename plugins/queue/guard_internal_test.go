package queue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

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
	p.breaker = p.newBreaker(resilience.NewTestClock(time.Unix(0, 0)))
	m, err := newMetrics(nil)
	if err != nil {
		t.Fatal(err)
	}
	p.metrics = m
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
			_, err := p.Enqueue(context.Background(), "k", struct{}{})
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

func TestEnqueueBreakerOpensAfterFiveFailures(t *testing.T) {
	t.Parallel()
	b := &scriptedBackend{errs: []error{errors.New("1"), errors.New("2"), errors.New("3"), errors.New("4"), errors.New("5")}}
	p := guardPlugin(t, b)
	for range 5 {
		if _, err := p.Enqueue(context.Background(), "k", struct{}{}); err == nil {
			t.Fatal("scripted failure succeeded")
		}
	}
	_, err := p.Enqueue(context.Background(), "k", struct{}{})
	var de *problem.DependencyError
	if !errors.Is(err, resilience.ErrOpen) || !errors.As(err, &de) || de.RetryAfter != 15*time.Second || b.calls != 5 {
		t.Fatalf("6th enqueue = %v (%+v), %d backend calls; want the open breaker, retry after 15s, no 6th call", err, de, b.calls)
	}
	// A caller that gave up does not count against the broker.
	q := guardPlugin(t, &scriptedBackend{errs: []error{context.Canceled, context.Canceled, context.Canceled, context.Canceled, context.Canceled, context.Canceled}})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for range 6 {
		_, _ = q.Enqueue(ctx, "k", struct{}{})
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
		_, _ = p.Enqueue(context.Background(), "k", struct{}{})
	}
	_, err := p.Enqueue(context.Background(), "k", struct{}{})
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
		_, _ = p.Enqueue(context.Background(), "k", struct{}{})
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
