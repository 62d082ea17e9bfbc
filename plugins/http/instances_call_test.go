package http_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/framework/egress"
	"github.com/jfastframework/jfast/framework/resilience"
	"github.com/jfastframework/jfast/jfasttest"
	jhttp "github.com/jfastframework/jfast/plugins/http"
)

// replicas starts n scripted upstreams and returns them with an upstream
// whose instances they are; base_url names a host no attempt dials.
func replicas(n int, t *testing.T, handles ...func(http.ResponseWriter, *http.Request, int)) ([]*upstream, jhttp.Upstream) {
	t.Helper()
	ups := make([]*upstream, n)
	u := jhttp.Upstream{BaseURL: "http://orders.internal:8000/api"}
	for i := range ups {
		h := status(200)
		if i < len(handles) {
			h = handles[i]
		}
		ups[i] = newUpstream(t, h)
		u.Instances = append(u.Instances, ups[i].URL)
	}
	return ups, u
}

// Calls are spread over every instance, each asked for the upstream's host
// on base_url's path.
func TestInstancesSpreadCalls(t *testing.T) {
	t.Parallel()
	ups, u := replicas(3, t)
	c, _, _ := newClient(t, u)
	for range 300 {
		resp, err := c.Get(t.Context(), "/orders/7")
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("%v %v", resp, err)
		}
	}
	for i, up := range ups {
		// Each of 300 uniform draws misses one of three with probability
		// (2/3)^300: no instance goes without.
		if up.hits.Load() == 0 {
			t.Errorf("instance %d got no call", i)
		}
		if r := up.request(0); r.Host != "orders.internal:8000" || r.URL.Path != "/api/orders/7" {
			t.Errorf("instance %d was asked for %s%s", i, r.Host, r.URL.Path)
		}
	}
	for _, in := range c.Instances().List() {
		if in.Outstanding() != 0 {
			t.Errorf("%s still has %d outstanding attempts", in.Addr(), in.Outstanding())
		}
	}
}

// An instance that fails opens its own breaker and is skipped (ejected);
// the calls it failed were retried on another instance, so every call
// succeeds; the upstream stays available.
func TestInstanceEjected(t *testing.T) {
	t.Parallel()
	ups, u := replicas(3, t, status(503))
	u.BreakerFailures = 2
	u = noBudget(u)
	c, _, _ := newClient(t, u)
	for i := range 100 {
		resp, err := c.Get(t.Context(), "/orders/7")
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("call %d: %v %v", i, resp, err)
		}
	}
	if got := ups[0].hits.Load(); got != 2 {
		t.Fatalf("the failing instance got %d requests, want breaker_failures (2)", got)
	}
	var failing *egress.Instance
	for _, in := range c.Instances().List() {
		if in.Addr() == strings.TrimPrefix(ups[0].URL, "http://") {
			failing = in
		}
	}
	if failing == nil || c.Breaker().Snapshot().State != resilience.StateClosed {
		t.Fatal("no failing instance, or the upstream's breaker was fed")
	}
}

// A retry goes to another instance: an instance that always answers 503
// (its breaker never opening here) never answers a call twice.
func TestRetryGoesToAnotherInstance(t *testing.T) {
	t.Parallel()
	ups, u := replicas(2, t, status(503))
	u.BreakerFailures = 1000
	u.Attempts = 2
	u = noBudget(u)
	c, _, _ := newClient(t, u)
	for i := range 50 {
		resp, err := c.Get(t.Context(), "/x")
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("call %d: %v %v (a retry went back to the failing instance)", i, resp, err)
		}
	}
	// Every call ends on the healthy instance exactly once; the failing one
	// was the first choice of some (each call draws it with probability ½).
	if ups[1].hits.Load() != 50 || ups[0].hits.Load() == 0 {
		t.Fatalf("hits %d and %d", ups[0].hits.Load(), ups[1].hits.Load())
	}
}

