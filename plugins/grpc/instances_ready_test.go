package grpc_test

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/go-chi/chi/v5"

	"github.com/jfastframework/jfast/examples/inventory/shoppb"
	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/framework/resilience"
	"github.com/jfastframework/jfast/jfasttest"
	jgrpc "github.com/jfastframework/jfast/plugins/grpc"
)

// /ready names the instances whose breaker is half-open (the next call to
// each probes it) and leaves the check passing, as they are not ejected; it
// never says "every breaker closed" while one is.
func TestHalfOpenInstancesInReady(t *testing.T) {
	t.Parallel()
	clock := jfasttest.NewClock()
	srv := serveInstances(t, 2)
	for _, s := range srv {
		s.inv.failGetStock.Store(1 << 20)
	}
	svc := jfasttest.Start(t, jfasttest.Options{
		TOML: `
[plugins]
enabled = ["grpc"]
[plugin.grpc.upstreams.inventory]
insecure = true
attempts = 1
breaker_failures = 1
instances = ["` + strings.Join(addrsOf(srv), `", "`) + `"]
`,
		Plugins: []framework.Plugin{jgrpc.New()},
		Clock:   clock,
		Routes: func(app *framework.App, r chi.Router) error {
			c, err := jgrpc.Client(app, "inventory")
			if err != nil {
				return err
			}
			stub := shoppb.NewInventoryClient(c)
			r.Method(http.MethodGet, "/stock", framework.Handler(func(w http.ResponseWriter, r *http.Request) error {
				_, err := stub.GetStock(r.Context(), &shoppb.GetStockRequest{Sku: "a"})
				return err
			}))
			return nil
		},
	})
	check := func() (string, bool) {
		t.Helper()
		var ready struct {
			Checks map[string]struct {
				Healthy bool   `json:"healthy"`
				Detail  string `json:"detail"`
			} `json:"checks"`
		}
		if err := json.Unmarshal(svc.Get(t, "/ready").Body, &ready); err != nil {
			t.Fatal(err)
		}
		return ready.Checks["grpc"].Detail, ready.Checks["grpc"].Healthy
	}
	svc.Get(t, "/stock")
	svc.Get(t, "/stock") // each instance failed once: both open
	if detail, healthy := check(); healthy || !strings.Contains(detail, "every instance of 'inventory' is ejected") {
		t.Fatalf("both open: healthy %v, detail %q", healthy, detail)
	}
	clock.Advance(resilience.DefaultBreakerCoolDown) // both half-open once asked, as /ready does
	addrs := addrsOf(srv)
	slices.Sort(addrs)
	detail, healthy := check()
	if !healthy || !strings.Contains(detail, "instances of 'inventory' half-open, the next call to each probing it: ") ||
		!strings.Contains(detail, addrs[0]) || !strings.Contains(detail, addrs[1]) || strings.Contains(detail, "every breaker closed") {
		t.Fatalf("both half-open: healthy %v, detail %q", healthy, detail)
	}
}
