package http_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/framework/resilience"
	"github.com/jfastframework/jfast/jfasttest"
	jhttp "github.com/jfastframework/jfast/plugins/http"
)

// The page's budget table, through the client against a real upstream that
// always answers 503, the breaker out of the way: 50 sequential calls of
// three attempts make 150 requests with no budget and 64 with the bucket (50
// first attempts, 10 retries from the initial tokens, 4 earned by the calls).
func TestRetryBudgetTable(t *testing.T) {
	t.Parallel()
	noBreaker := resilience.BreakerConfig{BreakerFailures: 1000, BreakerMinimumCalls: 1000}
	for _, tc := range []struct {
		name     string
		up       jhttp.Upstream
		requests int64
	}{
		{"no budget", noBudget(jhttp.Upstream{PolicyConfig: resilience.PolicyConfig{BreakerConfig: noBreaker}}), 150},
		{"bucket", jhttp.Upstream{PolicyConfig: resilience.PolicyConfig{RetryBudget: jhttp.BudgetBucket, BreakerConfig: noBreaker}}, 64},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			up := newUpstream(t, status(503))
			tc.up.BaseURL = up.URL
			c, _, reg := newClient(t, tc.up)
			for range 50 {
				resp, err := c.Get(context.Background(), "/stock/sku-42")
				if err != nil || resp.StatusCode != 503 {
					t.Fatalf("%v %v", resp, err)
				}
			}
			if got := up.hits.Load(); got != tc.requests {
				t.Errorf("%d requests for 50 calls, want %d", got, tc.requests)
			}
			if tc.requests == 64 {
				// The first 5 calls spend the 10 initial tokens on two
				// retries each; every other call is refused a retry once
				// (4 of them after a retry on an earned token).
				if got := metric(t, reg, "jfast_client_retry_budget_refusals_total", "dependency", "billing"); got != 45 {
					t.Errorf("%v retries refused, want 45", got)
				}
			}
		})
	}
}

// Proportional jitter through the client: the first wait is within 80–120 ms
// and the second within 160–240 ms (a 100 ms base), spread over those ranges.
func TestProportionalJitterThroughTheClient(t *testing.T) {
	t.Parallel()
	up := newUpstream(t, status(503))
	c, clk, _ := newClient(t, noBudget(jhttp.Upstream{BaseURL: up.URL, PolicyConfig: resilience.PolicyConfig{BackoffJitter: jhttp.JitterProportional, BreakerConfig: resilience.BreakerConfig{BreakerFailures: 1000, BreakerMinimumCalls: 1000}}}))
	const calls = 200
	for range calls {
		_, _ = c.Get(context.Background(), "/x")
	}
	sleeps := clk.Sleeps()
	if len(sleeps) != 2*calls {
		t.Fatalf("%d waits, want %d", len(sleeps), 2*calls)
	}
	for i := 0; i < len(sleeps); i += 2 {
		first, second := sleeps[i], sleeps[i+1]
		if first < 80*time.Millisecond || first > 120*time.Millisecond || second < 160*time.Millisecond || second > 240*time.Millisecond {
			t.Fatalf("call %d waited %v then %v, want 80–120 ms then 160–240 ms", i/2, first, second)
		}
	}
	lo, hi := sleeps[0], sleeps[0]
	for i := 0; i < len(sleeps); i += 2 {
		lo, hi = min(lo, sleeps[i]), max(hi, sleeps[i])
	}
	if lo > 85*time.Millisecond || hi < 115*time.Millisecond {
		t.Errorf("first waits span [%v, %v]: not spread over 80–120 ms", lo, hi)
	}
}

