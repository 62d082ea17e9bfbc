package grpc_test

import (
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"

	"github.com/jfastframework/jfast/examples/inventory/shoppb"
	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/framework/resilience"
	"github.com/jfastframework/jfast/jfasttest"
	jgrpc "github.com/jfastframework/jfast/plugins/grpc"
)

// instanceServer is one instance of the inventory on loopback, with a stop
// that kills it before the test ends.
type instanceServer struct {
	inv  *inventory
	addr string
	stop func()
}

func serveInstances(t *testing.T, n int) []*instanceServer {
	t.Helper()
	out := make([]*instanceServer, n)
	for i := range out {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		s := &instanceServer{inv: &inventory{}}
		s.addr, s.stop = serveOn(t, ln, s.inv)
		out[i] = s
	}
	return out
}

func addrsOf(list []*instanceServer) []string {
	out := make([]string, len(list))
	for i, s := range list {
		out[i] = s.addr
	}
	return out
}

// An instance that answers every call with UNAVAILABLE is ejected after
// exactly breaker_failures of them, each retried on another instance (no
// call fails), and gets no call while its breaker is open; the others
// keep serving.
func TestInstanceThatFailsIsEjected(t *testing.T) {
	t.Parallel()
	clock := jfasttest.NewClock()
	clock.SetAutoAdvance(true) // the retries' backoff waits
	srv := serveInstances(t, 3)
	c := newClient(t, jgrpc.Upstream{Instances: addrsOf(srv), IdempotentMethods: []string{getStock}}, jgrpc.WithClock(clock))
	// round_robin: every instance gets calls.
	bad := ejectSecond(t, c, srv)
	for addr, b := range c.Instances() {
		if addr != bad.addr && b.Snapshot().State != resilience.StateClosed {
			t.Fatalf("instance %s: breaker %s, want closed", addr, b.Snapshot().State)
		}
	}
}

// With one of three instances ejected, round_robin takes turns among the
// two that take calls: 60 calls in a row go 30 and 30 (before, the
// ejected instance's turn skipped the one after it: 45 and 15).
func TestRoundRobinAroundAnEjectedInstanceIsEven(t *testing.T) {
	t.Parallel()
	clock := jfasttest.NewClock()
	clock.SetAutoAdvance(true) // the retries' backoff waits
	srv := serveInstances(t, 3)
	c := newClient(t, jgrpc.Upstream{Instances: addrsOf(srv), IdempotentMethods: []string{getStock}}, jgrpc.WithClock(clock))
	ejectSecond(t, c, srv)
	first, third := srv[0].inv.getStocks.Load(), srv[2].inv.getStocks.Load()
	const calls = 60
	n := 0
	getUntil(t, c, func() bool { n++; return n > calls })
	a, b := srv[0].inv.getStocks.Load()-first, srv[2].inv.getStocks.Load()-third
	if a+b != calls || a != calls/2 || b != calls/2 {
		t.Errorf("%d calls with the second instance ejected: %d to the first, %d to the third; want %d each", calls, a, b, calls/2)
	}
}

// ejectSecond has c spread calls over the three servers, then makes the
// second answer every call with UNAVAILABLE: it must get exactly
// breaker_failures calls before its breaker opens (none failing, each
// retried elsewhere) and none of the next 30 while the breaker is open.
// It returns the second server.
func ejectSecond(t *testing.T, c *jgrpc.ServiceClient, srv []*instanceServer) *instanceServer {
	t.Helper()
	getUntil(t, c, func() bool {
		return srv[0].inv.getStocks.Load() >= 10 && srv[1].inv.getStocks.Load() >= 10 && srv[2].inv.getStocks.Load() >= 10
	})
	bad := srv[1]
	before := bad.inv.getStocks.Load()
	bad.inv.failGetStock.Store(1 << 20)
	br := c.Instances()[bad.addr]
	getUntil(t, c, func() bool { return br.Snapshot().State == resilience.StateOpen })
	failures := resilience.DefaultBreakerFailures
	if got := bad.inv.getStocks.Load() - before; int(got) != failures {
		t.Fatalf("the failing instance got %d calls before its breaker opened, want breaker_failures = %d", got, failures)
	}
	ejectedAt := bad.inv.getStocks.Load()
	others := srv[0].inv.getStocks.Load() + srv[2].inv.getStocks.Load()
	getUntil(t, c, func() bool { return srv[0].inv.getStocks.Load()+srv[2].inv.getStocks.Load() >= others+30 })
	if got := bad.inv.getStocks.Load(); got != ejectedAt {
		t.Fatalf("the ejected instance got %d calls while its breaker was open", got-ejectedAt)
	}
	return bad
}