// A replica answering 503 with a Retry-After over max_retry_after (one
// draining) is not waited for, but that wait speaks for it alone: the call
// is retried at once on another instance, untried and usable, so every call
// is answered by the live replica. With no other instance (a list of one)
// the 503 goes back to the caller after one request, as without instances.
func TestLongRetryAfterGoesToAnotherInstance(t *testing.T) {
	t.Parallel()
	draining := status(http.StatusServiceUnavailable, "Retry-After", "60") // max_retry_after is 30s
	ups, u := replicas(2, t, draining)
	u.BreakerFailures = 1000 // the draining replica stays in the draws
	c, clk, _ := newClient(t, noBudget(u))
	for i := range 50 {
		resp, err := c.Get(t.Context(), "/x")
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("call %d: %v %v, want the live replica's 200", i, resp, err)
		}
	}
	// Each call draws the draining replica first with probability ½: none
	// in 50 is a 2^-50 chance.
	if ups[0].hits.Load() == 0 || ups[1].hits.Load() != 50 {
		t.Fatalf("draining replica %d requests, live one %d; want some, and all 50", ups[0].hits.Load(), ups[1].hits.Load())
	}
	for _, d := range clk.Sleeps() {
		if d >= time.Minute {
			t.Fatalf("a retry waited %v: the draining replica's Retry-After", d)
		}
	}

	alone := newUpstream(t, draining)
	one, _, _ := newClient(t, noBudget(jhttp.Upstream{BaseURL: "http://orders.internal:8000", Instances: []string{alone.URL}}))
	if resp, err := one.Get(t.Context(), "/x"); err != nil || resp.StatusCode != http.StatusServiceUnavailable || alone.hits.Load() != 1 {
		t.Fatalf("one instance: %v %v after %d requests, want its 503 after one", resp, err, alone.hits.Load())
	}
}

// A POST without an Idempotency-Key is not retried, except after an
// attempt that sent nothing: one whose instance refused the connection (a
// dead replica) goes to the live one, so every call is answered. A 503
// answer, which the POST may have caused, is not sent again.
func TestUnsentPostGoesToAnotherInstance(t *testing.T) {
	t.Parallel()
	live := newUpstream(t, status(200))
	u := noBudget(jhttp.Upstream{BaseURL: "http://orders.internal:8000/api",
		Instances: []string{"http://" + jfasttest.RefusedAddr(t), live.URL}})
	u.BreakerFailures = 1000
	c, _, reg := newClient(t, u)
	for i := range 20 {
		resp, err := c.Post(t.Context(), "/orders", map[string]int{"n": i})
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("POST %d: %v %v (its refused attempt was not made again elsewhere)", i, resp, err)
		}
	}
	if got := live.hits.Load(); got != 20 {
		t.Fatalf("the live instance got %d POSTs, want each of the 20 once", got)
	}
	if got := metric(t, reg, "jfast_client_retries_total"); got == 0 {
		t.Fatal("no POST met the dead instance first: the test proves nothing")
	}

	failing := newUpstream(t, status(503))
	u2 := noBudget(jhttp.Upstream{BaseURL: "http://orders.internal:8000/api", Instances: []string{failing.URL, live.URL}})
	u2.BreakerFailures = 1000
	c2, _, _ := newClient(t, u2)
	for range 20 {
		if resp, err := c2.Post(t.Context(), "/orders", map[string]int{"n": 1}); err != nil || (resp.StatusCode != 200 && resp.StatusCode != 503) {
			t.Fatalf("POST: %v %v", resp, err)
		}
	}
	if got := failing.hits.Load() + live.hits.Load() - 20; got != 20 {
		t.Fatalf("%d requests for 20 POSTs: a POST answered 503 was sent again", got)
	}
}

// The call whose failure opens the last instance's breaker carries the
// soonest cool-down as its Retry-After, as the calls the upstream then
// refuses do; a failure that leaves an instance in service carries none.
func TestCallThatEjectsTheLastInstanceCarriesRetryAfter(t *testing.T) {
	t.Parallel()
	u := noBudget(jhttp.Upstream{BaseURL: "http://orders.internal:8000",
		Instances: []string{"http://" + jfasttest.RefusedAddr(t), "http://" + jfasttest.RefusedAddr(t)}})
	u.Attempts, u.BreakerFailures = 1, 1
	c, clk, _ := newClient(t, u)
	clk.SetAutoAdvance(false)
	var ua *jhttp.UpstreamUnavailable
	if _, err := c.Get(t.Context(), "/x"); !errors.As(err, &ua) || ua.RetryAfter != 0 {
		t.Fatalf("the first refused call: %v, want UpstreamUnavailable without a wait (one instance is left)", err)
	}
	if _, err := c.Get(t.Context(), "/x"); !errors.As(err, &ua) || ua.RetryAfter != 15*time.Second {
		t.Fatalf("the call that ejected the last instance: %v (Retry-After %v), want UpstreamUnavailable with 15s", err, ua.RetryAfter)
	}
	var co *jhttp.CircuitOpen
	if _, err := c.Get(t.Context(), "/x"); !errors.As(err, &co) || co.RetryAfter != 15*time.Second {
		t.Fatalf("the call after it: %v, want CircuitOpen with 15s", err)
	}
}

