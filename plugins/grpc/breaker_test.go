package grpc_test

import (
	"errors"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/jfastframework/jfast/examples/inventory/shoppb"
	"github.com/jfastframework/jfast/framework/resilience"
	"github.com/jfastframework/jfast/jfasttest"
	jgrpc "github.com/jfastframework/jfast/plugins/grpc"
)

// TestBreakerOpensAndRecoversOnTheTestClock: an inventory that goes away
// opens the breaker after breaker_failures calls; the open breaker answers
// at once, sending nothing; once the cool-down has passed on the test clock
// and the inventory is back, the probe call succeeds on the same channel and
// the breaker closes.
func TestBreakerOpensAndRecoversOnTheTestClock(t *testing.T) {
	t.Parallel()
	clock := jfasttest.NewClock()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	inv := &inventory{}
	addr, stop := serveOn(t, ln, inv)
	u := jgrpc.Upstream{Target: addr, PolicyConfig: resilience.PolicyConfig{Attempts: 1}}
	u.BreakerFailures, u.BreakerCoolDown = 3, 10*time.Second
	c := newClient(t, u, jgrpc.WithClock(clock))
	stub := shoppb.NewInventoryClient(c)
	ctx := ctxFor(t)
	if _, err := stub.GetStock(ctx, &shoppb.GetStockRequest{Sku: "a"}); err != nil {
		t.Fatal(err)
	}

	stop()
	for i := range 3 {
		_, err := stub.GetStock(ctx, &shoppb.GetStockRequest{Sku: "a"})
		if status.Code(err) != codes.Unavailable {
			t.Fatalf("call %d with the inventory gone: err = %v, want UNAVAILABLE", i+1, err)
		}
		// The call whose failure opens the breaker knows the cool-down,
		// and says it as the calls the breaker then refuses do.
		var e *jgrpc.Error
		want := time.Duration(0)
		if i == 2 {
			want = 10 * time.Second
		}
		if !errors.As(err, &e) || e.RetryAfter != want || e.Problem().RetryAfter != want {
			t.Fatalf("call %d with the inventory gone: %#v, want RetryAfter %s", i+1, err, want)
		}
	}
	if s := c.Breaker().Snapshot(); s.State != resilience.StateOpen {
		t.Fatalf("breaker = %s after 3 failures, want open", s.State)
	}
	_, err = stub.GetStock(ctx, &shoppb.GetStockRequest{Sku: "a"})
	var e *jgrpc.Error
	if !errors.As(err, &e) || e.Kind != jgrpc.KindCircuitOpen || e.Attempts != 0 || e.RetryAfter != 10*time.Second {
		t.Fatalf("err = %#v, want the open breaker's, retry after 10s, no attempt", err)
	}
	if !errors.Is(err, resilience.ErrOpen) || status.Code(err) != codes.Unavailable {
		t.Fatalf("err = %v: want errors.Is ErrOpen and code UNAVAILABLE", err)
	}
	// The breaker's own error says the same: it is said once.
	if got, want := err.Error(), "calls to upstream 'upstream' are suspended for 10.0s"; got != want {
		t.Fatalf("err.Error() = %q, want %q", got, want)
	}

	ln, err = net.Listen("tcp", addr)
	if err != nil {
		t.Skipf("the inventory's port was taken meanwhile: %v", err)
	}
	serveOn(t, ln, inv)
	clock.Advance(10 * time.Second)
	if _, err := stub.GetStock(ctx, &shoppb.GetStockRequest{Sku: "a"}); err != nil {
		t.Fatalf("the probe after the cool-down: %v", err)
	}
	if s := c.Breaker().Snapshot(); s.State != resilience.StateClosed {
		t.Fatalf("breaker = %s after a successful probe, want closed", s.State)
	}
}

// TestBreakerEvidence: which final codes count against the upstream.
func TestBreakerEvidence(t *testing.T) {
	t.Parallel()
	inv := &inventory{}
	c := newClient(t, jgrpc.Upstream{Target: serveInventory(t, inv), PolicyConfig: resilience.PolicyConfig{Attempts: 1}})
	stub := shoppb.NewInventoryClient(c)
	ctx := ctxFor(t)
	// An answer proves the upstream is there, even NOT_FOUND.
	if _, err := stub.GetStock(ctx, &shoppb.GetStockRequest{Sku: "missing"}); status.Code(err) != codes.NotFound {
		t.Fatalf("err = %v, want NOT_FOUND", err)
	}
	inv.failGetStock.Store(1)
	_, _ = stub.GetStock(ctx, &shoppb.GetStockRequest{Sku: "a"})
	if s := c.Breaker().Snapshot(); s.Consecutive != 1 || s.WindowFailures != 1 || s.WindowCalls != 2 {
		t.Fatalf("after NOT_FOUND and UNAVAILABLE: %+v, want 2 calls, 1 failure", s)
	}
	// The caller's own deadline, sooner than timeout, is no evidence.
	inv.slowGetStock = nil
	slow := &inventory{slowGetStock: []time.Duration{time.Second, 0}}
	c2 := newClient(t, jgrpc.Upstream{Target: serveInventory(t, slow), PolicyConfig: resilience.PolicyConfig{Attempts: 1}})
	short, cancel := ctxWithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	_, err := shoppb.NewInventoryClient(c2).GetStock(short, &shoppb.GetStockRequest{Sku: "a"})
	if status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("err = %v, want DEADLINE_EXCEEDED", err)
	}
	if s := c2.Breaker().Snapshot(); s.WindowFailures != 0 || s.Consecutive != 0 {
		t.Fatalf("a call cut by its caller's deadline counted: %+v", s)
	}
}
