package grpc_test

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/jfastframework/jfast/examples/inventory/shoppb"
	"github.com/jfastframework/jfast/framework/resilience"
	jgrpc "github.com/jfastframework/jfast/plugins/grpc"
	"github.com/jfastframework/jfast/problem"
)

// Two unary calls in one request to a real gRPC server whose handler blocks
// (it accepted the call and never answers) pay one timeout, not two: the
// first call's hang opens the breaker (nothing answered since it was sent,
// the silence rule), so the second is refused at once, a 503 naming the
// upstream, and never reaches the server.
func TestHungUpstreamTwoCallsOneBound(t *testing.T) {
	t.Parallel()
	inv := &inventory{getStockHook: func(ctx context.Context, _ int) error {
		<-ctx.Done() // blocks until the client gives up
		return status.FromContextError(ctx.Err()).Err()
	}}
	const bound = 600 * time.Millisecond
	c := newClient(t, jgrpc.Upstream{Name: "inventory", Target: serveInventory(t, inv),
		IdempotentMethods: []string{getStock}, PolicyConfig: resilience.PolicyConfig{Timeout: bound}})
	stub := shoppb.NewInventoryClient(c)
	request := ctxFor(t) // one inbound request, with time to spare
	start := time.Now()
	_, first := stub.GetStock(request, &shoppb.GetStockRequest{Sku: "a"})
	_, second := stub.GetStock(request, &shoppb.GetStockRequest{Sku: "b"})
	took := time.Since(start)
	if status.Code(first) != codes.DeadlineExceeded {
		t.Fatalf("the first call: %v, want DEADLINE_EXCEEDED after timeout", first)
	}
	var e *jgrpc.Error
	if !errors.As(second, &e) || e.Kind != jgrpc.KindCircuitOpen || e.Upstream != "inventory" || e.Attempts != 0 {
		t.Fatalf("the second call: %#v, want refused by the open breaker, nothing sent", second)
	}
	if p, ok := problem.As(second); !ok || p.Status != http.StatusServiceUnavailable || p.Extensions["upstream"] != "inventory" {
		t.Fatalf("the second call's problem = %+v, want a 503 naming inventory", p)
	}
	if got := inv.getStocks.Load(); got != 1 {
		t.Errorf("the server got %d calls, want 1", got)
	}
	if s := c.Breaker().Snapshot(); s.State != resilience.StateOpen || s.Opens != 1 {
		t.Errorf("breaker = %+v, want open once", s)
	}
	// One bound paid, the refusal at once: less than two bounds.
	if took < bound || took >= 2*bound {
		t.Errorf("the two calls took %s, want one timeout (%s) and less than two", took, bound)
	}
}