// A call whose attempts were sent and failed, each ejecting its instance,
// and whose next retry then finds every instance open, returns the last
// sent attempt's failure (UpstreamUnavailable: refused, or taken and
// dropped) with the cool-down as its Retry-After, as the call that ejects
// the last instance does; not a CircuitOpen, which says nothing was sent.
// The retry that found no instance is no retry sent, nor an attempt a
// call observer is told of.
func TestEjectingCallReturnsWhatWasSent(t *testing.T) {
	t.Parallel()
	drop := func(w http.ResponseWriter, _ *http.Request, _ int) {
		conn, _, _ := w.(http.Hijacker).Hijack()
		_ = conn.Close()
	}
	for _, tc := range []struct {
		name      string
		instances func(t *testing.T) []string
	}{
		{"refused", func(t *testing.T) []string {
			return []string{"http://" + jfasttest.RefusedAddr(t), "http://" + jfasttest.RefusedAddr(t)}
		}},
		{"dropped", func(t *testing.T) []string {
			_, u := replicas(2, t, drop, drop)
			return u.Instances
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			u := noBudget(jhttp.Upstream{BaseURL: "http://orders.internal:8000", Instances: tc.instances(t)})
			u.BreakerFailures = 1 // attempts stays at its default, 3: the third finds both open
			attempts := make(chan int, 2)
			c, _, reg := newClient(t, u, jhttp.WithCallObserver(countAttempts(attempts)))
			_, err := c.Get(t.Context(), "/x")
			if n := <-attempts; n != 2 {
				t.Errorf("the call observer was told of %d attempts, want the 2 sent", n)
			}
			var ua *jhttp.UpstreamUnavailable
			if !errors.As(err, &ua) || ua.RetryAfter <= 0 || ua.RetryAfter > resilience.DefaultBreakerCoolDown {
				t.Fatalf("%T %v, want UpstreamUnavailable with the cool-down left as its Retry-After", err, err)
			}
			// The waits moved the test clock: the soonest cool-down has that
			// much less left, which the next call, refused, is told too.
			var co *jhttp.CircuitOpen
			if _, err := c.Get(t.Context(), "/x"); !errors.As(err, &co) || co.RetryAfter != ua.RetryAfter {
				t.Fatalf("the next call: %v, want CircuitOpen with the same Retry-After (%v)", err, ua.RetryAfter)
			}
			for name, want := range map[string]float64{"jfast_client_attempts_total": 2, "jfast_client_retries_total": 1} {
				if got := metric(t, reg, name); got != want {
					t.Errorf("%s = %v, want %v", name, got, want)
				}
			}
			if got := metric(t, reg, "jfast_client_calls_total", "outcome", "unavailable"); got != 1 {
				t.Errorf("unavailable calls %v, want the first call", got)
			}
		})
	}
}

// A hang is retried on another instance although another attempt as long
// as the hung one would not end before the deadline (timeout is twice
// read_timeout, as with the defaults): the hang's time is the cut that
// ended it, not how long the other instance takes. Every call answers 200,
// the one whose first attempt met the silent instance included.
func TestHangRetriedOnAnotherInstance(t *testing.T) {
	t.Parallel()
	silent, arrived, _ := jfasttest.WatchedSilentServer(t)
	good := newUpstream(t, status(200))
	u := noBudget(jhttp.Upstream{Name: "billing", BaseURL: "http://orders.internal:8000", Instances: []string{"http://" + silent, good.URL}})
	u.ReadTimeout = time.Second
	u.Timeout = 2 * u.ReadTimeout
	u.BackoffBase, u.BackoffMax = time.Millisecond, time.Millisecond
	c, err := jhttp.NewClient(u, jhttp.WithMetrics(prometheus.NewRegistry())) // the real clock: the deadline rule reads the hang's time
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	// Each call draws the silent instance first with probability ½: 60
	// calls all missing it is a 2^-60 chance.
	for i := range 60 {
		resp, err := c.Get(t.Context(), "/x")
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("call %d: %v %v", i, resp, err)
		}
		select {
		case <-arrived:
			if good.hits.Load() != int64(i+1) {
				t.Fatalf("the good instance answered %d of %d calls", good.hits.Load(), i+1)
			}
			return
		default:
		}
	}
	t.Fatal("no call met the silent instance")
}

