package grpc_test

import (
	"slices"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/jfastframework/jfast/examples/inventory/shoppb"
	"github.com/jfastframework/jfast/jfasttest"
	jgrpc "github.com/jfastframework/jfast/plugins/grpc"
)

// The instances' breakers are the upstream's in the breaker metrics, as in
// the http plugin: each transition counted under the upstream, the state
// closed while one instance's breaker is, open when every one is.
func TestInstanceBreakersInMetrics(t *testing.T) {
	t.Parallel()
	clock := jfasttest.NewClock()
	clock.SetAutoAdvance(true)
	srv := serveInstances(t, 2)
	reg := prometheus.NewRegistry()
	u := jgrpc.Upstream{Name: "inventory", Instances: addrsOf(srv)}
	u.Attempts, u.BreakerFailures = 1, 1
	c := newClient(t, u, jgrpc.WithClock(clock), jgrpc.WithMetrics(reg))
	series := func(name string, labels ...string) float64 {
		t.Helper()
		return jfasttest.Metric(t, reg, name, labels...)
	}
	state := func() float64 {
		return series("jfast_client_breaker_state", "plugin", "grpc", "dependency", "inventory")
	}
	opened := func() float64 {
		return series("jfast_client_breaker_transitions_total", "plugin", "grpc", "dependency", "inventory", "from", "closed", "to", "open")
	}
	if state() != 0 {
		t.Fatalf("before any call: state %v, want 0 (closed)", state())
	}
	srv[0].inv.failGetStock.Store(1 << 20)
	srv[1].inv.failGetStock.Store(1 << 20)
	call := func() {
		_ = c.Invoke(ctxFor(t), getStock, &shoppb.GetStockRequest{Sku: "a"}, &shoppb.Stock{})
	}
	// A retry after a hang on an instance finds another while one is not
	// ejected (resilience.Verdict.Elsewhere).
	if got := c.RetryFindsAnother(); !slices.Equal(got, []bool{true, true}) {
		t.Fatalf("before any call, another instance for each: %v", got)
	}
	call()
	if state() != 0 || opened() != 1 {
		t.Fatalf("one instance ejected: state %v, closed→open %v", state(), opened())
	}
	if got := c.RetryFindsAnother(); !slices.Contains(got, true) || !slices.Contains(got, false) {
		t.Fatalf("one instance ejected: %v, want another only for the ejected one", got)
	}
	call()
	if state() != 1 || opened() != 2 {
		t.Fatalf("every instance ejected: state %v, closed→open %v", state(), opened())
	}
	if got := c.RetryFindsAnother(); !slices.Equal(got, []bool{false, false}) {
		t.Fatalf("every instance ejected, another instance for each: %v", got)
	}
}
