package grpc_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"
	"google.golang.org/grpc/connectivity"

	"github.com/jfastframework/jfast/examples/inventory/shoppb"
	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/framework/resilience"
	"github.com/jfastframework/jfast/jfasttest"
	jgrpc "github.com/jfastframework/jfast/plugins/grpc"
)

// stockService is a jfast service whose GET /stock/{sku} asks the inventory
// upstream over gRPC and lets every error escape, as a handler would.
func stockService(t *testing.T, toml string, clock *resilience.TestClock) *jfasttest.Service {
	t.Helper()
	opts := jfasttest.Options{
		TOML:    toml,
		Plugins: []framework.Plugin{jgrpc.New()},
		Routes: func(app *framework.App, r chi.Router) error {
			c, err := jgrpc.Client(app, "inventory")
			if err != nil {
				return err
			}
			stub := shoppb.NewInventoryClient(c)
			r.Method(http.MethodGet, "/stock/{sku}", framework.Handler(func(w http.ResponseWriter, r *http.Request) error {
				stock, err := stub.GetStock(r.Context(), &shoppb.GetStockRequest{Sku: chi.URLParam(r, "sku")})
				if err != nil {
					return err
				}
				return framework.JSON(w, http.StatusOK, map[string]any{"sku": stock.GetSku(), "available": stock.GetAvailable()})
			}))
			return nil
		},
	}
	if clock != nil {
		opts.Clock = clock
	}
	return jfasttest.Start(t, opts)
}

type problemBody struct {
	Status     int     `json:"status"`
	Detail     string  `json:"detail"`
	Upstream   string  `json:"upstream"`
	Dependency string  `json:"dependency"`
	RetryAfter float64 `json:"retry_after"`
}

func decodeProblem(t *testing.T, resp jfasttest.Response) problemBody {
	t.Helper()
	if ct := resp.Header.Get("Content-Type"); ct != "application/problem+json" {
		t.Fatalf("Content-Type = %q, want application/problem+json: %s", ct, resp.Body)
	}
	var p problemBody
	if err := json.Unmarshal(resp.Body, &p); err != nil {
		t.Fatalf("%v: %s", err, resp.Body)
	}
	return p
}

// TestFailedCallsRenderAsProblems: a handler that lets the client's error
// escape answers 503 naming the upstream for an outage (with Retry-After
// once the breaker is open), and the HTTP meaning of an answer such as
// NOT_FOUND.
func TestFailedCallsRenderAsProblems(t *testing.T) {
	t.Parallel()
	inv := &inventory{}
	clock := jfasttest.NewClock()
	svc := stockService(t, `
[plugins]
enabled = ["grpc"]
[plugin.grpc.upstreams.inventory]
target = "`+serveInventory(t, inv)+`"
insecure = true
attempts = 1
breaker_failures = 2
breaker_cool_down = "7s"
`, clock)
	if resp := svc.Get(t, "/stock/sku-42"); resp.Status != http.StatusOK || !strings.Contains(resp.String(), `"available":7`) {
		t.Fatalf("GET /stock/sku-42 = %d %s", resp.Status, resp.Body)
	}
	resp := svc.Get(t, "/stock/missing")
	if p := decodeProblem(t, resp); resp.Status != http.StatusNotFound || p.Upstream != "inventory" {
		t.Fatalf("NOT_FOUND = %d %s, want a 404 naming the upstream", resp.Status, resp.Body)
	}
	if strings.Contains(resp.String(), "no such sku") {
		t.Fatalf("the upstream's message reached the client: %s", resp.Body)
	}
	inv.failGetStock.Store(2)
	for i := range 2 {
		resp := svc.Get(t, "/stock/sku-42")
		if p := decodeProblem(t, resp); resp.Status != http.StatusServiceUnavailable || p.Upstream != "inventory" || p.Dependency != "inventory" {
			t.Fatalf("UNAVAILABLE = %d %s, want a 503 naming the upstream", resp.Status, resp.Body)
		}
		// The second failure opens the breaker: its 503 says the wait the
		// next one's does.
		if want := []string{"", "7"}[i]; resp.Header.Get("Retry-After") != want {
			t.Fatalf("failure %d: Retry-After %q, want %q", i+1, resp.Header.Get("Retry-After"), want)
		}
	}
	resp = svc.Get(t, "/stock/sku-42")
	p := decodeProblem(t, resp)
	if resp.Status != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") != "7" || p.Upstream != "inventory" || p.RetryAfter != 7 {
		t.Fatalf("open breaker = %d Retry-After %q %s, want a 503 with Retry-After 7", resp.Status, resp.Header.Get("Retry-After"), resp.Body)
	}
	if got := inv.getStocks.Load(); got != 4 {
		t.Fatalf("the inventory got %d calls, want 4 (none while the breaker is open)", got)
	}
}