// With every instance's breaker open the call fails at once with
// CircuitOpen and nothing is sent; after the cool-down a probe goes
// through.
func TestEveryInstanceEjected(t *testing.T) {
	t.Parallel()
	a, b := newSwitchable(503), newSwitchable(503)
	ups, u := replicas(2, t, a.handle, b.handle)
	u.BreakerFailures = 1
	u.Attempts = 1
	c, clk, reg := newClient(t, u)
	for range 2 {
		if resp, err := c.Get(t.Context(), "/x"); err != nil || resp.StatusCode != 503 {
			t.Fatalf("%v %v", resp, err)
		}
	}
	_, err := c.Get(t.Context(), "/x")
	var open *jhttp.CircuitOpen
	if !errors.As(err, &open) || ups[0].hits.Load()+ups[1].hits.Load() != 2 {
		t.Fatalf("err %v after %d requests, want CircuitOpen after 2", err, ups[0].hits.Load()+ups[1].hits.Load())
	}
	if got := metric(t, reg, "jfast_client_calls_total", "outcome", "circuit_open"); got != 1 {
		t.Fatalf("circuit_open calls %v", got)
	}
	// The refused call sent nothing: attempts counts the two requests sent.
	if got := metric(t, reg, "jfast_client_attempts_total"); got != 2 {
		t.Fatalf("attempts_total %v, want the 2 requests sent", got)
	}
	a.status.Store(200)
	b.status.Store(200)
	clk.Advance(resilience.DefaultBreakerCoolDown)
	if resp, err := c.Get(t.Context(), "/x"); err != nil || resp.StatusCode != 200 {
		t.Fatalf("after the cool-down: %v %v", resp, err)
	}
}

// listenOn starts a scripted upstream on addr ("127.0.0.2:8000").
func listenOn(t *testing.T, addr string) *upstream {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	u := &upstream{}
	u.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := int(u.hits.Add(1))
		u.mu.Lock()
		u.requests = append(u.requests, r.Clone(context.Background()))
		u.mu.Unlock()
		status(200)(w, r, n)
	}))
	_ = u.Server.Listener.Close()
	u.Server.Listener = ln
	u.Start()
	t.Cleanup(u.Close)
	return u
}

// discover = true: every address the name resolves to is an instance, at
// base_url's port; a resolution that drops one takes it out of the calls.
func TestDiscoveredInstances(t *testing.T) {
	t.Parallel()
	one := newUpstream(t, status(200))
	_, port, _ := net.SplitHostPort(one.Listener.Addr().String())
	two := listenOn(t, "127.0.0.2:"+port)
	table := &dnsTable{answers: map[string][]string{"orders-instances": {"127.0.0.1", "127.0.0.2"}}}
	c, _, _ := newClient(t, jhttp.Upstream{BaseURL: "http://orders-instances:" + port, Discover: true},
		jhttp.WithLookup(table.lookup))
	for range 100 {
		if resp, err := c.Get(t.Context(), "/x"); err != nil || resp.StatusCode != 200 {
			t.Fatalf("%v %v", resp, err)
		}
	}
	if one.hits.Load() == 0 || two.hits.Load() == 0 || two.request(0).Host != "orders-instances:"+port {
		t.Fatalf("hits %d and %d", one.hits.Load(), two.hits.Load())
	}
	table.set("orders-instances", "127.0.0.2")
	if err := c.Instances().Resolve(t.Context()); err != nil {
		t.Fatal(err)
	}
	before := one.hits.Load()
	for range 20 {
		if resp, err := c.Get(t.Context(), "/x"); err != nil || resp.StatusCode != 200 {
			t.Fatalf("%v %v", resp, err)
		}
	}
	if one.hits.Load() != before {
		t.Fatal("an instance no longer resolved was called")
	}
}

