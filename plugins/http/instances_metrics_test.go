package http_test

import (
	"context"
	"errors"
	"net/http"
	"net/netip"
	"testing"

	"github.com/jfastframework/jfast/framework/resilience"
	jhttp "github.com/jfastframework/jfast/plugins/http"
)

// The instances' breakers are the upstream's in the breaker metrics: each
// transition is counted under the upstream, and its state is closed while
// an instance's breaker is closed, half-open when none is and one is
// half-open, open when every one is.
func TestInstanceBreakersInMetrics(t *testing.T) {
	t.Parallel()
	a, b := newSwitchable(503), newSwitchable(503)
	_, u := replicas(2, t, a.handle, b.handle)
	u.Name = "orders"
	u.BreakerFailures = 1
	u.Attempts = 1
	c, clk, reg := newClient(t, u)
	state := func() float64 {
		return metric(t, reg, "jfast_client_breaker_state", "plugin", "http", "dependency", "orders")
	}
	transitions := func(from, to string) float64 {
		return metric(t, reg, "jfast_client_breaker_transitions_total", "plugin", "http", "dependency", "orders", "from", from, "to", to)
	}
	call := func() {
		t.Helper()
		_, _ = c.Get(t.Context(), "/x")
	}

	call() // one instance answers 503: its breaker opens, the other's is closed
	if state() != 0 || transitions("closed", "open") != 1 {
		t.Fatalf("one instance ejected: state %v, closed→open %v", state(), transitions("closed", "open"))
	}
	call() // the other one now
	if state() != 1 || transitions("closed", "open") != 2 {
		t.Fatalf("every instance ejected: state %v, closed→open %v", state(), transitions("closed", "open"))
	}
	clk.Advance(resilience.DefaultBreakerCoolDown)
	for _, in := range c.Instances().List() {
		in.CurrentBreaker().Snapshot() // as /ready asks: the cool-down ended, half-open
	}
	if state() != 2 || transitions("open", "half_open") != 2 {
		t.Fatalf("every instance half-open: state %v, open→half_open %v", state(), transitions("open", "half_open"))
	}
	a.status.Store(200)
	b.status.Store(200)
	call() // a probe closes one
	if state() != 0 || transitions("half_open", "closed") != 1 {
		t.Fatalf("one instance closed again: state %v, half_open→closed %v", state(), transitions("half_open", "closed"))
	}
	// The upstream's own breaker (never fed with instances) counted nothing.
	if c.Breaker().Snapshot().State != resilience.StateClosed || c.Breaker().Snapshot().Opens != 0 {
		t.Fatalf("the upstream's breaker: %+v", c.Breaker().Snapshot())
	}
}

// An instance whose health check passes while its breaker is open gets a
// fresh breaker: the state no longer counts the old one.
func TestInstanceBreakerResetInMetrics(t *testing.T) {
	t.Parallel()
	failing := newSwitchable(503)
	_, u := replicas(1, t, func(w http.ResponseWriter, r *http.Request, n int) {
		if r.URL.Path == "/ready" {
			w.WriteHeader(200)
			return
		}
		failing.handle(w, r, n)
	})
	u.Name = "orders"
	u.HealthPath = "/ready"
	u.BreakerFailures = 1
	u.Attempts = 1
	c, clk, reg := newClient(t, u)
	if _, err := c.Get(t.Context(), "/x"); err != nil {
		t.Fatal(err)
	}
	if got := metric(t, reg, "jfast_client_breaker_state", "dependency", "orders"); got != 1 {
		t.Fatalf("its one instance ejected: state %v, want 1 (open)", got)
	}
	clk.BlockUntil(1)
	clk.Advance(jhttp.DefaultHealthEvery) // one round of checks: it answers, its breaker is forgotten
	clk.BlockUntil(1)
	if got := metric(t, reg, "jfast_client_breaker_state", "dependency", "orders"); got != 0 {
		t.Fatalf("after its health check passed: state %v, want 0 (closed)", got)
	}
	if c.Instances().List()[0].CurrentBreaker() != nil {
		t.Fatal("the breaker was not forgotten")
	}
}

// A discovered upstream with no instance yet refuses every call: its state
// is open.
func TestNoInstanceIsOpenInMetrics(t *testing.T) {
	t.Parallel()
	fail := func(context.Context, string) ([]netip.Addr, error) { return nil, errors.New("no such host") }
	_, _, reg := newClient(t, jhttp.Upstream{Name: "orders", BaseURL: "http://orders-instances:8000", Discover: true}, jhttp.WithLookup(fail))
	if got := metric(t, reg, "jfast_client_breaker_state", "dependency", "orders"); got != 1 {
		t.Fatalf("no instance: state %v, want 1 (open)", got)
	}
}
