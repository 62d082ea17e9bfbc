package grpc_test

import (
	"net"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/resolver/manual"

	"github.com/jfastframework/jfast/examples/inventory/shoppb"
	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/jfasttest"
	jgrpc "github.com/jfastframework/jfast/plugins/grpc"
)

// replica is an inventory server with a health service, on loopback.
type replica struct {
	inv    *inventory
	health *health.Server
	addr   string
}

func serveReplica(t *testing.T) *replica {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &replica{inv: &inventory{}, health: health.NewServer(), addr: ln.Addr().String()}
	srv := grpc.NewServer()
	shoppb.RegisterInventoryServer(srv, r.inv)
	healthpb.RegisterHealthServer(srv, r.health)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(ln)
	}()
	t.Cleanup(func() {
		srv.Stop()
		<-done
	})
	return r
}

// twoReplicas returns two replicas and a client whose dns:/// target
// resolves to both, as a headless Service's name would (the test's resolver
// answers for the scheme "dns" on this channel only).
func twoReplicas(t *testing.T, u jgrpc.Upstream) (*replica, *replica, *jgrpc.ServiceClient) {
	t.Helper()
	a, b := serveReplica(t), serveReplica(t)
	r := manual.NewBuilderWithScheme("dns")
	r.InitialState(resolver.State{Addresses: []resolver.Address{{Addr: a.addr}, {Addr: b.addr}}})
	u.Target = "dns:///inventory-replicas:9000"
	u.IdempotentMethods = []string{getStock}
	return a, b, newClient(t, u, jgrpc.WithDialOptions(grpc.WithResolvers(r)))
}

// getUntil calls GetStock until done says so, each call answered; bounded
// by the test's context.
func getUntil(t *testing.T, c *jgrpc.ServiceClient, done func() bool) {
	t.Helper()
	ctx := ctxFor(t)
	for !done() {
		if err := c.Invoke(ctx, getStock, &shoppb.GetStockRequest{Sku: "a"}, &shoppb.Stock{}); err != nil {
			t.Fatal(err)
		}
	}
}

// round_robin (the default) and least_request spread calls over every
// address the target resolves to.
func TestBalancingSpreadsCalls(t *testing.T) {
	t.Parallel()
	for _, balancing := range []string{"", jgrpc.BalanceLeastRequest} {
		t.Run("balancing="+balancing, func(t *testing.T) {
			t.Parallel()
			a, b, c := twoReplicas(t, jgrpc.Upstream{Balancing: balancing})
			getUntil(t, c, func() bool { return a.inv.getStocks.Load() > 0 && b.inv.getStocks.Load() > 0 })
		})
	}
}

// pick_first sends every call to one address.
func TestPickFirstSticks(t *testing.T) {
	t.Parallel()
	a, b, c := twoReplicas(t, jgrpc.Upstream{Balancing: jgrpc.BalancePickFirst})
	getUntil(t, c, func() bool { return a.inv.getStocks.Load()+b.inv.getStocks.Load() == 50 })
	if a.inv.getStocks.Load() != 50 && b.inv.getStocks.Load() != 50 {
		t.Fatalf("calls %d and %d: pick_first spread them", a.inv.getStocks.Load(), b.inv.getStocks.Load())
	}
}

// health_check: an address whose health service says NOT_SERVING gets no
// call, and gets calls again once it says SERVING.
func TestHealthCheckEjects(t *testing.T) {
	t.Parallel()
	a, b := serveReplica(t), serveReplica(t)
	b.health.SetServingStatus("", healthpb.HealthCheckResponse_NOT_SERVING)
	r := manual.NewBuilderWithScheme("dns")
	r.InitialState(resolver.State{Addresses: []resolver.Address{{Addr: a.addr}, {Addr: b.addr}}})
	c := newClient(t, jgrpc.Upstream{Target: "dns:///inventory-replicas:9000", IdempotentMethods: []string{getStock}, HealthCheck: true}, jgrpc.WithDialOptions(grpc.WithResolvers(r)))
	getUntil(t, c, func() bool { return a.inv.getStocks.Load() == 50 })
	if n := b.inv.getStocks.Load(); n != 0 {
		t.Fatalf("the NOT_SERVING address got %d calls", n)
	}
	b.health.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	getUntil(t, c, func() bool { return b.inv.getStocks.Load() > 0 })
}

func TestBalancingConfigErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ toml, key string }{
		{`balancing = "random"`, "balancing"},
		{"balancing = \"pick_first\"\nhealth_check = true", "health_check"},
		{`health_service = "shop.Inventory"`, "health_service"},
	} {
		jfasttest.ConfigErrors(t, jfasttest.Options{TOML: inventoryTable + tc.toml + "\n", Plugins: []framework.Plugin{jgrpc.New()}}).
			Only(t, "plugin.grpc.upstreams.inventory."+tc.key)
	}
}
