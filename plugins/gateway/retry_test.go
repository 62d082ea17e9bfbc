package gateway_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/jfastframework/jfast/framework/resilience"
	"github.com/jfastframework/jfast/jfasttest"
)

// retryService proxies /r to an upstream that answers 503 to the first
// request of each test case and echoes the body after.
func retryService(t *testing.T) (*jfasttest.Service, *upstream) {
	t.Helper()
	up := newUpstream(t, nil)
	up.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := up.hits.Add(1)
		b, _ := io.ReadAll(r.Body)
		if n == 1 {
			w.WriteHeader(503)
			_, _ = io.WriteString(w, "busy")
			return
		}
		_, _ = w.Write(b)
	})
	svc := gatewayService(t, upstreamTOML("orders", up.URL, `backoff_base = "1ms"`, `backoff_max = "1ms"`)+`
[plugin.gateway]
max_retry_body_bytes = 1024
[plugin.gateway.routes.r]
prefix = "/r"
upstream = "orders"
`)
	return svc, up
}

// A GET, a small PUT and a small POST with an Idempotency-Key are retried
// (the body sent again); a POST without a key, and a body over
// max_retry_body_bytes that was streamed, are never retried.
func TestRetriesOnlyWhenSafe(t *testing.T) {
	t.Parallel()
	big := strings.Repeat("b", 4096)
	cases := []struct {
		name, method, body string
		headers            []string
		retried            bool
	}{
		{"GET", http.MethodGet, "", nil, true},
		{"small PUT", http.MethodPut, `{"qty":2}`, nil, true},
		{"POST with Idempotency-Key", http.MethodPost, `{"qty":2}`, []string{"Idempotency-Key", "k1"}, true},
		{"POST without a key", http.MethodPost, `{"qty":2}`, nil, false},
		{"streamed PUT", http.MethodPut, big, nil, false},
		{"streamed POST with Idempotency-Key", http.MethodPost, big, []string{"Idempotency-Key", "k2"}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			svc, up := retryService(t)
			r := svc.Do(t, tc.method, "/r/x", tc.body, tc.headers...)
			hits := up.hits.Load()
			retries := metric(t, svc.Metrics(), "jfast_gateway_retries_total", "route", "r")
			if n := metric(t, svc.Metrics(), "jfast_gateway_upstream_duration_seconds", "route", "r"); n != 1 {
				t.Errorf("upstream duration observations = %v, want 1 (retries included in the one request)", n)
			}
			if tc.retried {
				if r.Status != 200 || r.String() != tc.body || hits != 2 || retries != 1 {
					t.Fatalf("status %d body %.20q, %d upstream hits, %v retries; want 200, the body, 2, 1", r.Status, r.Body, hits, retries)
				}
				return
			}
			if r.Status != 503 || r.String() != "busy" || hits != 1 || retries != 0 {
				t.Fatalf("status %d body %.20q, %d upstream hits, %v retries; want the upstream's 503, 1, 0", r.Status, r.Body, hits, retries)
			}
		})
	}
}

// Once the upstream's breaker is open, a request is answered at once with a
// 503 problem and Retry-After, nothing sent; /ready shows the route's
// breaker, degraded.
func TestOpenBreaker(t *testing.T) {
	t.Parallel()
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(503) })
	clock := jfasttest.NewClock()
	svc := gatewayService(t, upstreamTOML("orders", up.URL, "attempts = 1", "breaker_failures = 2", `breaker_cool_down = "30s"`)+`
[plugin.gateway.routes.orders]
prefix = "/orders"
upstream = "orders"
`, func(o *jfasttest.Options) { o.Clock = clock })
	for range 2 {
		if r := svc.Get(t, "/orders/1"); r.Status != 503 || r.Header.Get("Content-Type") == "application/problem+json" {
			t.Fatalf("the upstream's own 503 should pass through: %d %s", r.Status, r.Body)
		}
	}
	r := svc.Get(t, "/orders/1")
	p := problemOf(t, r)
	if r.Status != 503 || p["dependency"] != "orders" || p["route"] != "orders" || r.Header.Get("Retry-After") != "30" ||
		!strings.Contains(p["detail"].(string), "suspended") {
		t.Fatalf("open breaker: %d %v Retry-After %q", r.Status, p, r.Header.Get("Retry-After"))
	}
	if n := up.hits.Load(); n != 2 {
		t.Fatalf("the upstream got %d requests, want 2: the open breaker sends nothing", n)
	}
	if v := metric(t, svc.Metrics(), "jfast_gateway_breaker_refusals_total", "route", "orders"); v != 1 {
		t.Errorf("breaker refusals = %v, want 1", v)
	}
	if v := metric(t, svc.Metrics(), "jfast_gateway_requests_total", "route", "orders", "status", "503"); v != 3 {
		t.Errorf("requests{status=503} = %v, want 3", v)
	}

	ready := svc.Get(t, "/ready")
	var body struct {
		Status string `json:"status"`
		Checks map[string]struct {
			Status string         `json:"status"`
			Meta   map[string]any `json:"meta"`
		} `json:"checks"`
	}
	if err := json.Unmarshal(ready.Body, &body); err != nil {
		t.Fatalf("/ready: %v: %s", err, ready.Body)
	}
	gw := body.Checks["gateway"]
	routes, _ := gw.Meta["routes"].(map[string]any)
	orders, _ := routes["orders"].(map[string]any)
	br, _ := orders["breaker"].(map[string]any)
	if ready.Status != 200 || br["state"] != resilience.StateOpen.String() || orders["upstream"] != "orders" {
		t.Fatalf("/ready: %d %s", ready.Status, ready.Body)
	}
	if gw.Status == "pass" || body.Status != "degraded" {
		t.Errorf("/ready with an open breaker: want the check failing and the whole degraded (200): %s", ready.Body)
	}
}
