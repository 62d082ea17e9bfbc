package grpc_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

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

// An upstream that answers RESOURCE_EXHAUSTED to everything, with throttle
// on: most calls are dropped locally as KindThrottled (UNAVAILABLE, a 503
// problem naming the upstream), counted as code="throttled", and the server
// receives exactly the rest.
func TestThrottleRefusesLocally(t *testing.T) {
	t.Parallel()
	const calls = 100
	inv := &inventory{getStockHook: func(context.Context, int) error {
		return status.Error(codes.ResourceExhausted, "shedding")
	}}
	reg := prometheus.NewRegistry()
	c := newClient(t, jgrpc.Upstream{Name: "inventory", Target: serveInventory(t, inv), PolicyConfig: resilience.PolicyConfig{
		Attempts: 1, Throttle: true, BreakerConfig: resilience.BreakerConfig{BreakerFailures: 1000, BreakerMinimumCalls: 1000}}},
		jgrpc.WithMetrics(reg))
	stub := shoppb.NewInventoryClient(c)
	throttled := 0
	for range calls {
		_, err := stub.GetStock(ctxFor(t), &shoppb.GetStockRequest{Sku: "sku-1"})
		var e *jgrpc.Error
		if !errors.As(err, &e) {
			t.Fatalf("error %v, want *grpc.Error", err)
		}
		if e.Kind != jgrpc.KindThrottled {
			if e.Code != codes.ResourceExhausted {
				t.Fatalf("error %v, want the server's RESOURCE_EXHAUSTED or throttled", err)
			}
			continue
		}
		if !errors.Is(err, resilience.ErrThrottled) || status.Code(err) != codes.Unavailable {
			t.Fatalf("throttled error %v", err)
		}
		if p := e.Problem(); p.Status != 503 || p.Extensions["dependency"] != "inventory" {
			t.Fatalf("problem %+v", p)
		}
		throttled++
	}
	if got := int(inv.getStocks.Load()); got != calls-throttled {
		t.Errorf("the server received %d, want %d", got, calls-throttled)
	}
	// Nothing accepted: call n is sent with probability 1/n.
	if throttled < calls/2 {
		t.Errorf("%d of %d calls dropped locally, want most", throttled, calls)
	}
	if got := metricValue(t, reg, "jfast_grpc_client_calls_total"); got == 0 {
		t.Errorf("no calls counted")
	}
}