// The RoundTripper (a gateway's) spreads its requests too, and a streamed
// response keeps its instance outstanding until the body is closed.
func TestInstancesThroughTheRoundTripper(t *testing.T) {
	t.Parallel()
	ups, u := replicas(2, t)
	c, _, _ := newClient(t, u)
	hc := c.HTTPClient()
	for range 100 {
		resp, err := hc.Get("http://orders.internal:8000/api/x")
		if err != nil {
			t.Fatal(err)
		}
		if outstanding(c) != 1 {
			t.Fatalf("a streamed response's instance is not outstanding (%d)", outstanding(c))
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
	}
	if outstanding(c) != 0 || ups[0].hits.Load() == 0 || ups[1].hits.Load() == 0 {
		t.Fatalf("outstanding %d, hits %d and %d", outstanding(c), ups[0].hits.Load(), ups[1].hits.Load())
	}
}

func outstanding(c *jhttp.ServiceClient) (n int64) {
	for _, in := range c.Instances().List() {
		n += in.Outstanding()
	}
	return n
}

// In a service: /ready lists the instances with their breakers (and the
// status page's registry holds each instance's breaker); one ejected leaves
// the check passing (the upstream is available), all ejected
// makes it fail (degraded, never unavailable).
func TestInstancesInReady(t *testing.T) {
	t.Parallel()
	a, b := newSwitchable(200), newSwitchable(200)
	ups, _ := replicas(2, t, a.handle, b.handle)
	toml := `[plugins]
enabled = ["observability", "http"]
[plugin.http.upstreams.orders]
base_url = "http://orders.internal:8000"
instances = ["` + ups[0].URL + `", "` + ups[1].URL + `"]
breaker_failures = 1
attempts = 1
`
	svc := jfasttest.Start(t, jfasttest.Options{
		TOML: toml, Plugins: []framework.Plugin{jhttp.New()}, Clock: jfasttest.NewClock(),
		Routes: func(app *framework.App, r chi.Router) error {
			orders, err := jhttp.Client(app, "orders")
			if err != nil {
				return err
			}
			r.Method(http.MethodGet, "/x", framework.Handler(func(w http.ResponseWriter, r *http.Request) error {
				resp, err := orders.Get(r.Context(), "/x")
				if err != nil {
					return err
				}
				w.WriteHeader(resp.StatusCode)
				return nil
			}))
			return nil
		},
	})
	entry := func() (map[string]any, string, bool) {
		ready := readyBody(t, svc)
		check := ready.Checks["http"]
		up, _ := check.Meta["upstreams"].(map[string]any)["orders"].(map[string]any)
		inst, _ := up["instances"].(map[string]any)
		return inst, check.Detail, check.Healthy
	}
	inst, _, healthy := entry()
	if len(inst) != 2 || !healthy {
		t.Fatalf("/ready instances %v, healthy %v", inst, healthy)
	}
	// Before any call, each instance's breaker shows every member a
	// breaker shows, at zero.
	want := map[string]any{"state": "closed", "retry_after": 0.0, "consecutive_failures": 0.0,
		"window_calls": 0.0, "window_failures": 0.0, "opens": 0.0}
	for addr, e := range inst {
		if got := e.(map[string]any)["breaker"]; !reflect.DeepEqual(got, want) {
			t.Fatalf("%s's breaker before any call: %v, want %v", addr, got, want)
		}
	}
	a.status.Store(503)
	for range 10 {
		svc.Get(t, "/x") // until a's breaker opens; b answers the rest
	}
	addrA := strings.TrimPrefix(ups[0].URL, "http://")
	inst, detail, healthy := entry()
	st, _ := inst[addrA].(map[string]any)["breaker"].(map[string]any)
	if st["state"] != "open" || !healthy || !strings.Contains(detail, "instances of 'orders' ejected: "+addrA) {
		t.Fatalf("one ejected: %v, healthy %v, detail %q", inst, healthy, detail)
	}
	// The status page reads the App's registry: the instance's breaker is a
	// dependency of its own there.
	var onStatusPage bool
	for _, d := range svc.Resilience().Snapshot() {
		if d.Owner == "http" && d.Name == "orders "+addrA && d.Breaker != nil && d.Breaker.State == resilience.StateOpen {
			onStatusPage = true
		}
	}
	if !onStatusPage {
		t.Fatalf("the ejected instance's breaker is not in the App's registry: %+v", svc.Resilience().Snapshot())
	}
	b.status.Store(503)
	for range 10 {
		svc.Get(t, "/x")
	}
	if _, detail, healthy := entry(); healthy || !strings.Contains(detail, "every instance of 'orders' is ejected") {
		t.Fatalf("all ejected: healthy %v, detail %q", healthy, detail)
	}
	if res := svc.Get(t, "/x"); res.Status != 503 || res.Header.Get("Retry-After") == "" {
		t.Fatalf("all ejected: %d %q", res.Status, res.Header.Get("Retry-After"))
	}
}

func TestInstanceConfigErrors(t *testing.T) {
	t.Parallel()
	const good = "[plugins]\nenabled = [\"http\"]\n[plugin.http.upstreams.orders]\nbase_url = \"http://orders:8000\"\n"
	for _, tc := range []struct{ name, toml, key, problem string }{
		{"instances and discover", "instances = [\"http://10.0.0.1:8000\"]\ndiscover = true", "discover", "cannot be set together with instances"},
		{"an instance with a path", `instances = ["http://10.0.0.1:8000", "http://10.0.0.2:8000/api"]`, "instances[1]", "without a path"},
		{"an instance twice", `instances = ["http://10.0.0.1:8000", "http://10.0.0.1:8000/"]`, "instances[1]", "origin of instances[0] again, http://10.0.0.1:8000"},
		{"an instance twice, the host in another case", `instances = ["http://Orders-1:8000", "http://orders-1:8000"]`, "instances[1]", "origin of instances[0] again, http://orders-1:8000"},
		{"an instance twice, the default port written once", `instances = ["http://10.0.0.1", "http://10.0.0.2", "HTTP://10.0.0.1:80"]`, "instances[2]", "origin of instances[0] again, http://10.0.0.1:80"},
		{"an instance twice, an https default port", `instances = ["https://10.0.0.1:443", "https://10.0.0.1"]`, "instances[1]", "origin of instances[0] again"},
		{"an instance twice, an IPv6 address spelt twice", `instances = ["http://[::1]:8000", "http://[0:0::1]:08000"]`, "instances[1]", "origin of instances[0] again, http://[::1]:8000"},
		{"an instance twice, an IPv4 address written as IPv6", `instances = ["http://10.0.0.1:8000", "http://[::ffff:10.0.0.1]:8000"]`, "instances[1]", "origin of instances[0] again, http://10.0.0.1:8000"},
		{"an instance with a port above 65535", `instances = ["http://10.0.0.1:99999"]`, "instances[0]", "has port 99999, which is not a TCP port: a port is from 1 to 65535"},
		{"an instance with port 0", `instances = ["http://10.0.0.1:8000", "http://10.0.0.2:0"]`, "instances[1]", "has port 0"},
		{"an instance without a scheme", `instances = ["10.0.0.1:8000"]`, "instances[0]", "has no scheme: write it with http://"},
		{"route breakers with instances", "discover = true\nbreaker_key = \"route\"", "breaker_key", "each instance has a breaker of its own"},
		{"zero resolve_every", `resolve_every = 0`, "resolve_every", ""},
		{"health_path without instances", `health_path = "/ready"`, "health_path", "needs instances or discover"},
		{"health_path not a path", "discover = true\nhealth_path = \"ready\"", "health_path", "starting with /"},
		{"zero health_every", `health_every = 0`, "health_every", ""},
		{"zero health_timeout", `health_timeout = 0`, "health_timeout", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := jfasttest.ConfigErrors(t, jfasttest.Options{TOML: good + tc.toml + "\n", Plugins: []framework.Plugin{jhttp.New()}}).Only(t, "plugin.http.upstreams.orders."+tc.key)
			if !strings.Contains(e.Problem, tc.problem) {
				t.Fatalf("problem %q, want %q", e.Problem, tc.problem)
			}
		})
	}
}