// A service whose upstream lists three instances (from the environment,
// comma-separated): one killed, every request is still answered, the
// killed instance's breaker opens and /ready names it, passing; every
// instance killed, requests get a 503 naming the upstream and /ready
// says every instance is ejected (degraded, never unavailable).
func TestInstancesKilledInAService(t *testing.T) {
	// Not parallel: it frees ports while its client still dials them, and
	// a parallel test's server given one of them would get its calls.
	clock := jfasttest.NewClock()
	clock.SetAutoAdvance(true)
	srv := serveInstances(t, 3)
	svc := jfasttest.Start(t, jfasttest.Options{
		TOML: `
[plugins]
enabled = ["grpc"]
[plugin.grpc.upstreams.inventory]
insecure = true
idempotent_methods = ["/shop.Inventory/GetStock"]
`,
		Env:     map[string]string{"JFAST_GRPC_UPSTREAMS__INVENTORY__INSTANCES": strings.Join(addrsOf(srv), ",")},
		Plugins: []framework.Plugin{jgrpc.New()},
		Clock:   clock,
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
				return framework.JSON(w, http.StatusOK, map[string]any{"available": stock.GetAvailable()})
			}))
			return nil
		},
	})
	type instanceMeta struct {
		Breaker struct {
			State string `json:"state"`
		} `json:"breaker"`
		Channel string `json:"channel"`
	}
	var ready struct {
		Status string `json:"status"`
		Checks map[string]struct {
			Healthy bool   `json:"healthy"`
			Detail  string `json:"detail"`
			Meta    struct {
				Upstreams map[string]struct {
					Instances map[string]instanceMeta `json:"instances"`
				} `json:"upstreams"`
			} `json:"meta"`
		} `json:"checks"`
	}
	readReady := func() map[string]instanceMeta {
		t.Helper()
		resp := svc.Get(t, "/ready")
		if resp.Status != http.StatusOK {
			t.Fatalf("/ready = %d: %s", resp.Status, resp.Body)
		}
		ready.Checks = nil
		if err := json.Unmarshal(resp.Body, &ready); err != nil {
			t.Fatal(err)
		}
		return ready.Checks["grpc"].Meta.Upstreams["inventory"].Instances
	}
	bound := ctxFor(t) // a bug must not loop for ever
	get := func() jfasttest.Response {
		t.Helper()
		if bound.Err() != nil {
			t.Fatal("the state awaited never came")
		}
		return svc.Get(t, "/stock/a")
	}
	// 10 calls per instance first: the retry budget (a fifth of the calls)
	// then grants the retries of the calls that meet the killed instance.
	for get(); srv[0].inv.getStocks.Load() < 10 || srv[1].inv.getStocks.Load() < 10 || srv[2].inv.getStocks.Load() < 10; {
		if resp := get(); resp.Status != http.StatusOK {
			t.Fatalf("GET = %d: %s", resp.Status, resp.Body)
		}
	}
	if in := readReady(); len(in) != 3 || ready.Status != "ok" {
		t.Fatalf("/ready with three instances: %s %+v", ready.Status, in)
	}

	killed := srv[1]
	killed.stop()
	for readReady()[killed.addr].Breaker.State != "open" {
		if resp := get(); resp.Status != http.StatusOK {
			t.Fatalf("GET with one instance killed = %d: %s", resp.Status, resp.Body)
		}
	}
	in := readReady()
	check := ready.Checks["grpc"]
	if ready.Status != "ok" || !check.Healthy || !strings.Contains(check.Detail, "ejected: "+killed.addr) {
		t.Fatalf("/ready with one instance ejected: %s %+v", ready.Status, check)
	}
	for _, s := range []*instanceServer{srv[0], srv[2]} {
		if in[s.addr].Breaker.State != "closed" {
			t.Fatalf("live instance %s: %+v", s.addr, in[s.addr])
		}
	}

	srv[0].stop()
	srv[2].stop()
	var last jfasttest.Response
	for {
		last = get()
		if last.Status != http.StatusServiceUnavailable {
			if last.Status != http.StatusOK { // a call already on its way when the kill came
				t.Fatalf("GET with every instance killed = %d: %s", last.Status, last.Body)
			}
			continue
		}
		var p problemBody
		if err := json.Unmarshal(last.Body, &p); err != nil || p.Upstream != "inventory" || !strings.Contains(p.Detail, "'inventory'") {
			t.Fatalf("503 = %s, want the upstream named", last.Body)
		}
		if readReady(); ready.Status == "degraded" {
			break
		}
	}
	check = ready.Checks["grpc"]
	if check.Healthy || !strings.Contains(check.Detail, "every instance of 'inventory' is ejected") {
		t.Fatalf("/ready with every instance killed: %+v", check)
	}
}

