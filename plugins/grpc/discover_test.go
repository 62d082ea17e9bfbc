package grpc_test

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"

	"github.com/jfastframework/jfast/examples/inventory/shoppb"
	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/framework/resilience"
	"github.com/jfastframework/jfast/jfasttest"
	jgrpc "github.com/jfastframework/jfast/plugins/grpc"
	"github.com/jfastframework/jfast/problem"
)

// serveLoopbacks serves an inventory on each of 127.0.0.1, 127.0.0.2 and
// 127.0.0.3 at one port (Linux routes all of 127.0.0.0/8 to lo), as the
// replicas behind a headless Service's name listen on one port each, and
// returns them with that port.
func serveLoopbacks(t *testing.T) ([]*instanceServer, string) {
	t.Helper()
	ips := []string{"127.0.0.1", "127.0.0.2", "127.0.0.3"}
	for range 5 { // the port 127.0.0.1 got may be taken on another address
		first, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		_, port, _ := net.SplitHostPort(first.Addr().String())
		lns := []net.Listener{first}
		for _, ip := range ips[1:] {
			ln, err := net.Listen("tcp", net.JoinHostPort(ip, port))
			if err != nil {
				break
			}
			lns = append(lns, ln)
		}
		if len(lns) < len(ips) {
			for _, ln := range lns {
				_ = ln.Close()
			}
			continue
		}
		out := make([]*instanceServer, len(lns))
		for i, ln := range lns {
			s := &instanceServer{inv: &inventory{}}
			s.addr, s.stop = serveOn(t, ln, s.inv)
			out[i] = s
		}
		return out, port
	}
	t.Fatal("no port free on 127.0.0.1, 127.0.0.2 and 127.0.0.3 at once")
	return nil, ""
}

// dnsTable answers for one name with the addresses it holds, as a DNS
// server would for a headless Service; the test changes them.
type dnsTable struct {
	name  string
	addrs atomic.Pointer[[]netip.Addr]
}

func (d *dnsTable) set(ips ...string) {
	list := make([]netip.Addr, len(ips))
	for i, ip := range ips {
		list[i] = netip.MustParseAddr(ip)
	}
	d.addrs.Store(&list)
}