// A shared client has no instances: its calls name their host.
func TestSharedClientRefusesInstanceKeys(t *testing.T) {
	t.Parallel()
	const good = "[plugins]\nenabled = [\"http\"]\n[plugin.http.shared.webhooks]\n"
	for _, tc := range []struct{ toml, key string }{
		{`instances = ["http://10.0.0.1:8000"]`, "instances"},
		{`discover = true`, "discover"},
		{`resolve_every = "1s"`, "resolve_every"},
		{`health_path = "/ready"`, "health_path"},
	} {
		jfasttest.ConfigErrors(t, jfasttest.Options{TOML: good + tc.toml + "\n", Plugins: []framework.Plugin{jhttp.New()}}).Only(t, "plugin.http.shared.webhooks."+tc.key)
	}
}

// instances is a deploy key: a comma-separated list in the environment wins
// over the file.
func TestInstancesFromEnvironment(t *testing.T) {
	t.Parallel()
	ups, _ := replicas(2, t)
	toml := "[plugins]\nenabled = [\"http\"]\n[plugin.http.upstreams.orders]\nbase_url = \"http://orders:8000\"\ninstances = [\"http://127.0.0.1:1\"]\n"
	var client *jhttp.ServiceClient
	jfasttest.Start(t, jfasttest.Options{
		TOML: toml, Plugins: []framework.Plugin{jhttp.New()},
		Env: map[string]string{"JFAST_HTTP_UPSTREAMS__ORDERS__INSTANCES": ups[0].URL + "," + ups[1].URL},
		Routes: func(app *framework.App, _ chi.Router) error {
			var err error
			client, err = jhttp.Client(app, "orders")
			return err
		},
	})
	if got := client.Instances().State().Instances; len(got) != 2 || got[0] == "127.0.0.1:1" {
		t.Fatalf("instances %v, want the environment's two", got)
	}
}

// replica is an instance whose /ready answers ready's status (200 or 503)
// and whose other paths answer 200, counting those calls.
type replica struct {
	ready atomic.Int64
	calls atomic.Int64
}

func (r *replica) handle(w http.ResponseWriter, req *http.Request, _ int) {
	if req.URL.Path == "/ready" {
		w.WriteHeader(int(r.ready.Load()))
		return
	}
	r.calls.Add(1)
}