// An instance whose connection is lost while its breaker is still closed
// (breaker_failures not reached) gets no call while another is connected,
// and /ready's detail names it, beside its channel in the meta.
func TestInstanceNotConnectedIsNamedInReady(t *testing.T) {
	// Not parallel: it frees a port while its client still dials it.
	srv := serveInstances(t, 2)
	svc := stockService(t, "[plugins]\nenabled = [\"grpc\"]\n[plugin.grpc.upstreams.inventory]\ninsecure = true\nbreaker_failures = 1000\n"+
		"idempotent_methods = [\"/shop.Inventory/GetStock\"]\ninstances = [\""+strings.Join(addrsOf(srv), "\", \"")+"\"]\n", nil)
	for srv[0].inv.getStocks.Load() == 0 || srv[1].inv.getStocks.Load() == 0 { // both channels connected
		svc.Get(t, "/stock/a")
	}
	gone := srv[1]
	gone.stop()
	bound := ctxFor(t) // a bug must not loop for ever
	for {
		if bound.Err() != nil {
			t.Fatal("the killed instance's channel never showed as not connected")
		}
		svc.Get(t, "/stock/a") // each call lets the channel see its loss
		r := svc.Get(t, "/ready")
		if !strings.Contains(r.String(), `"transient_failure"`) {
			continue
		}
		if r.Status != http.StatusOK || !strings.Contains(r.String(), "instances of 'inventory' not connected") || !strings.Contains(r.String(), gone.addr) {
			t.Fatalf("/ready with an instance not connected, its breaker closed: %d %s", r.Status, r)
		}
		return
	}
}

// The call whose failure opens the last instance's breaker carries the
// soonest cool-down as its Retry-After, as the calls the upstream then
// refuses do; a failure that leaves an instance in service carries none.
func TestCallThatEjectsTheLastInstanceCarriesRetryAfter(t *testing.T) {
	t.Parallel()
	clock := jfasttest.NewClock()
	c := newClient(t, jgrpc.Upstream{Instances: []string{jfasttest.RefusedAddr(t), jfasttest.RefusedAddr(t)},
		PolicyConfig: resilience.PolicyConfig{Attempts: 1, BreakerConfig: resilience.BreakerConfig{BreakerFailures: 1}}},
		jgrpc.WithClock(clock))
	var e *jgrpc.Error
	if err := c.Invoke(ctxFor(t), getStock, &shoppb.GetStockRequest{Sku: "a"}, &shoppb.Stock{}); !errors.As(err, &e) || e.RetryAfter != 0 {
		t.Fatalf("the first refused call: %v, want an error without a wait (one instance is left)", err)
	}
	err := c.Invoke(ctxFor(t), getStock, &shoppb.GetStockRequest{Sku: "a"}, &shoppb.Stock{})
	if !errors.As(err, &e) || e.Kind != jgrpc.KindStatus || e.RetryAfter != resilience.DefaultBreakerCoolDown {
		t.Fatalf("the call that ejected the last instance: %v (Retry-After %v), want its own failure with the cool-down", err, e.RetryAfter)
	}
	if err := c.Invoke(ctxFor(t), getStock, &shoppb.GetStockRequest{Sku: "a"}, &shoppb.Stock{}); !errors.As(err, &e) || e.Kind != jgrpc.KindCircuitOpen || e.RetryAfter != resilience.DefaultBreakerCoolDown {
		t.Fatalf("the call after it: %v, want KindCircuitOpen with the cool-down", err)
	}
}

