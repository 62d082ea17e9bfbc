package http_test

import (
	"context"
	"errors"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jfastframework/jfast/framework/resilience"
	"github.com/jfastframework/jfast/jfasttest"
	jhttp "github.com/jfastframework/jfast/plugins/http"
	"github.com/jfastframework/jfast/problem"
)

// switchable answers with the status it holds, and blocks while gate is set.
type switchable struct {
	status atomic.Int64
	gate   atomic.Pointer[chan struct{}]
	in     chan struct{} // a request arrived at the gate
}

func newSwitchable(code int) *switchable {
	s := &switchable{in: make(chan struct{}, 100)}
	s.status.Store(int64(code))
	return s
}

func (s *switchable) handle(w http.ResponseWriter, r *http.Request, _ int) {
	if g := s.gate.Load(); g != nil {
		s.in <- struct{}{}
		select {
		case <-*g:
		case <-r.Context().Done():
		}
	}
	w.WriteHeader(int(s.status.Load()))
}

// hold makes requests wait until the returned func is called.
func (s *switchable) hold() func() {
	g := make(chan struct{})
	s.gate.Store(&g)
	return func() { s.gate.Store(nil); close(g) }
}

func newBreakerClient(t *testing.T, s *switchable, u jhttp.Upstream) (*jhttp.ServiceClient, *resilience.TestClock, *upstream) {
	t.Helper()
	up := newUpstream(t, s.handle)
	u.BaseURL = up.URL
	if u.Attempts == 0 {
		u.Attempts = 1
	}
	c, clk, _ := newClient(t, noBudget(u))
	clk.SetAutoAdvance(false)
	return c, clk, up
}

func TestBreakerTransitions(t *testing.T) {
	t.Parallel()
	s := newSwitchable(503)
	c, clk, up := newBreakerClient(t, s, jhttp.Upstream{})
	ctx := context.Background()

	// Closed: five consecutive failures open it.
	for i := range 5 {
		if got := c.Breaker().Snapshot().State; got != resilience.StateClosed {
			t.Fatalf("before failure %d: state %s", i+1, got)
		}
		if _, err := c.Get(ctx, "/x"); err != nil {
			t.Fatal(err)
		}
	}
	if got := c.Breaker().Snapshot().State; got != resilience.StateOpen {
		t.Fatalf("after 5 failures: state %s, want open", got)
	}

	// Open: calls fail at once, nothing is sent, the error carries the wait.
	_, err := c.Get(ctx, "/x")
	var co *jhttp.CircuitOpen
	if !errors.As(err, &co) || co.RetryAfter != 15*time.Second || co.Upstream != "billing" {
		t.Fatalf("err = %v, want CircuitOpen with 15s", err)
	}
	var ue *jhttp.UpstreamError
	if !errors.As(err, &ue) || !errors.Is(err, resilience.ErrOpen) {
		t.Fatalf("errors.As(*UpstreamError) or errors.Is(ErrOpen) failed for %v", err)
	}
	if want := "calls to upstream 'billing' are suspended for 15.0s"; err.Error() != want {
		t.Fatalf("Error() = %q, want %q: the suspension said once", err.Error(), want)
	}
	if p, ok := problem.As(err); !ok || p.Status != 503 || p.RetryAfter != 15*time.Second || p.Extensions["upstream"] != "billing" {
		t.Fatalf("problem = %+v", p)
	}
	if got := up.hits.Load(); got != 5 {
		t.Fatalf("upstream got %d requests, want 5 (none while open)", got)
	}

	// Half-open after the cool-down: exactly one probe passes.
	clk.Advance(15 * time.Second)
	release := s.hold()
	probeDone := make(chan error, 1)
	go func() {
		resp, err := c.Get(ctx, "/x")
		if err == nil && resp.StatusCode != 200 {
			err = errors.New(resp.Status)
		}
		probeDone <- err
	}()
	<-s.in
	if _, err := c.Get(ctx, "/x"); !errors.As(err, &co) || co.RetryAfter != 0 {
		t.Fatalf("second call while the probe is in flight: %v, want CircuitOpen without a wait", err)
	}
	if got := c.Breaker().Snapshot().State; got != resilience.StateHalfOpen {
		t.Fatalf("state %s, want half_open", got)
	}
	// A failed probe reopens for a full cool-down.
	release()
	if err := <-probeDone; err == nil {
		t.Fatal("the probe got 503 and should report it")
	}
	snap := c.Breaker().Snapshot()
	if snap.State != resilience.StateOpen || snap.RetryAfter != 15*time.Second {
		t.Fatalf("after a failed probe: %s, %s; want open for 15s", snap.State, snap.RetryAfter)
	}

	// A successful probe closes it.
	clk.Advance(15 * time.Second)
	s.status.Store(200)
	if resp, err := c.Get(ctx, "/x"); err != nil || resp.StatusCode != 200 {
		t.Fatalf("probe: %v, %v", resp, err)
	}
	if got := c.Breaker().Snapshot().State; got != resilience.StateClosed {
		t.Fatalf("after a good probe: %s, want closed", got)
	}
	if got := up.hits.Load(); got != 7 {
		t.Errorf("upstream got %d requests, want 7 (5 + 2 probes)", got)
	}
}