// With health_path, an instance whose /ready says 503 is skipped before any
// call pays for it, and called again once it answers 200; when every
// instance fails its check the checks are ignored, not the upstream.
func TestHealthChecksEject(t *testing.T) {
	t.Parallel()
	a, b := &replica{}, &replica{}
	a.ready.Store(200)
	b.ready.Store(503)
	_, u := replicas(2, t, a.handle, b.handle)
	u.HealthPath = "/ready"
	c, clk, _ := newClient(t, u)
	get := func(n int) {
		t.Helper()
		for range n {
			if resp, err := c.Get(t.Context(), "/x"); err != nil || resp.StatusCode != 200 {
				t.Fatalf("%v %v", resp, err)
			}
		}
	}
	get(50) // the first round of checks ran before the client was returned
	if b.calls.Load() != 0 || a.calls.Load() != 50 {
		t.Fatalf("calls %d and %d: the unhealthy instance was called", a.calls.Load(), b.calls.Load())
	}
	next := func() { // one more round of checks, on the test clock
		t.Helper()
		clk.BlockUntil(1)
		clk.Advance(jhttp.DefaultHealthEvery)
		clk.BlockUntil(1) // the round is over: the next one waits
	}
	b.ready.Store(200)
	next()
	get(100)
	if b.calls.Load() == 0 {
		t.Fatal("the instance was not called again after its check passed")
	}
	a.ready.Store(503)
	b.ready.Store(503)
	next()
	before := a.calls.Load() + b.calls.Load()
	get(20)
	if a.calls.Load()+b.calls.Load() != before+20 {
		t.Fatal("every instance failing its check refused the calls")
	}
}

