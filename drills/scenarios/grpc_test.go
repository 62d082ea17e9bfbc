package scenarios_test

import (
	"context"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"
	"google.golang.org/grpc"

	"github.com/jfastframework/jfast/drills"
	"github.com/jfastframework/jfast/examples/inventory/shoppb"
	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/jfasttest"
	jgrpc "github.com/jfastframework/jfast/plugins/grpc"
)

// --- gRPC upstream -----------------------------------------------------------

// sevenInStock is a shop.Inventory that has 7 of everything.
type sevenInStock struct {
	shoppb.UnimplementedInventoryServer
}

func (sevenInStock) GetStock(_ context.Context, req *shoppb.GetStockRequest) (*shoppb.Stock, error) {
	return &shoppb.Stock{Sku: req.GetSku(), Available: 7}, nil
}

// grpcService starts an App whose /stock route calls GetStock on the gRPC
// upstream "inventory", a gRPC server on loopback behind a fault proxy.
func grpcService(t *testing.T) (*jfasttest.Service, *drills.Proxy) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	shoppb.RegisterInventoryServer(srv, sevenInStock{})
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = srv.Serve(ln)
	}()
	t.Cleanup(func() {
		srv.Stop()
		<-served
	})
	return proxied{
		plugins: []framework.Plugin{jgrpc.New()},
		toml: func(addr string) string {
			return `[plugin.grpc.upstreams.inventory]
target = "` + addr + `"
insecure = true
timeout = "500ms"
idempotent_methods = ["/shop.Inventory/GetStock"]
breaker_failures = 3
breaker_cool_down = "` + coolDown + `"
`
		},
		routes: func(app *framework.App, r chi.Router) error {
			c, err := jgrpc.Client(app, "inventory")
			if err != nil {
				return err
			}
			inventory := shoppb.NewInventoryClient(c)
			r.Method(http.MethodGet, "/stock", framework.Handler(func(w http.ResponseWriter, r *http.Request) error {
				st, err := inventory.GetStock(r.Context(), &shoppb.GetStockRequest{Sku: "sku-42"})
				if err != nil {
					return err
				}
				return framework.JSON(w, http.StatusOK, st.GetAvailable())
			}))
			return nil
		},
	}.start(t, ln.Addr().String())
}

var grpcDrill = proxiedDrill{
	dependency: "grpc", route: "/stock",
	nameKey: "upstream", nameValue: "inventory", check: "grpc",
	deadline: 500*time.Millisecond + margin, // timeout: every attempt and wait
}.drill

// TestDrillGRPCUpstreamBlackhole: the gRPC upstream's socket stays open and
// nothing answers; each call is cut at timeout (DEADLINE_EXCEEDED, a 503
// naming inventory) until the breaker opens and answers at once; once the
// proxy passes again the probe reconnects and the same App answers 200.
func TestDrillGRPCUpstreamBlackhole(t *testing.T) {
	svc, p := grpcService(t)
	run(t, grpcDrill(svc, "blackhole (proxy)", p.Blackhole, p.Pass))
}

// TestDrillGRPCUpstreamPaused: the gRPC upstream paused (the proxy holds
// everything either way, as a server stopped with SIGSTOP; the held bytes
// are delivered on the resume).
func TestDrillGRPCUpstreamPaused(t *testing.T) {
	svc, p := grpcService(t)
	run(t, grpcDrill(svc, "pause (proxy hold)", p.Hold, p.Pass))
}