// TestReadyListsEveryUpstream: /ready shows each upstream's breaker and its
// channel's state, degraded (never unavailable) while a breaker is open.
func TestReadyListsEveryUpstream(t *testing.T) {
	t.Parallel()
	inv := &inventory{}
	inv.failGetStock.Store(100)
	svc := stockService(t, `
[plugins]
enabled = ["grpc"]
[plugin.grpc.upstreams.inventory]
target = "`+serveInventory(t, inv)+`"
insecure = true
attempts = 1
breaker_failures = 1
[plugin.grpc.upstreams.audit]
target = "127.0.0.1:1"
insecure = true
attempts = 1
`, nil)
	var ready struct {
		Status string `json:"status"`
		Checks map[string]struct {
			Healthy bool           `json:"healthy"`
			Meta    map[string]any `json:"meta"`
		} `json:"checks"`
	}
	read := func() {
		resp := svc.Get(t, "/ready")
		if resp.Status != http.StatusOK {
			t.Fatalf("/ready = %d, want 200 (a gRPC upstream never makes the service unavailable): %s", resp.Status, resp.Body)
		}
		if err := json.Unmarshal(resp.Body, &ready); err != nil {
			t.Fatal(err)
		}
	}
	read()
	up := ready.Checks["grpc"].Meta["upstreams"].(map[string]any)
	inventoryMeta := up["inventory"].(map[string]any)
	if inventoryMeta["channel"] != "idle" || inventoryMeta["breaker"].(map[string]any)["state"] != "closed" {
		t.Fatalf("inventory before any call: %v", inventoryMeta)
	}
	if _, ok := up["audit"]; !ok || ready.Status != "ok" {
		t.Fatalf("/ready = %+v", ready)
	}
	first := svc.Get(t, "/stock/a")
	// The server answered the call, so the channel is connected; gRPC may
	// publish READY a moment after the call went through (WaitForState).
	c, err := jgrpc.Client(svc.App, "inventory")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if !c.WaitForState(ctx, connectivity.Ready) {
		t.Fatalf("the channel is %s after the server answered a call", c.State())
	}
	read()
	inventoryMeta = ready.Checks["grpc"].Meta["upstreams"].(map[string]any)["inventory"].(map[string]any)
	if ready.Status != "degraded" || ready.Checks["grpc"].Healthy || inventoryMeta["breaker"].(map[string]any)["state"] != "open" || inventoryMeta["channel"] != "ready" {
		t.Fatalf("after a failure with breaker_failures = 1 (server calls %d, response %s): %+v", inv.getStocks.Load(), first.Body, ready)
	}
}

// TestMetricsCountCallsAndAttempts: calls and attempts by upstream, method
// and code, and the call duration.
func TestMetricsCountCallsAndAttempts(t *testing.T) {
	t.Parallel()
	inv := &inventory{}
	inv.failGetStock.Store(1)
	svc := stockService(t, `
[plugins]
enabled = ["observability", "grpc"]
[plugin.grpc.upstreams.inventory]
target = "`+serveInventory(t, inv)+`"
insecure = true
idempotent_methods = ["/shop.Inventory/GetStock"]
backoff_base = "1ms"
`, nil)
	if resp := svc.Get(t, "/stock/a"); resp.Status != http.StatusOK {
		t.Fatalf("GET = %d %s", resp.Status, resp.Body)
	}
	metrics := svc.Get(t, "/metrics").String()
	for _, want := range []string{
		`jfast_grpc_client_calls_total{code="OK",method="/shop.Inventory/GetStock",upstream="inventory"} 1`,
		`jfast_grpc_client_attempts_total{code="OK",method="/shop.Inventory/GetStock",upstream="inventory"} 1`,
		`jfast_grpc_client_attempts_total{code="UNAVAILABLE",method="/shop.Inventory/GetStock",upstream="inventory"} 1`,
		`jfast_client_retries_total{dependency="inventory",plugin="grpc"} 1`,
		`jfast_grpc_client_call_duration_seconds_count{method="/shop.Inventory/GetStock",upstream="inventory"} 1`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

// TestUnknownUpstreamFailsTheBoot: asking for an upstream that is not
// configured fails the boot, naming the fix.
func TestUnknownUpstreamFailsTheBoot(t *testing.T) {
	t.Parallel()
	app, err := jfasttest.New(t, jfasttest.Options{
		TOML:    inventoryTable,
		Plugins: []framework.Plugin{jgrpc.New()},
		Routes: func(app *framework.App, r chi.Router) error {
			_, err := jgrpc.Client(app, "invetory")
			return err
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	err = app.Start(ctxFor(t))
	if err == nil || !strings.Contains(err.Error(), "no upstream 'invetory'") || !strings.Contains(err.Error(), "configured upstreams: inventory") {
		t.Fatalf("err = %v", err)
	}
}