// A probe whose caller gave up frees the probe slot: the next call probes.
func TestBreakerCancelledProbe(t *testing.T) {
	t.Parallel()
	s := newSwitchable(503)
	c, clk, up := newBreakerClient(t, s, jhttp.Upstream{PolicyConfig: resilience.PolicyConfig{BreakerConfig: resilience.BreakerConfig{BreakerFailures: 1}}})
	if _, err := c.Get(context.Background(), "/x"); err != nil {
		t.Fatal(err)
	}
	clk.Advance(15 * time.Second)
	release := s.hold()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { _, err := c.Get(ctx, "/x"); done <- err }()
	<-s.in
	cancel()
	err := <-done
	release()
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled probe: err = %v, want one wrapping context.Canceled", err)
	}
	if got := c.Breaker().Snapshot().State; got != resilience.StateHalfOpen {
		t.Fatalf("after a cancelled probe: %s, want still half_open", got)
	}
	s.status.Store(200)
	if resp, err := c.Get(context.Background(), "/x"); err != nil || resp.StatusCode != 200 {
		t.Fatalf("next call should be the probe: %v, %v", resp, err)
	}
	if got := c.Breaker().Snapshot().State; got != resilience.StateClosed {
		t.Fatalf("state %s, want closed", got)
	}
	if got := up.hits.Load(); got != 3 {
		t.Errorf("%d requests, want 3", got)
	}
}

func TestBreakerFailureRate(t *testing.T) {
	t.Parallel()
	s := newSwitchable(200)
	c, _, _ := newBreakerClient(t, s, jhttp.Upstream{PolicyConfig: resilience.PolicyConfig{BreakerConfig: resilience.BreakerConfig{BreakerFailures: 1000}}})
	for i := range 20 {
		if got := c.Breaker().Snapshot().State; got != resilience.StateClosed {
			t.Fatalf("before call %d: %s", i+1, got)
		}
		s.status.Store(int64([]int{200, 502}[i%2]))
		if _, err := c.Get(context.Background(), "/x"); err != nil {
			t.Fatal(err)
		}
	}
	if got := c.Breaker().Snapshot().State; got != resilience.StateOpen {
		t.Fatalf("10 failures in 20 calls: %s, want open", got)
	}
}

