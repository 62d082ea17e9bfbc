package http_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/framework/resilience"
	"github.com/jfastframework/jfast/jfasttest"
	jhttp "github.com/jfastframework/jfast/plugins/http"
	"github.com/jfastframework/jfast/requestid"
)

// newShared returns a shared client on an auto-advancing test clock that may
// call loopback servers (allow_hosts names 127.0.0.1: the guard is tested
// apart).
func newShared(t testing.TB, s jhttp.SharedConfig, opts ...jhttp.ClientOption) (*jhttp.SharedClient, *resilience.TestClock, *prometheus.Registry) {
	t.Helper()
	clk := jfasttest.NewClock()
	clk.SetAutoAdvance(true)
	reg := prometheus.NewRegistry()
	if s.Name == "" {
		s.Name = "webhooks"
	}
	if s.AllowHosts == nil && !s.AllowPrivate {
		s.AllowHosts = []string{"127.0.0.1"}
	}
	c, err := jhttp.NewSharedClient(s, append([]jhttp.ClientOption{jhttp.WithClock(clk), jhttp.WithMetrics(reg)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c, clk, reg
}

// The page's lab: three failing calls to origin A open A's breaker; origin B
// still answers 200, through the same client and through its RoundTripper.
func TestSharedBreakerPerOrigin(t *testing.T) {
	t.Parallel()
	a := newUpstream(t, status(503))
	b := newUpstream(t, status(200))
	c, _, _ := newShared(t, jhttp.SharedConfig{Upstream: noBudget(jhttp.Upstream{
		PolicyConfig: resilience.PolicyConfig{BreakerConfig: resilience.BreakerConfig{BreakerFailures: 3}},
	})})
	for range 3 {
		resp, err := c.Get(context.Background(), a.URL+"/pay")
		if err != nil || resp.StatusCode != 503 {
			t.Fatalf("origin A: %v %v", resp, err)
		}
	}
	if a.hits.Load() != 9 {
		t.Errorf("three calls of three attempts made %d requests to A, want 9", a.hits.Load())
	}
	_, err := c.Get(context.Background(), a.URL+"/pay")
	if !errors.Is(err, resilience.ErrOpen) {
		t.Fatalf("fourth call to A: %v, want the open breaker", err)
	}
	if a.hits.Load() != 9 {
		t.Error("a request went through A's open breaker")
	}
	resp, err := c.Get(context.Background(), b.URL+"/stock")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("origin B while A is open: %v %v, want 200", resp, err)
	}
	hr, err := c.HTTPClient().Get(b.URL + "/stock")
	if err != nil || hr.StatusCode != 200 {
		t.Fatalf("origin B through the RoundTripper: %v %v", hr, err)
	}
	_ = hr.Body.Close()
	if _, err := c.HTTPClient().Get(a.URL + "/pay"); !errors.Is(err, resilience.ErrOpen) {
		t.Errorf("origin A through the RoundTripper: %v, want the open breaker", err)
	}
	if s := c.Breaker(a.URL).Snapshot().State; s != resilience.StateOpen {
		t.Errorf("A's breaker %s", s)
	}
	if s := c.Breaker(b.URL).Snapshot().State; s != resilience.StateClosed {
		t.Errorf("B's breaker %s", s)
	}
	if c.Origins() != 2 {
		t.Errorf("%d origins held, want 2", c.Origins())
	}
}

// The origins held are bounded: past max_origins the least recently used one
// with no call in flight is dropped, and one with a call in flight is kept.
func TestSharedOriginsBounded(t *testing.T) {
	t.Parallel()
	ups := make([]*upstream, 5)
	for i := range ups {
		ups[i] = newUpstream(t, status(200))
	}
	held := newSwitchable(200)
	busy := newUpstream(t, held.handle)
	c, _, _ := newShared(t, jhttp.SharedConfig{MaxOrigins: 3})

	release := held.hold()
	done := make(chan error, 1)
	go func() {
		_, err := c.Get(context.Background(), busy.URL+"/slow")
		done <- err
	}()
	<-held.in // the busy origin is the least recently used, with a call in flight
	for _, u := range ups {
		if _, err := c.Get(context.Background(), u.URL+"/"); err != nil {
			t.Fatal(err)
		}
	}
	if n := c.Origins(); n != 3 {
		t.Errorf("%d origins held, want max_origins (3)", n)
	}
	if c.Breaker(busy.URL) == nil {
		t.Error("the origin with a call in flight was dropped")
	}
	for i, u := range ups[:3] {
		if c.Breaker(u.URL) != nil {
			t.Errorf("origin %d, among the least recently used, is still held", i)
		}
	}
	for i, u := range ups[3:] {
		if c.Breaker(u.URL) == nil {
			t.Errorf("origin %d, among the most recently used, was dropped", i+3)
		}
	}
	release()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// A dropped origin is made afresh when called again.
	if _, err := c.Get(context.Background(), ups[0].URL+"/"); err != nil || c.Breaker(ups[0].URL) == nil {
		t.Errorf("calling a dropped origin again: %v", err)
	}
}

func TestSharedRefusesRelativeURLs(t *testing.T) {
	t.Parallel()
	c, _, _ := newShared(t, jhttp.SharedConfig{})
	for _, target := range []string{"/relative", "ftp://files.example/x", "http:///nohost", "https://user:secret@"} {
		_, err := c.Get(context.Background(), target)
		if err == nil || !strings.Contains(err.Error(), "absolute http or https") {
			t.Errorf("%q: err = %v, want a refusal", target, err)
		}
		if err != nil && strings.Contains(err.Error(), "secret") {
			t.Errorf("%q: the error repeats the URL's credentials: %v", target, err)
		}
	}
	if c.Origins() != 0 {
		t.Errorf("%d origins held after refused URLs", c.Origins())
	}
}

// Budgets are per origin too: exhausting A's bucket leaves B's full.
func TestSharedBudgetPerOrigin(t *testing.T) {
	t.Parallel()
	a := newUpstream(t, status(503))
	b := newUpstream(t, status(503))
	c, _, _ := newShared(t, jhttp.SharedConfig{Upstream: jhttp.Upstream{
		PolicyConfig: resilience.PolicyConfig{RetryBudget: jhttp.BudgetBucket, BreakerConfig: resilience.BreakerConfig{BreakerFailures: 1000, BreakerMinimumCalls: 1000}},
	}})
	for range 50 {
		_, _ = c.Get(context.Background(), a.URL+"/")
	}
	if got := a.hits.Load(); got != 64 {
		t.Errorf("A: %d requests for 50 calls, want 64", got)
	}
	_, _ = c.Get(context.Background(), b.URL+"/")
	if got := b.hits.Load(); got != 3 {
		t.Errorf("B's first call after A spent its budget: %d requests, want 3", got)
	}
}

// The shared client's RoundTripper serves an SDK that calls absolute URLs of
// any origin, the address guard included.
func TestSharedTransportGuard(t *testing.T) {
	t.Parallel()
	up := newUpstream(t, status(200))
	c, _, _ := newShared(t, jhttp.SharedConfig{AllowHosts: []string{}})
	resp, err := c.HTTPClient().Get(up.URL + "/")
	if !errors.Is(err, jhttp.ErrAddressNotAllowed) {
		t.Fatalf("through the RoundTripper to a loopback address: %v %v, want ErrAddressNotAllowed", resp, err)
	}
	if up.hits.Load() != 0 {
		t.Error("the guarded request reached the server")
	}
}

// Route breakers on a shared client are per origin and route.
func TestSharedRouteBreakers(t *testing.T) {
	t.Parallel()
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request, _ int) {
		if strings.HasPrefix(r.URL.Path, "/payments/") {
			w.WriteHeader(503)
		}
	})
	c, _, _ := newShared(t, jhttp.SharedConfig{Upstream: jhttp.Upstream{
		BreakerKey:   jhttp.KeyRoute,
		PolicyConfig: resilience.PolicyConfig{Attempts: 1, BreakerConfig: resilience.BreakerConfig{BreakerFailures: 2}},
	}})
	for _, id := range []string{"1", "2"} {
		_, _ = c.Get(context.Background(), up.URL+"/payments/"+id, jhttp.Route("/payments/{id}"))
	}
	if _, err := c.Get(context.Background(), up.URL+"/payments/3", jhttp.Route("/payments/{id}")); !errors.Is(err, resilience.ErrOpen) {
		t.Fatalf("third payment: %v, want the route's open breaker", err)
	}
	ctx := jhttp.WithRoute(context.Background(), "/stock/{sku}")
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, up.URL+"/stock/7", nil)
	resp, err := c.HTTPClient().Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("another route of the same origin: %v %v", resp, err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	u, _ := url.Parse(up.URL)
	if c.Breaker(u.String()).Snapshot().State != resilience.StateClosed {
		t.Error("the origin's own breaker (calls without a route) opened")
	}
}