func (d *dnsTable) lookup(_ context.Context, host string) ([]netip.Addr, error) {
	if host != d.name {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	return *d.addrs.Load(), nil
}

// resolveAgain makes the client resolve its name once more and returns
// when that resolution is over: the resolver's timer is the only one on
// the clock between calls.
func resolveAgain(t *testing.T, clock *resilience.TestClock) {
	t.Helper()
	ctx := ctxFor(t)
	if err := clock.BlockUntilContext(ctx, 1); err != nil {
		t.Fatal("the resolver is not waiting for its next resolution")
	}
	clock.Advance(jgrpc.DefaultResolveEvery)
	if err := clock.BlockUntilContext(ctx, 1); err != nil {
		t.Fatal("the resolution did not end")
	}
}

func instanceAddrs(c *jgrpc.ServiceClient) []string {
	var out []string
	for addr := range c.Instances() {
		out = append(out, addr)
	}
	slices.Sort(out)
	return out
}

// With discover = true every address the target's name resolves to is an
// instance with a channel and a breaker of its own: one that answers every
// call with UNAVAILABLE is ejected after breaker_failures of them while no
// call fails; an address the name no longer resolves to loses its channel;
// a name resolved to one address still serves.
func TestDiscoveredInstances(t *testing.T) {
	t.Parallel()
	clock := jfasttest.NewClock()
	clock.SetAutoAdvance(true) // the retries' backoff waits
	srv, port := serveLoopbacks(t)
	dns := &dnsTable{name: "inventory.test"}
	dns.set("127.0.0.1", "127.0.0.2", "127.0.0.3")
	pool := jgrpc.NewPool()
	t.Cleanup(func() { _ = pool.Close() })
	c := newClient(t, jgrpc.Upstream{Target: "dns:///inventory.test:" + port, Discover: true, IdempotentMethods: []string{getStock}},
		jgrpc.WithClock(clock), jgrpc.WithLookup(dns.lookup), jgrpc.WithPool(pool))
	if got, want := instanceAddrs(c), addrsOf(srv); !slices.Equal(got, want) {
		t.Fatalf("instances after the first resolution: %v, want %v", got, want)
	}
	if pool.Len() != 3 {
		t.Fatalf("%d channels for 3 instances", pool.Len())
	}
	bad := ejectSecond(t, c, srv)
	br := c.Instances()[bad.addr]

	// 127.0.0.3 leaves the name: its channel is closed, the others serve.
	dns.set("127.0.0.1", "127.0.0.2")
	resolveAgain(t, clock)
	if got, want := instanceAddrs(c), addrsOf(srv[:2]); !slices.Equal(got, want) {
		t.Fatalf("instances after 127.0.0.3 left: %v, want %v", got, want)
	}
	if pool.Len() != 2 {
		t.Fatalf("%d channels for 2 instances: the gone address's is not closed", pool.Len())
	}
	if c.Instances()[bad.addr] != br {
		t.Fatal("an address still resolved lost its breaker on the re-resolution")
	}
	gone := srv[2].inv.getStocks.Load()
	first := srv[0].inv.getStocks.Load()
	getUntil(t, c, func() bool { return srv[0].inv.getStocks.Load() >= first+10 })
	if got := srv[2].inv.getStocks.Load(); got != gone {
		t.Fatalf("the address no longer resolved got %d calls", got-gone)
	}

	// One address: it serves alone.
	dns.set("127.0.0.1")
	resolveAgain(t, clock)
	if got, want := instanceAddrs(c), addrsOf(srv[:1]); !slices.Equal(got, want) || pool.Len() != 1 {
		t.Fatalf("instances after the name resolved to one: %v (%d channels), want %v", got, pool.Len(), want)
	}
	first = srv[0].inv.getStocks.Load()
	getUntil(t, c, func() bool { return srv[0].inv.getStocks.Load() >= first+10 })

	// A resolution that finds no address keeps the set.
	dns.set()
	resolveAgain(t, clock)
	if got := instanceAddrs(c); len(got) != 1 {
		t.Fatalf("instances after a failed resolution: %v, want the previous one", got)
	}
}

// A name that never resolves leaves the upstream without an instance: the
// client is made (the name may appear later), and a call fails naming the
// resolution's error.
func TestDiscoveredNameUnresolved(t *testing.T) {
	t.Parallel()
	dns := &dnsTable{name: "other.test"}
	dns.set("127.0.0.1")
	c := newClient(t, jgrpc.Upstream{Name: "inventory", Target: "dns:///inventory.test:9000", Discover: true, PolicyConfig: resilience.PolicyConfig{Attempts: 1}},
		jgrpc.WithClock(jfasttest.NewClock()), jgrpc.WithLookup(dns.lookup))
	if n := len(c.Instances()); n != 0 {
		t.Fatalf("%d instances for a name that does not resolve", n)
	}
	err := c.Invoke(ctxFor(t), getStock, nil, nil)
	var e *jgrpc.Error
	if !errors.As(err, &e) || !strings.Contains(err.Error(), "no instance") || !strings.Contains(err.Error(), "inventory.test") {
		t.Fatalf("call with no instance: %v", err)
	}
	// Nothing was sent: an outage (503 naming the upstream), not an answer
	// of the upstream's (UNKNOWN, a 502).
	p, ok := problem.As(err)
	if e.Code != codes.Unavailable || !e.Outage() || !ok || p.Status != 503 || p.Extensions["dependency"] != "inventory" ||
		p.Detail != "upstream 'inventory' has no instance to call (/shop.Inventory/GetStock was not sent)" {
		t.Fatalf("call with no instance: code %s, outage %v, problem %+v; want UNAVAILABLE, a 503 naming inventory and what was not sent", e.Code, e.Outage(), p)
	}
	// A stream meets the same, not the open breaker's error.
	_, err = c.NewStream(ctxFor(t), &grpc.StreamDesc{ServerStreams: true}, "/shop.Inventory/Watch")
	if !errors.As(err, &e) || e.Kind != jgrpc.KindStatus || e.Code != codes.Unavailable || !strings.Contains(err.Error(), "has no instance") {
		t.Fatalf("stream with no instance: %v, want UNAVAILABLE saying there is no instance", err)
	}
}

// In a service, /ready lists a discovered upstream's name, its last
// resolution and its instances. The name is an address (127.0.0.1), which
// resolves to itself without a lookup: nothing is asked of a DNS server.
func TestDiscoveredInstancesInReady(t *testing.T) {
	t.Parallel()
	addr := serveInventory(t, &inventory{})
	_, port, _ := net.SplitHostPort(addr)
	svc := jfasttest.Start(t, jfasttest.Options{
		TOML: `
[plugins]
enabled = ["grpc"]
[plugin.grpc.upstreams.inventory]
target = "dns:///127.0.0.1:` + port + `"
discover = true
insecure = true
attempts = 1
`,
		Plugins: []framework.Plugin{jgrpc.New()},
	})
	resp := svc.Get(t, "/ready")
	var ready struct {
		Checks map[string]struct {
			Meta struct {
				Upstreams map[string]struct {
					Discover  string                     `json:"discover"`
					Resolved  string                     `json:"resolved"`
					Instances map[string]json.RawMessage `json:"instances"`
				} `json:"upstreams"`
			} `json:"meta"`
		} `json:"checks"`
	}
	if err := json.Unmarshal(resp.Body, &ready); err != nil {
		t.Fatal(err)
	}
	up := ready.Checks["grpc"].Meta.Upstreams["inventory"]
	if up.Discover != "127.0.0.1:"+port || up.Resolved == "" || up.Instances["127.0.0.1:"+port] == nil {
		t.Fatalf("/ready of a discovered upstream: %s", resp.Body)
	}
}

// A discovered instance's certificate is verified for the target's name,
// not the address dialled; server_name, when set, wins.
func TestDiscoveredInstanceTLS(t *testing.T) {
	t.Parallel()
	caFile, cert := certificates(t, "inventory.internal")
	addr := serveInventory(t, &inventory{}, grpc.Creds(credentials.NewServerTLSFromCert(&cert)))
	_, port, _ := net.SplitHostPort(addr)
	dns := &dnsTable{name: "inventory.internal"}
	dns.set("127.0.0.1")
	call := func(serverName string) error {
		c, err := jgrpc.NewClient(jgrpc.Upstream{Target: "dns:///inventory.internal:" + port, Discover: true, CAFile: caFile, ServerName: serverName,
			PolicyConfig: resilience.PolicyConfig{Attempts: 1, Timeout: 20 * time.Second}}, // the first TLS handshake under the race detector
			jgrpc.WithClock(jfasttest.NewClock()), jgrpc.WithLookup(dns.lookup))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		_, err = shoppb.NewInventoryClient(c).GetStock(ctxFor(t), &shoppb.GetStockRequest{Sku: "a"})
		return err
	}
	if err := call(""); err != nil {
		t.Fatalf("the certificate names inventory.internal, the instance is 127.0.0.1: %v", err)
	}
	if err := call("other.internal"); status.Code(err) != codes.Unavailable {
		t.Fatalf("server_name other.internal: err = %v, want UNAVAILABLE", err)
	}
}
