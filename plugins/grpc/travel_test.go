package grpc_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/jfastframework/jfast/examples/inventory/shoppb"
	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/jfasttest"
	jgrpc "github.com/jfastframework/jfast/plugins/grpc"
	"github.com/jfastframework/jfast/plugins/telemetry"
)

// callerService is a jfast service whose GET /stock/{upstream}/{sku} calls
// GetStock on the named upstream, as a caller whose bearer token the auth
// plugin verified.
func callerService(t *testing.T, toml string, plugins ...framework.Plugin) *jfasttest.Service {
	t.Helper()
	return jfasttest.Start(t, jfasttest.Options{
		TOML:    toml,
		Plugins: append(plugins, jgrpc.New()),
		Routes: func(app *framework.App, r chi.Router) error {
			stubs := map[string]shoppb.InventoryClient{}
			for _, n := range []string{"inventory", "audit"} {
				if c, err := jgrpc.Client(app, n); err == nil {
					stubs[n] = shoppb.NewInventoryClient(c)
				}
			}
			r.Method(http.MethodGet, "/stock/{upstream}/{sku}", framework.Handler(func(w http.ResponseWriter, r *http.Request) error {
				ctx := framework.ContextWithBearerToken(r.Context(), "caller-token")
				stock, err := stubs[chi.URLParam(r, "upstream")].GetStock(ctx, &shoppb.GetStockRequest{Sku: chi.URLParam(r, "sku")})
				if err != nil {
					return err
				}
				return framework.JSON(w, http.StatusOK, map[string]any{"available": stock.GetAvailable()})
			}))
			return nil
		},
	})
}

// TestWhatTravelsWithACall: the request ID, the configured headers, the
// caller's bearer token only to an upstream with forward_authorization, and
// the deadline left as grpc-timeout.
func TestWhatTravelsWithACall(t *testing.T) {
	t.Parallel()
	inv := &inventory{}
	target := serveInventory(t, inv)
	svc := callerService(t, `
[app]
request_timeout = "3s"
[plugins]
enabled = ["grpc"]
[plugin.grpc.upstreams.inventory]
target = "`+target+`"
insecure = true
attempts = 1
timeout = "5s"
forward_authorization = true
headers = { "x-team" = "orders", "x-api-key" = "k-123" }
[plugin.grpc.upstreams.audit]
target = "`+target+`"
insecure = true
attempts = 1
`)
	for _, up := range []string{"inventory", "audit"} {
		if resp := svc.Get(t, "/stock/"+up+"/a", "X-Request-ID", "req-"+up); resp.Status != http.StatusOK {
			t.Fatalf("%s: %d %s", up, resp.Status, resp.Body)
		}
	}
	md := inv.metadata(0)
	for k, want := range map[string]string{"x-request-id": "req-inventory", "authorization": "Bearer caller-token", "x-team": "orders", "x-api-key": "k-123"} {
		if got := md.Get(k); len(got) != 1 || got[0] != want {
			t.Errorf("inventory got %s = %v, want %q", k, got, want)
		}
	}
	md = inv.metadata(1)
	if got := md.Get("authorization"); len(got) != 0 {
		t.Errorf("audit (forward_authorization = false) got authorization %v", got)
	}
	if got := md.Get("x-request-id"); len(got) != 1 || got[0] != "req-audit" {
		t.Errorf("audit got x-request-id %v", got)
	}
	// The request's own deadline (3s) is sooner than timeout (5s): the
	// upstream sees what is left of it.
	if d := inv.lastDeadlines()[0]; d <= 0 || d > 3*time.Second {
		t.Errorf("the inventory's deadline = %s, want at most the request's 3s", d)
	}
}

// TestOneTraceAcrossBothServices: with telemetry exporting in both, the
// caller's request, its gRPC call and the served RPC share one trace.
func TestOneTraceAcrossBothServices(t *testing.T) {
	t.Parallel()
	expB := tracetest.NewInMemoryExporter()
	telB := telemetry.New(telemetry.WithExporter(expB))
	pB := jgrpc.New()
	jfasttest.Start(t, jfasttest.Options{
		TOML:    "[plugins]\nenabled = [\"telemetry\", \"grpc\"]\n[plugin.grpc.server]\nlisten = \"127.0.0.1:0\"\n",
		Plugins: []framework.Plugin{telB, pB},
		Routes: func(app *framework.App, r chi.Router) error {
			srv, err := jgrpc.Server(app)
			if err != nil {
				return err
			}
			shoppb.RegisterInventoryServer(srv, &servedInventory{})
			return nil
		},
	})
	expA := tracetest.NewInMemoryExporter()
	telA := telemetry.New(telemetry.WithExporter(expA))
	svcA := callerService(t, `
[plugins]
enabled = ["telemetry", "grpc"]
[plugin.grpc.upstreams.inventory]
target = "`+pB.Addr()+`"
insecure = true
attempts = 1
`, telA)
	if resp := svcA.Get(t, "/stock/inventory/a"); resp.Status != http.StatusOK {
		t.Fatalf("%d %s", resp.Status, resp.Body)
	}
	flush := func(tel *telemetry.Plugin, exp *tracetest.InMemoryExporter) tracetest.SpanStubs {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := tel.ForceFlush(ctx); err != nil {
			t.Fatal(err)
		}
		return exp.GetSpans()
	}
	find := func(spans tracetest.SpanStubs) *tracetest.SpanStub {
		for i, s := range spans {
			if strings.Contains(s.Name, "shop.Inventory/GetStock") {
				return &spans[i]
			}
		}
		return nil
	}
	spansA := flush(telA, expA)
	client := find(spansA)
	// The served RPC's span ends after its answer has left, so the caller
	// may hold the answer before the span is recorded: look again, for a
	// bound only a lost span reaches.
	var spansB tracetest.SpanStubs
	var server *tracetest.SpanStub
	for wait := time.Now().Add(10 * time.Second); server == nil && time.Now().Before(wait); time.Sleep(10 * time.Millisecond) {
		spansB = flush(telB, expB)
		server = find(spansB)
	}
	if client == nil || server == nil {
		t.Fatalf("spans: caller %v, inventory %v", names(spansA), names(spansB))
	}
	if client.SpanContext.TraceID() != server.SpanContext.TraceID() || server.Parent.SpanID() != client.SpanContext.SpanID() {
		t.Fatalf("the served RPC's span is not the child of the call's: trace %s vs %s", server.SpanContext.TraceID(), client.SpanContext.TraceID())
	}
	if client.Parent.TraceID() != client.SpanContext.TraceID() || !client.Parent.IsValid() {
		t.Fatalf("the call's span has no parent in the caller's request trace")
	}
}

func names(spans tracetest.SpanStubs) []string {
	out := make([]string, len(spans))
	for i, s := range spans {
		out[i] = s.Name
	}
	return out
}
