package grpc_test

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/jfastframework/jfast/examples/inventory/shoppb"
	"github.com/jfastframework/jfast/framework/resilience"
	"github.com/jfastframework/jfast/jfasttest"
	jgrpc "github.com/jfastframework/jfast/plugins/grpc"
)

// A listed method whose first call has not answered after hedge_after gets
// a hedge: the hedge's reply is the call's, the first call is cancelled
// (the server sees its context end), and one hedge is counted. A method not
// listed in idempotent_methods is never hedged.
func TestHedgeListedMethod(t *testing.T) {
	t.Parallel()
	const after = 20 * time.Millisecond
	arrived, gone := make(chan int, 4), make(chan struct{})
	inv := &inventory{getStockHook: func(ctx context.Context, n int) error {
		arrived <- n
		if n == 0 {
			<-ctx.Done()
			close(gone)
			return ctx.Err()
		}
		return nil
	}}
	clk := jfasttest.NewClock()
	reg := prometheus.NewRegistry()
	c := newClient(t, jgrpc.Upstream{Name: "inventory", Target: serveInventory(t, inv), IdempotentMethods: []string{getStock},
		PolicyConfig: resilience.PolicyConfig{HedgeAfter: after.String()}}, jgrpc.WithClock(clk), jgrpc.WithMetrics(reg))
	stub := shoppb.NewInventoryClient(c)
	type answer struct {
		s   *shoppb.Stock
		err error
	}
	done := make(chan answer, 1)
	go func() {
		s, err := stub.GetStock(ctxFor(t), &shoppb.GetStockRequest{Sku: "sku-1"})
		done <- answer{s, err}
	}()
	<-arrived
	clk.BlockUntil(1)
	clk.Advance(after)
	<-arrived
	a := <-done
	if a.err != nil || a.s.GetAvailable() != 7 || a.s.GetSku() != "sku-1" {
		t.Fatalf("%v %v", a.s, a.err)
	}
	<-gone
	if n := inv.getStocks.Load(); n != 2 {
		t.Fatalf("%d calls reached the server, want the first and its hedge", n)
	}
	if got := metricValue(t, reg, "jfast_client_hedges_total"); got != 1 {
		t.Fatalf("hedges counted %v, want 1", got)
	}
}

// metricValue sums the series of the counter name.
func metricValue(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	sum := 0.0
	for _, mf := range mfs {
		if mf.GetName() == name {
			for _, m := range mf.GetMetric() {
				sum += m.GetCounter().GetValue()
			}
		}
	}
	return sum
}