// An instance whose breaker opened (it failed while it restarted) and that
// then answers its health check gets its breaker closed at once, without
// waiting out the cool-down.
func TestHealthCheckClosesBreaker(t *testing.T) {
	t.Parallel()
	a, b := &replica{}, &replica{}
	a.ready.Store(200)
	b.ready.Store(200)
	failing := newSwitchable(503)
	handleB := func(w http.ResponseWriter, r *http.Request, n int) {
		if r.URL.Path != "/ready" {
			b.calls.Add(1)
			failing.handle(w, r, n)
			return
		}
		b.handle(w, r, n)
	}
	_, u := replicas(2, t, a.handle, handleB)
	u.HealthPath = "/ready"
	u.BreakerFailures = 1
	u.Attempts = 1
	c, clk, _ := newClient(t, u)
	call := func() {
		t.Helper()
		if _, err := c.Get(t.Context(), "/x"); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; b.calls.Load() == 0; i++ {
		if i == 200 {
			t.Fatal("200 calls and none went to the second instance")
		}
		call()
	}
	failing.status.Store(200) // back, but its breaker is open for 15 s
	for range 50 {
		call()
	}
	if b.calls.Load() != 1 {
		t.Fatalf("an instance whose breaker is open was called (%d)", b.calls.Load())
	}
	clk.BlockUntil(1)
	clk.Advance(jhttp.DefaultHealthEvery) // one round of checks: it answers
	clk.BlockUntil(1)
	for i := 0; b.calls.Load() == 1; i++ {
		if i == 200 {
			t.Fatal("the instance was not called again after its health check passed")
		}
		call()
	}
}

// dnsTable is a resolver answering from a table: a host's addresses.
// Nothing is resolved for real.
type dnsTable struct {
	mu      sync.Mutex
	answers map[string][]string
}

func (d *dnsTable) set(host string, addrs ...string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.answers[host] = addrs
}

func (d *dnsTable) lookup(_ context.Context, host string) ([]netip.Addr, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []netip.Addr
	for _, a := range d.answers[host] {
		out = append(out, netip.MustParseAddr(a))
	}
	return out, nil
}

// Every instance failing its health check fails the readiness check
// (degraded) as every breaker open does, while the calls go on (the checks
// are ignored when all fail); one passing again leaves the others named in
// the detail and the check passing.
func TestEveryInstanceUnhealthyInReady(t *testing.T) {
	t.Parallel()
	rs := []*replica{{}, {}, {}}
	for _, r := range rs {
		r.ready.Store(503)
	}
	ups, _ := replicas(3, t, rs[0].handle, rs[1].handle, rs[2].handle)
	toml := `[plugins]
enabled = ["http"]
[plugin.http.upstreams.orders]
base_url = "http://orders.internal:8000"
instances = ["` + ups[0].URL + `", "` + ups[1].URL + `", "` + ups[2].URL + `"]
health_path = "/ready"
`
	clk := jfasttest.NewClock()
	var orders *jhttp.ServiceClient
	svc := jfasttest.Start(t, jfasttest.Options{
		TOML: toml, Plugins: []framework.Plugin{jhttp.New()}, Clock: clk,
		Routes: func(app *framework.App, _ chi.Router) error {
			var err error
			orders, err = jhttp.Client(app, "orders")
			return err
		},
	})
	ready := readyBody(t, svc)
	check := ready.Checks["http"]
	if ready.Status != "degraded" || check.Healthy || !strings.Contains(check.Detail, "every instance of 'orders' is ejected: ") {
		t.Fatalf("every instance unhealthy: status %q, healthy %v, detail %q", ready.Status, check.Healthy, check.Detail)
	}
	for _, up := range ups {
		if !strings.Contains(check.Detail, strings.TrimPrefix(up.URL, "http://")+" (/ready answered 503)") {
			t.Fatalf("detail %q does not name %s", check.Detail, up.URL)
		}
	}
	if resp, err := orders.Get(t.Context(), "/x"); err != nil || resp.StatusCode != 200 {
		t.Fatalf("every instance unhealthy refused the call: %v %v", resp, err)
	}
	rs[1].ready.Store(200)
	clk.BlockUntil(1)
	clk.Advance(jhttp.DefaultHealthEvery)
	clk.BlockUntil(1) // the round is over
	check = readyBody(t, svc).Checks["http"]
	if !check.Healthy || !strings.Contains(check.Detail, "instances of 'orders' ejected: ") || strings.Contains(check.Detail, "every instance") {
		t.Fatalf("one healthy: healthy %v, detail %q", check.Healthy, check.Detail)
	}
}

// The rounds of checks start every health_every from the previous round's
// start: an instance whose check hangs for part of the period (here 3 s of
// the test clock) does not push back the next check of the others.
func TestHealthRoundsKeepTheirPeriod(t *testing.T) {
	t.Parallel()
	var slowChecks, fastChecks atomic.Int64
	hang := make(chan struct{}, 1)    // set: the slow instance's next check hangs
	entered := make(chan struct{}, 1) // its hung check arrived
	release := make(chan struct{})
	slow := func(w http.ResponseWriter, r *http.Request, _ int) {
		if r.URL.Path == "/ready" {
			slowChecks.Add(1)
			select {
			case <-hang:
				entered <- struct{}{}
				<-release
			default:
			}
		}
	}
	fast := func(_ http.ResponseWriter, r *http.Request, _ int) {
		if r.URL.Path == "/ready" {
			fastChecks.Add(1)
		}
	}
	_, u := replicas(2, t, slow, fast)
	u.HealthPath = "/ready"
	u.HealthTimeout = time.Minute // the check ends when the test releases it, not on the real clock
	_, clk, _ := newClient(t, u)
	if slowChecks.Load() != 1 || fastChecks.Load() != 1 {
		t.Fatalf("checks at start %d and %d", slowChecks.Load(), fastChecks.Load())
	}
	hang <- struct{}{}
	clk.BlockUntil(1)
	clk.Advance(jhttp.DefaultHealthEvery) // round 2: the slow instance's check hangs
	<-entered
	clk.Advance(3 * time.Second) // while it hangs
	close(release)
	clk.BlockUntil(1) // round 2 is over
	clk.Advance(jhttp.DefaultHealthEvery - 3*time.Second)
	clk.BlockUntil(1) // round 3, due health_every after round 2 started, is over
	if slowChecks.Load() != 3 || fastChecks.Load() != 3 {
		t.Fatalf("checks after two periods %d and %d, want 3 each", slowChecks.Load(), fastChecks.Load())
	}
}

// health_path with a one-entry instances list (the deploy key can shrink a
// file's list to one) is accepted: the instance failing its check is still
// called, there being no other, and fails the readiness check.
func TestHealthPathWithOneInstance(t *testing.T) {
	t.Parallel()
	r := &replica{}
	r.ready.Store(503)
	ups, _ := replicas(1, t, r.handle)
	toml := `[plugins]
enabled = ["http"]
[plugin.http.upstreams.orders]
base_url = "http://orders.internal:8000"
instances = ["` + ups[0].URL + `"]
health_path = "/ready"
`
	var orders *jhttp.ServiceClient
	svc := jfasttest.Start(t, jfasttest.Options{
		TOML: toml, Plugins: []framework.Plugin{jhttp.New()}, Clock: jfasttest.NewClock(),
		Routes: func(app *framework.App, _ chi.Router) error {
			var err error
			orders, err = jhttp.Client(app, "orders")
			return err
		},
	})
	if resp, err := orders.Get(t.Context(), "/x"); err != nil || resp.StatusCode != 200 || r.calls.Load() != 1 {
		t.Fatalf("the one instance, failing its check, was not called: %v %v", resp, err)
	}
	if check := readyBody(t, svc).Checks["http"]; check.Healthy || !strings.Contains(check.Detail, "every instance of 'orders' is ejected") {
		t.Fatalf("healthy %v, detail %q", check.Healthy, check.Detail)
	}
}