// breaker_key = "route": two services behind one origin keep their own
// breakers; a call without a route uses the origin's; the routes held are
// bounded; /ready names the open route.
func TestRouteBreakers(t *testing.T) {
	t.Parallel()
	gw := newUpstream(t, func(w http.ResponseWriter, r *http.Request, _ int) {
		if strings.HasPrefix(r.URL.Path, "/payments/") {
			w.WriteHeader(503) // the payments service behind the gateway is down
		}
	})
	c, _, _ := newClient(t, jhttp.Upstream{BaseURL: gw.URL, BreakerKey: jhttp.KeyRoute, MaxRoutes: 2, PolicyConfig: resilience.PolicyConfig{Attempts: 1, BreakerConfig: resilience.BreakerConfig{BreakerFailures: 2}}})
	for range 2 {
		_, _ = c.Get(context.Background(), "/payments/7", jhttp.Route("/payments/{id}"))
	}
	if _, err := c.Get(context.Background(), "/payments/8", jhttp.Route("/payments/{id}")); !errors.Is(err, resilience.ErrOpen) {
		t.Fatalf("payments after two 503s: %v, want its open breaker", err)
	}
	resp, err := c.Get(context.Background(), "/stock/7", jhttp.Route("/stock/{sku}"))
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("stock behind the same origin: %v %v, want 200", resp, err)
	}
	// A route named by the context, as an SDK's or a proxy's request does.
	req, _ := http.NewRequestWithContext(jhttp.WithRoute(context.Background(), "/payments/{id}"), http.MethodGet, gw.URL+"/payments/9", nil)
	if _, err := c.HTTPClient().Do(req); !errors.Is(err, resilience.ErrOpen) {
		t.Errorf("payments through the RoundTripper: %v, want the route's open breaker", err)
	}
	// Without a route, the origin's breaker: two 503s open it, and the
	// routes' breakers do not follow.
	for range 2 {
		if resp, err := c.Get(context.Background(), "/payments/10"); err != nil || resp.StatusCode != 503 {
			t.Fatalf("a call without a route: %v %v, want the 503 (the origin's breaker was closed)", resp, err)
		}
	}
	if _, err := c.Get(context.Background(), "/payments/10"); !errors.Is(err, resilience.ErrOpen) {
		t.Fatalf("a third call without a route: %v, want the origin's open breaker", err)
	}
	if resp, err := c.Get(context.Background(), "/stock/8", jhttp.Route("/stock/{sku}")); err != nil || resp.StatusCode != 200 {
		t.Fatalf("stock with the origin's breaker open: %v %v, want 200", resp, err)
	}
	// max_routes = 2: a third route drops the least recently used.
	_, _ = c.Get(context.Background(), "/orders/1", jhttp.Route("/orders/{id}"))
	if _, err := c.Get(context.Background(), "/payments/11", jhttp.Route("/payments/{id}")); err != nil {
		t.Errorf("payments after its breaker was dropped: %v, want a fresh closed breaker", err)
	}
}

func TestRouteBreakersInReady(t *testing.T) {
	t.Parallel()
	gw := newUpstream(t, status(503))
	var client *jhttp.ServiceClient
	svc := jfasttest.Start(t, jfasttest.Options{
		TOML: `[plugins]
enabled = ["http"]
[plugin.http.upstreams.gateway]
base_url = "` + gw.URL + `"
breaker_key = "route"
breaker_failures = 1
attempts = 1
`,
		Plugins: []framework.Plugin{jhttp.New()},
		Routes: func(app *framework.App, _ chi.Router) error {
			var err error
			client, err = jhttp.Client(app, "gateway")
			return err
		},
	})
	_, _ = client.Get(context.Background(), "/payments/1", jhttp.Route("/payments/{id}"))
	_, _ = client.Get(context.Background(), "/stock/1", jhttp.Route("/stock/{sku}"))
	r := readyBody(t, svc)
	check := r.Checks["http"]
	if r.Status != "degraded" || !strings.Contains(check.Detail, "'gateway' on /payments/{id}") {
		t.Fatalf("ready = %s, detail %q; want degraded naming the route", r.Status, check.Detail)
	}
	gateway := check.Meta["upstreams"].(map[string]any)["gateway"].(map[string]any)
	routes := gateway["routes"].(map[string]any)
	if gateway["routes_held"] != float64(2) || len(routes) != 2 || routes["/payments/{id}"].(map[string]any)["state"] != "open" {
		t.Errorf("meta = %v, want 2 routes held, both listed open", gateway)
	}
}