// With instances (a list of one), the call after the cool-down is the
// instance's half-open probe. A hedge due while the probe is in flight
// finds no instance and sends nothing: it must neither win nor cancel the
// probe (which would leave the breaker half-open for ever and fail the call
// with KindCircuitOpen), and is not counted as a hedge. The probe's answer
// is the call's and closes the instance's breaker.
func TestUnsentHedgeLeavesTheProbeAlone(t *testing.T) {
	t.Parallel()
	probe := newHeldProbe(t)
	inv := &inventory{getStockHook: func(ctx context.Context, n int) error {
		if n == 0 {
			return status.Error(codes.Unavailable, "down") // opens the instance's 1-failure breaker
		}
		return probe.hold(ctx, n)
	}}
	addr := serveInventory(t, inv)
	c, clk, reg := probedClient(t, addr)
	stub := shoppb.NewInventoryClient(c)
	clk.SetAutoAdvance(true) // the first call's backoff
	if _, err := stub.GetStock(ctxFor(t), &shoppb.GetStockRequest{Sku: "sku-1"}); err == nil {
		t.Fatal("the first call succeeded, want its UNAVAILABLE")
	}
	clk.SetAutoAdvance(false)
	clk.Advance(resilience.DefaultBreakerCoolDown)
	a := probe.besideUnsentHedge(t, clk, stub)
	if a.err != nil || a.s.GetAvailable() != 7 {
		t.Fatalf("the probe's call: %v %v, want its stock", a.s, a.err)
	}
	if s := c.Instances()[addr].Snapshot(); s.State != resilience.StateClosed {
		t.Fatalf("instance breaker %v after its probe's answer, want closed", s.State)
	}
	// Nothing the loop made and could not send is a hedge or a retry: the
	// first call's retry found the instance open, the second call's hedge
	// found its probe in flight.
	for name, want := range map[string]float64{"jfast_client_hedges_total": 0, "jfast_client_retries_total": 0, "jfast_client_attempts_total": 2} {
		if got := metricValue(t, reg, name); got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	if n := inv.getStocks.Load(); n != 2 {
		t.Fatalf("%d calls reached the server, want the first call's and the probe", n)
	}
}

// With two instances, one open and the other half-open with its probe in
// flight, a hedge of the probe's call finds no instance to take it (the
// other's cool-down is not over): as with one instance, it must neither win
// nor cancel the probe, whose answer is the call's and closes its
// instance's breaker, while the other stays open.
func TestUnsentHedgeLeavesTheProbeAloneBesideAnOpenInstance(t *testing.T) {
	t.Parallel()
	probe := newHeldProbe(t)
	inv := &inventory{getStockHook: func(ctx context.Context, n int) error {
		switch n {
		case 0, 2: // each opens its instance's 1-failure breaker
			return status.Error(codes.Unavailable, "down")
		case 1:
			return nil
		}
		return probe.hold(ctx, n)
	}}
	c, clk, reg := probedClient(t, serveInventory(t, inv), serveInventory(t, inv))
	stub := shoppb.NewInventoryClient(c)
	clk.SetAutoAdvance(true) // the calls' backoff
	// The first call's first attempt opens one instance (the probe's, later);
	// its retry is answered by the other.
	if _, err := stub.GetStock(ctxFor(t), &shoppb.GetStockRequest{Sku: "sku-1"}); err != nil {
		t.Fatalf("the first call: %v, want its retry's stock", err)
	}
	var probed, other string
	for addr, br := range c.Instances() {
		if br.Snapshot().State == resilience.StateOpen {
			probed = addr
		} else {
			other = addr
		}
	}
	if probed == "" || other == "" {
		t.Fatalf("instances %v: want one open by the first call", c.Instances())
	}
	// A second later the second call opens the other; its retry finds none.
	clk.Advance(time.Second)
	if _, err := stub.GetStock(ctxFor(t), &shoppb.GetStockRequest{Sku: "sku-1"}); err == nil {
		t.Fatal("the second call succeeded, want its UNAVAILABLE")
	}
	clk.SetAutoAdvance(false)
	clk.Advance(c.Instances()[probed].Snapshot().RetryAfter) // the first cool-down is over, not the second
	a := probe.besideUnsentHedge(t, clk, stub)
	if a.err != nil || a.s.GetAvailable() != 7 {
		t.Fatalf("the probe's call: %v %v, want its stock", a.s, a.err)
	}
	if s := c.Instances()[probed].Snapshot(); s.State != resilience.StateClosed {
		t.Fatalf("the probed instance's breaker %v after its probe's answer, want closed", s.State)
	}
	if s := c.Instances()[other].Snapshot(); s.State != resilience.StateOpen {
		t.Fatalf("the other instance's breaker %v, want still open", s.State)
	}
	// Sent: the first call's two attempts, the second call's first, the
	// probe; the first call's retry is the one retry sent.
	for name, want := range map[string]float64{"jfast_client_hedges_total": 0, "jfast_client_retries_total": 1, "jfast_client_attempts_total": 4} {
		if got := metricValue(t, reg, name); got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	if n := inv.getStocks.Load(); n != 4 {
		t.Fatalf("%d calls reached the servers, want 4", n)
	}
}

// stockAnswer is a GetStock call's answer.
type stockAnswer struct {
	s   *shoppb.Stock
	err error
}

// probeHedgeAfter is the hedge_after of the probe tests.
const probeHedgeAfter = 20 * time.Millisecond

// probedClient returns a client of addrs, each instance's breaker opened by
// one failure, hedging after probeHedgeAfter, on a test clock.
func probedClient(t *testing.T, addrs ...string) (*jgrpc.ServiceClient, *resilience.TestClock, *prometheus.Registry) {
	t.Helper()
	clk := jfasttest.NewClock()
	reg := prometheus.NewRegistry()
	u := jgrpc.Upstream{Name: "inventory", Instances: addrs, IdempotentMethods: []string{getStock},
		PolicyConfig: resilience.PolicyConfig{HedgeAfter: probeHedgeAfter.String(), Timeout: 10 * time.Second, // the probe waits for the test, not the machine
			RetryBudgetRatio: 1, RetryBudgetMinPerSecond: 1000}}
	u.BreakerFailures = 1
	return newClient(t, u, jgrpc.WithClock(clk), jgrpc.WithMetrics(reg)), clk, reg
}

// heldProbe is a server's GetStock that holds the call it is given (an
// instance's half-open probe) until the test frees it.
type heldProbe struct {
	arrived   chan int
	cancelled chan struct{}
	release   chan struct{}
	once      sync.Once
}

func newHeldProbe(t *testing.T) *heldProbe {
	h := &heldProbe{arrived: make(chan int, 4), cancelled: make(chan struct{}), release: make(chan struct{})}
	t.Cleanup(h.free) // before the server stops, should the test fail first
	return h
}

// hold sends GetStock call n's number on arrived and waits until it is
// freed (answering), or cancelled (closing cancelled).
func (h *heldProbe) hold(ctx context.Context, n int) error {
	h.arrived <- n
	select {
	case <-h.release:
		return nil
	case <-ctx.Done():
		close(h.cancelled)
		return ctx.Err()
	}
}

func (h *heldProbe) free() { h.once.Do(func() { close(h.release) }) }

// besideUnsentHedge makes a GetStock call that is its instance's half-open
// probe, held by the server. It moves the clock past hedge_after once the
// probe arrived and checks that the hedge, which finds no instance, neither
// ended the call nor cancelled the probe: the loop armed the hedge timer
// again. It then frees the probe and returns the call's answer.
func (h *heldProbe) besideUnsentHedge(t *testing.T, clk *resilience.TestClock, stub shoppb.InventoryClient) stockAnswer {
	t.Helper()
	done := make(chan stockAnswer, 1)
	go func() {
		s, err := stub.GetStock(ctxFor(t), &shoppb.GetStockRequest{Sku: "sku-1"})
		done <- stockAnswer{s, err}
	}()
	<-h.arrived // the probe
	ctx := ctxFor(t)
	if err := clk.BlockUntilContext(ctx, 1); err != nil {
		t.Fatal("no hedge timer started")
	}
	clk.Advance(probeHedgeAfter)
	// The hedge finds no instance; the timer armed again says the loop
	// dropped it and waits on for the probe.
	rearmed := make(chan error, 1)
	go func() { rearmed <- clk.BlockUntilContext(ctx, 1) }()
	select {
	case a := <-done:
		t.Fatalf("the call ended before the probe answered: %v %v", a.s, a.err)
	case <-h.cancelled:
		t.Fatal("the hedge that sent nothing cancelled the probe")
	case err := <-rearmed:
		if err != nil {
			t.Fatal(err)
		}
	}
	h.free()
	return <-done
}
