package grpc_test

import (
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/jfastframework/jfast/examples/inventory/shoppb"
)

// Over the App's concurrency limit, a unary call is refused with
// RESOURCE_EXHAUSTED and a retry-after trailer before its handler runs;
// health answers all the same.
func TestOverLimitCallIsResourceExhausted(t *testing.T) {
	t.Parallel()
	inv := &servedInventory{release: make(chan struct{}), started: make(chan struct{})}
	svc, conn := grpcService(t, `
[app.overload]
initial_limit = 1
min_limit = 1
max_limit = 1
queue = 0
retry_after = "2s"
`, "", inv)
	stub := shoppb.NewInventoryClient(conn)
	slow := make(chan error, 1)
	go func() {
		_, err := stub.GetStock(ctxFor(t), &shoppb.GetStockRequest{Sku: "slow"})
		slow <- err
	}()
	<-inv.started

	var trailer metadata.MD
	_, err := stub.GetStock(ctxFor(t), &shoppb.GetStockRequest{Sku: "a"}, grpc.Trailer(&trailer))
	if st := status.Convert(err); st.Code() != codes.ResourceExhausted || !strings.Contains(st.Message(), "not started") {
		t.Fatalf("over the limit: %s %q, want RESOURCE_EXHAUSTED", st.Code(), st.Message())
	}
	if got := trailer.Get("retry-after"); len(got) != 1 || got[0] != "2" {
		t.Fatalf("retry-after trailer %v, want 2", got)
	}
	inv.mu.Lock()
	calls := len(inv.ids)
	inv.mu.Unlock()
	if calls != 1 {
		t.Fatalf("the handler ran %d times, want once (the shed call must not reach it)", calls)
	}
	if resp, err := healthpb.NewHealthClient(conn).Check(ctxFor(t), &healthpb.HealthCheckRequest{}); err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("health while the limit is full: %v %v", resp, err)
	}
	if s := svc.Overload().State().Shed["queue_full"]["normal"]; s != 1 {
		t.Fatalf("shed count %d, want 1", s)
	}
	close(inv.release)
	if err := <-slow; err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(svc.Logs(), "code=RESOURCE_EXHAUSTED") {
		t.Fatalf("the shed call is not in the access log:\n%s", svc.Logs())
	}
}