func TestInstancesConfigErrors(t *testing.T) {
	t.Parallel()
	const table = "[plugins]\nenabled = [\"grpc\"]\n[plugin.grpc.upstreams.inventory]\ninsecure = true\nattempts = 1\n"
	for _, tc := range []struct{ toml, key, says string }{
		{"target = \"inventory:9000\"\ninstances = [\"127.0.0.1:9000\"]", "instances", "target"},
		{`instances = ["dns:///inventory:9000"]`, "instances[0]", "host:port"},
		{`instances = ["127.0.0.1:9000", "127.0.0.1:9000"]`, "instances[1]", `address of instances[0] again, "127.0.0.1:9000"`},
		{`instances = ["LOCALHOST:9000", "10.0.0.7:9000", "localhost:09000"]`, "instances[2]", `address of instances[0] again, "LOCALHOST:9000"`},
		{`instances = ["[::1]:9000", "[0:0::1]:9000"]`, "instances[1]", "address of instances[0] again"},
		{`instances = ["10.0.0.7:9000", "[::ffff:10.0.0.7]:9000"]`, "instances[1]", `address of instances[0] again, "10.0.0.7:9000"`},
		{`instances = ["127.0.0.1:99999"]`, "instances[0]", `"127.0.0.1:99999" has port 99999, which is not a TCP port: a port is from 1 to 65535`},
		{`instances = ["127.0.0.1:9000", "127.0.0.2:0"]`, "instances[1]", "has port 0"},
		{`target = "inventory:99999"`, "target", "has port 99999"},
		{`target = "dns:///inventory:0"`, "target", "has port 0"},
		{"discover = true\ntarget = \"dns:///inventory:65536\"", "target", "has port 65536"},
		{"", "target", "missing"},
		{"discover = true\ninstances = [\"127.0.0.1:9000\"]", "discover", "instances"},
		{"discover = true\ntarget = \"unix:///run/inventory.sock\"", "discover", "DNS name"},
		{"discover = true\ntarget = \"dns:///inventory\"", "target", "host:port"},
		{"discover = true\ntarget = \"inventory:9000\"\nresolve_every = \"0s\"", "resolve_every", ""},
		{"target = \"dns:///inventory:9000\"\nresolve_every = \"10s\"", "resolve_every", "discover is false"},
	} {
		e := jfasttest.ConfigErrors(t, jfasttest.Options{TOML: table + tc.toml + "\n", Plugins: []framework.Plugin{jgrpc.New()}}).
			Only(t, "plugin.grpc.upstreams.inventory."+tc.key)
		if !strings.Contains(e.Problem, tc.says) {
			t.Errorf("%s: %q does not say %q", tc.key, e.Problem, tc.says)
		}
	}
	if _, err := jgrpc.NewClient(jgrpc.Upstream{Target: "a:1", Instances: []string{"b:1"}, Insecure: true, PolicyConfig: resilience.PolicyConfig{Attempts: 1}}); err == nil ||
		!strings.Contains(err.Error(), "instances") {
		t.Fatalf("NewClient with target and instances: %v", err)
	}
}

// A stream picks an instance like a unary call and stays on it: streams
// reach every instance, each delivers 1, 2, 3, and a stream to an instance
// whose breaker is open is never opened.
func TestInstancesStreams(t *testing.T) {
	// Not parallel: it frees ports while its client still dials them, and
	// a parallel test's server given one of them would get its calls.
	srv := serveInstances(t, 2)
	u := jgrpc.Upstream{Instances: addrsOf(srv), PolicyConfig: resilience.PolicyConfig{Attempts: 1}}
	u.BreakerFailures = 1
	c := newClient(t, u, jgrpc.WithClock(jfasttest.NewClock()))
	stub := shoppb.NewInventoryClient(c)
	export := func() []int64 {
		t.Helper()
		stream, err := stub.Export(ctxFor(t), &shoppb.ExportRequest{})
		if err != nil {
			t.Fatal(err)
		}
		var seqs []int64
		for {
			item, err := stream.Recv()
			if err != nil {
				if !errors.Is(err, io.EOF) {
					t.Fatal(err)
				}
				return seqs
			}
			seqs = append(seqs, item.GetSeq())
		}
	}
	for srv[0].inv.exports.Load() == 0 || srv[1].inv.exports.Load() == 0 {
		if got := export(); !slices.Equal(got, []int64{1, 2, 3}) {
			t.Fatalf("stream delivered %v", got)
		}
	}
	srv[1].stop()
	// A unary call on the stopped instance opens its breaker (one failure).
	ctx := ctxFor(t)
	for c.Instances()[srv[1].addr].Snapshot().State != resilience.StateOpen {
		if ctx.Err() != nil {
			t.Fatal("the stopped instance's breaker never opened")
		}
		_ = c.Invoke(ctx, getStock, &shoppb.GetStockRequest{Sku: "a"}, &shoppb.Stock{})
	}
	before := srv[0].inv.exports.Load()
	for range 10 {
		if got := export(); !slices.Equal(got, []int64{1, 2, 3}) {
			t.Fatalf("stream with one instance ejected delivered %v", got)
		}
	}
	if got := srv[0].inv.exports.Load() - before; got != 10 {
		t.Fatalf("the live instance served %d of 10 streams", got)
	}
}