// What a failure is for the breaker: 502, 503, 504, transport errors and
// timeouts. Any other answer — a 500, a 429, a 4xx — is a success, which
// resets the run of failures; a bulkhead rejection is no evidence. A call
// with retries counts once, with its final outcome.
func TestBreakerClassification(t *testing.T) {
	t.Parallel()
	for _, code := range []int{500, 429, 404, 400} {
		s := newSwitchable(503)
		c, _, _ := newBreakerClient(t, s, jhttp.Upstream{PolicyConfig: resilience.PolicyConfig{BreakerConfig: resilience.BreakerConfig{BreakerFailures: 2}}})
		for range 5 { // 503, answer, 503, answer...: never two failures in a row
			s.status.Store(503)
			_, _ = c.Get(context.Background(), "/x")
			s.status.Store(int64(code))
			if _, err := c.Get(context.Background(), "/x"); err != nil {
				t.Fatal(err)
			}
		}
		if snap := c.Breaker().Snapshot(); snap.State != resilience.StateClosed || snap.Consecutive != 0 {
			t.Errorf("503 and %d alternating × 5: %+v, want closed with the run reset", code, snap)
		}
	}
	for _, code := range []int{502, 503, 504} {
		s := newSwitchable(code)
		c, _, _ := newBreakerClient(t, s, jhttp.Upstream{PolicyConfig: resilience.PolicyConfig{BreakerConfig: resilience.BreakerConfig{BreakerFailures: 2}}})
		for range 2 {
			_, _ = c.Get(context.Background(), "/x")
		}
		if got := c.Breaker().Snapshot().State; got != resilience.StateOpen {
			t.Errorf("%d × 2: %s, want open", code, got)
		}
	}

	// One breaker check per call: 4 calls × 3 attempts of 503 are 4 failures.
	s := newSwitchable(503)
	up := newUpstream(t, s.handle)
	c, _, _ := newClient(t, noBudget(jhttp.Upstream{BaseURL: up.URL}))
	for range 4 {
		_, _ = c.Get(context.Background(), "/x")
	}
	snap := c.Breaker().Snapshot()
	if snap.State != resilience.StateClosed || snap.Consecutive != 4 || up.hits.Load() != 12 {
		t.Fatalf("4 calls of 3 attempts: %s, %d consecutive, %d requests; want closed, 4, 12", snap.State, snap.Consecutive, up.hits.Load())
	}
	_, _ = c.Get(context.Background(), "/x")
	if got := c.Breaker().Snapshot().State; got != resilience.StateOpen {
		t.Fatalf("fifth failed call: %s, want open", got)
	}
}

func TestBulkhead(t *testing.T) {
	t.Parallel()
	s := newSwitchable(200)
	c, clk, up := newBreakerClient(t, s, jhttp.Upstream{PolicyConfig: resilience.PolicyConfig{MaxConcurrent: 2, BreakerConfig: resilience.BreakerConfig{BreakerFailures: 1}}})
	release := s.hold()
	done := make(chan error, 2)
	for range 2 {
		go func() { _, err := c.Get(context.Background(), "/x"); done <- err }()
	}
	<-s.in
	<-s.in
	rejected := make(chan error, 1)
	go func() { _, err := c.Get(context.Background(), "/x"); rejected <- err }()
	clk.BlockUntil(1) // the third call waits for a place
	clk.Advance(499 * time.Millisecond)
	select {
	case err := <-rejected:
		t.Fatalf("rejected before bulkhead_wait: %v", err)
	default:
	}
	clk.Advance(time.Millisecond)
	err := <-rejected
	var bf *jhttp.BulkheadFull
	if !errors.As(err, &bf) || !errors.Is(err, resilience.ErrBulkheadFull) || bf.Upstream != "billing" {
		t.Fatalf("err = %v, want BulkheadFull", err)
	}
	if p, ok := problem.As(err); !ok || p.Status != 503 {
		t.Fatalf("problem = %+v", p)
	}
	release()
	for range 2 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	if got := c.Breaker().Snapshot().State; got != resilience.StateClosed {
		t.Errorf("a bulkhead rejection opened the breaker (failures = 1): %s", got)
	}
	if got := up.hits.Load(); got != 2 {
		t.Errorf("%d requests, want 2", got)
	}
}