// A shared client from the file, taken at boot by name and, through
// framework.HTTPTransports, as a RoundTripper; an origin's open breaker is
// listed in /ready but does not degrade it.
func TestSharedInService(t *testing.T) {
	t.Parallel()
	down := newUpstream(t, status(503))
	var client *jhttp.SharedClient
	var rt http.RoundTripper
	svc := jfasttest.Start(t, jfasttest.Options{
		TOML: `[plugins]
enabled = ["http"]
[plugin.http.shared.webhooks]
allow_hosts = ["127.0.0.1"]
breaker_failures = 1
attempts = 1
`,
		Plugins: []framework.Plugin{jhttp.New()},
		Routes: func(app *framework.App, _ chi.Router) error {
			var err error
			if client, err = jhttp.Shared(app, "webhooks"); err != nil {
				return err
			}
			if _, err := jhttp.Shared(app, "hooks"); err == nil || !strings.Contains(err.Error(), "webhooks") {
				return fmt.Errorf("unknown shared client: %v, want an error naming the configured ones", err)
			}
			rt, err = app.Plugin("http").(framework.HTTPTransports).SharedTransport("webhooks")
			return err
		},
	})
	if _, err := client.Get(context.Background(), down.URL+"/hook"); err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodGet, down.URL+"/hook", nil)
	if _, err := rt.RoundTrip(req); !errors.Is(err, resilience.ErrOpen) {
		t.Fatalf("the RoundTripper shares the client's breakers: %v, want the open one", err)
	}
	r := readyBody(t, svc)
	check := r.Checks["http"]
	webhooks := check.Meta["shared"].(map[string]any)["webhooks"].(map[string]any)
	suspended := webhooks["suspended"].(map[string]any)
	u, _ := url.Parse(down.URL)
	if r.Status != "ok" || !check.Healthy || webhooks["origins_held"] != float64(1) ||
		suspended["http://"+u.Host].(map[string]any)["state"] != "open" {
		t.Errorf("ready = %s %+v, want ok listing the open origin", r.Status, check)
	}
}