// An instance killed and started again on its address (a rolling restart)
// is called again as soon as its channel connects, long before its
// breaker's cool-down has passed on the test clock: a fresh breaker
// replaces the open one.
func TestInstanceBackBeforeItsCoolDown(t *testing.T) {
	// Not parallel: it frees ports while its client still dials them, and
	// a parallel test's server given one of them would get its calls.
	clock := jfasttest.NewClock()
	clock.SetAutoAdvance(true)
	srv := serveInstances(t, 2)
	c := newClient(t, jgrpc.Upstream{Instances: addrsOf(srv), IdempotentMethods: []string{getStock}}, jgrpc.WithClock(clock))
	getUntil(t, c, func() bool { return srv[0].inv.getStocks.Load() >= 10 && srv[1].inv.getStocks.Load() >= 10 })
	back := srv[1]
	back.stop()
	getUntil(t, c, func() bool { return c.Instances()[back.addr].Snapshot().State == resilience.StateOpen })
	openedAt := clock.Now()

	ln, err := net.Listen("tcp", back.addr)
	if err != nil {
		t.Fatal(err)
	}
	again := &inventory{}
	serveOn(t, ln, again)
	getUntil(t, c, func() bool { return again.getStocks.Load() > 0 })
	if waited := clock.Now().Sub(openedAt); waited >= resilience.DefaultBreakerCoolDown {
		t.Fatalf("the instance was called again after %s, not before the cool-down (%s)", waited, resilience.DefaultBreakerCoolDown)
	}
	if s := c.Instances()[back.addr].Snapshot(); s.State != resilience.StateClosed {
		t.Fatalf("the instance's breaker is %s once it answers again", s.State)
	}
}