// Whose deadline ended the call decides what the breaker learns
// (docs/resilience.md, "Whose deadline was it?"). Against an upstream that
// accepts and never answers: calls whose caller's deadline (50 ms) is sooner
// than timeout (300 ms) are UpstreamTimeout 503s like any other, but
// the breaker counts none of them, however many; a call cut by timeout
// with the caller still waiting is a hang, which opens it at once (nothing
// answered meanwhile), and the next call is refused without waiting.
func TestBreakerCallerDeadlineIsNoEvidence(t *testing.T) {
	t.Parallel()
	c, _, _ := newClient(t, jhttp.Upstream{
		BaseURL:      silentUpstream(t),
		PolicyConfig: resilience.PolicyConfig{Timeout: 300 * time.Millisecond, Attempts: 1, BreakerConfig: resilience.BreakerConfig{BreakerFailures: 2}},
	})
	timeout := func(ctx context.Context) {
		t.Helper()
		_, err := c.Get(ctx, "/x")
		var to *jhttp.UpstreamTimeout
		if !errors.As(err, &to) || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("err = %v (%T), want UpstreamTimeout wrapping DeadlineExceeded", err, err)
		}
		if p, ok := problem.As(err); !ok || p.Status != 503 {
			t.Fatalf("problem = %+v, want 503", p)
		}
	}
	for range 5 {
		timeout(ctxTimeout(t, 50*time.Millisecond))
	}
	if snap := c.Breaker().Snapshot(); snap.State != resilience.StateClosed || snap.Consecutive != 0 || snap.WindowCalls != 0 {
		t.Fatalf("after 5 calls cut by the caller's deadline: %+v, want closed with nothing counted", snap)
	}
	timeout(ctxTimeout(t, time.Minute))
	if got := c.Breaker().Snapshot().State; got != resilience.StateOpen {
		t.Fatalf("after a call cut by timeout with nothing answered meanwhile: %s, want open", got)
	}
	var co *jhttp.CircuitOpen
	if _, err := c.Get(ctxTimeout(t, time.Minute), "/x"); !errors.As(err, &co) {
		t.Fatalf("the next call: %v (%T), want CircuitOpen at once", err, err)
	}
}

// The call whose failure opens the breaker carries the cool-down as its
// Retry-After, as the calls the open breaker then refuses do; the failures
// before it, with the breaker still closed, carry none.
func TestCallThatOpensTheBreakerCarriesRetryAfter(t *testing.T) {
	t.Parallel()
	c, clk, _ := newClient(t, noBudget(jhttp.Upstream{BaseURL: "http://" + jfasttest.RefusedAddr(t),
		PolicyConfig: resilience.PolicyConfig{Attempts: 1, BreakerConfig: resilience.BreakerConfig{BreakerFailures: 2}}}))
	clk.SetAutoAdvance(false)
	ctx := context.Background()
	var ue *jhttp.UpstreamUnavailable
	if _, err := c.Get(ctx, "/x"); !errors.As(err, &ue) || ue.RetryAfter != 0 {
		t.Fatalf("the first refused call: %v, want UpstreamUnavailable without a wait (the breaker is closed)", err)
	}
	_, err := c.Get(ctx, "/x")
	if !errors.As(err, &ue) || ue.RetryAfter != 15*time.Second {
		t.Fatalf("the call that opened the breaker: %v (Retry-After %v), want UpstreamUnavailable with 15s", err, ue.RetryAfter)
	}
	if p, ok := problem.As(err); !ok || p.Status != 503 || p.RetryAfter != 15*time.Second {
		t.Fatalf("its problem: %+v, want 503 with Retry-After 15s", p)
	}
	var co *jhttp.CircuitOpen
	if _, err := c.Get(ctx, "/x"); !errors.As(err, &co) || co.RetryAfter != 15*time.Second {
		t.Fatalf("the call after it: %v, want CircuitOpen with 15s", err)
	}
}