// A shared client sends the request ID and the time left only to the origins
// propagate_to names; another origin gets neither, even when the caller set
// the request ID itself. Both the client's calls and its RoundTripper.
func TestSharedPropagateTo(t *testing.T) {
	t.Parallel()
	up := newUpstream(t, status(200))
	ctx, cancel := context.WithTimeout(requestid.NewContext(context.Background(), "req-7"), time.Minute)
	defer cancel()
	last := func() http.Header {
		up.mu.Lock()
		defer up.mu.Unlock()
		return up.requests[len(up.requests)-1].Header
	}
	for name, tc := range map[string]struct {
		to   []string
		want bool
	}{
		"no propagate_to":          {nil, false},
		"another origin":           {[]string{"https://hooks.example.com"}, false},
		"the origin":               {[]string{up.URL}, true},
		"the origin, with a slash": {[]string{up.URL + "/"}, true},
	} {
		c, _, _ := newShared(t, jhttp.SharedConfig{PropagateTo: tc.to})
		if _, err := c.Get(ctx, up.URL+"/hook"); err != nil {
			t.Fatal(err)
		}
		h := last()
		if got := h.Get("X-Request-ID") != "" && h.Get(framework.TimeoutHeader) != ""; got != tc.want {
			t.Errorf("%s, Get: X-Request-ID %q, Jfast-Timeout-Ms %q; want both sent = %v", name, h.Get("X-Request-ID"), h.Get(framework.TimeoutHeader), tc.want)
		}
		if !tc.want && (h.Get("X-Request-ID") != "" || h.Get(framework.TimeoutHeader) != "") {
			t.Errorf("%s: sent X-Request-ID %q, Jfast-Timeout-Ms %q", name, h.Get("X-Request-ID"), h.Get(framework.TimeoutHeader))
		}
		req, _ := http.NewRequestWithContext(ctx, "GET", up.URL+"/sdk", nil)
		req.Header.Set("X-Request-ID", "set-by-caller")
		resp, err := c.HTTPClient().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if got := last().Get("X-Request-ID") != ""; got != tc.want {
			t.Errorf("%s, RoundTripper: X-Request-ID %q sent, want sent = %v", name, last().Get("X-Request-ID"), tc.want)
		}
		if req.Header.Get("X-Request-ID") != "set-by-caller" {
			t.Errorf("%s: the caller's request was changed", name)
		}
	}
}