// An instance that connects again is taken back when it connects, with no
// call to notice it: its open breaker is replaced by a closed one, so
// /ready, the status page and the breaker gauge say it is back, and the
// log line has the time it connected.
func TestInstanceBackWithoutACall(t *testing.T) {
	// Not parallel: it frees a port while its client still dials it (see
	// TestInstanceBackBeforeItsCoolDown).
	clock := jfasttest.NewClock()
	clock.SetAutoAdvance(true)
	var logs jfasttest.Logs
	srv := serveInstances(t, 2)
	c := newClient(t, jgrpc.Upstream{Instances: addrsOf(srv), IdempotentMethods: []string{getStock}},
		jgrpc.WithClock(clock), jgrpc.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	getUntil(t, c, func() bool { return srv[0].inv.getStocks.Load() >= 10 && srv[1].inv.getStocks.Load() >= 10 })
	back := srv[1]
	back.stop()
	getUntil(t, c, func() bool { return c.Instances()[back.addr].Snapshot().State == resilience.StateOpen })

	ln, err := net.Listen("tcp", back.addr)
	if err != nil {
		t.Fatal(err)
	}
	again := &inventory{}
	serveOn(t, ln, again)
	// No call: the channel reconnects on its own (its backoff after a
	// loss), and that alone brings the instance back.
	if err := logs.Wait(ctxFor(t), func(l string) bool {
		return strings.Contains(l, "upstream instance connects again") && strings.Contains(l, back.addr)
	}); err != nil {
		t.Fatalf("no \"connects again\" line without a call: %v\n%s", err, logs.String())
	}
	if s := c.Instances()[back.addr].Snapshot(); s.State != resilience.StateClosed {
		t.Fatalf("the instance's breaker is %s once its channel connected again", s.State)
	}
	if n := again.getStocks.Load(); n != 0 {
		t.Fatalf("the restarted instance got %d calls; the test makes none", n)
	}
}

// balancing over instances: round_robin and least_request reach every
// instance; pick_first sends every call to the first one listed.
func TestInstancesBalancing(t *testing.T) {
	t.Parallel()
	for _, balancing := range []string{jgrpc.BalanceRoundRobin, jgrpc.BalanceLeastRequest, jgrpc.BalancePickFirst} {
		t.Run(balancing, func(t *testing.T) {
			t.Parallel()
			srv := serveInstances(t, 3)
			c := newClient(t, jgrpc.Upstream{Instances: addrsOf(srv), Balancing: balancing, IdempotentMethods: []string{getStock}})
			total := func() int32 {
				return srv[0].inv.getStocks.Load() + srv[1].inv.getStocks.Load() + srv[2].inv.getStocks.Load()
			}
			if balancing == jgrpc.BalancePickFirst {
				// pick_first takes the first listed instance that is
				// connected: until its channel is (a loaded machine can
				// connect another first), a call may go elsewhere. Wait for
				// that event, then count.
				getUntil(t, c, func() bool { return srv[0].inv.getStocks.Load() > 0 })
				before, all := srv[0].inv.getStocks.Load(), total()
				ctx := ctxFor(t)
				for range 30 {
					if err := c.Invoke(ctx, getStock, &shoppb.GetStockRequest{Sku: "a"}, &shoppb.Stock{}); err != nil {
						t.Fatal(err)
					}
				}
				if n := srv[0].inv.getStocks.Load() - before; n != 30 {
					t.Fatalf("pick_first: the first instance got %d of 30 calls (%d in all)", n, total()-all)
				}
				return
			}
			getUntil(t, c, func() bool {
				return srv[0].inv.getStocks.Load() > 0 && srv[1].inv.getStocks.Load() > 0 && srv[2].inv.getStocks.Load() > 0
			})
		})
	}
}

// A call whose attempts were sent and failed, each ejecting its instance,
// and whose next retry then finds every instance open, returns the last
// sent attempt's failure (UNAVAILABLE, KindStatus) with the soonest
// cool-down as its Retry-After, as the call that ejects the last instance
// does; not KindCircuitOpen, which says nothing was sent. The retry that
// found no instance is no attempt sent and no retry, in the error and in
// the metrics. Hedged or not, the loop is the same.
func TestEjectingCallReturnsWhatWasSent(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, hedgeAfter string }{{"sequential", ""}, {"hedged", "20ms"}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			clock := jfasttest.NewClock()
			clock.SetAutoAdvance(true) // the retries' backoff waits
			srv := serveInstances(t, 2)
			srv[0].inv.failGetStock.Store(1 << 20)
			srv[1].inv.failGetStock.Store(1 << 20)
			reg := prometheus.NewRegistry()
			u := jgrpc.Upstream{Name: "inventory", Instances: addrsOf(srv), IdempotentMethods: []string{getStock},
				PolicyConfig: resilience.PolicyConfig{HedgeAfter: tc.hedgeAfter, RetryBudgetRatio: 1, RetryBudgetMinPerSecond: 1000}}
			u.BreakerFailures = 1 // attempts stays at its default, 3: the third finds both open
			c := newClient(t, u, jgrpc.WithClock(clock), jgrpc.WithMetrics(reg))
			var e *jgrpc.Error
			err := c.Invoke(ctxFor(t), getStock, &shoppb.GetStockRequest{Sku: "a"}, &shoppb.Stock{})
			if !errors.As(err, &e) || e.Kind != jgrpc.KindStatus || e.Code != codes.Unavailable || e.Attempts != 2 ||
				e.RetryAfter <= 0 || e.RetryAfter > resilience.DefaultBreakerCoolDown {
				t.Fatalf("%v (%+v), want the second attempt's UNAVAILABLE after 2 attempts, the cool-down left as its Retry-After", err, e)
			}
			// The backoff moved the test clock: the soonest cool-down has
			// that much less left, which the next call, refused, is told too.
			ra := e.RetryAfter
			if err := c.Invoke(ctxFor(t), getStock, &shoppb.GetStockRequest{Sku: "a"}, &shoppb.Stock{}); !errors.As(err, &e) ||
				e.Kind != jgrpc.KindCircuitOpen || e.RetryAfter != ra {
				t.Fatalf("the next call: %v, want KindCircuitOpen with the same Retry-After (%v)", err, ra)
			}
			for name, want := range map[string]float64{"jfast_client_attempts_total": 2, "jfast_client_retries_total": 1, "jfast_client_hedges_total": 0} {
				if got := jfasttest.Metric(t, reg, name, "plugin", "grpc", "dependency", "inventory"); got != want {
					t.Errorf("%s = %v, want %v", name, got, want)
				}
			}
			if got := jfasttest.Metric(t, reg, "jfast_client_calls_total", "outcome", "UNAVAILABLE"); got != 1 {
				t.Errorf("UNAVAILABLE calls %v, want the first call", got)
			}
			if a, b := srv[0].inv.getStocks.Load(), srv[1].inv.getStocks.Load(); a != 1 || b != 1 {
				t.Errorf("the instances got %d and %d calls, want one each", a, b)
			}
		})
	}
}
