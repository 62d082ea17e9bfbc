package grpc_test

import (
	"context"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/jfastframework/jfast/examples/inventory/shoppb"
	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/jfasttest"
	jgrpc "github.com/jfastframework/jfast/plugins/grpc"
)

// quickInventory answers GetStock at once and records nothing, so the
// benchmarks measure the clients.
type quickInventory struct {
	shoppb.UnimplementedInventoryServer
}

func (quickInventory) GetStock(_ context.Context, req *shoppb.GetStockRequest) (*shoppb.Stock, error) {
	return &shoppb.Stock{Sku: req.GetSku(), Available: 7}, nil
}

// benchPair serves quickInventory on loopback and returns a stub on a bare
// grpc.ClientConn and one on a plugin client (the defaults, GetStock listed
// as idempotent), both to that server.
func benchPair(b *testing.B) (bare, plugin shoppb.InventoryClient) {
	b.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	srv := grpc.NewServer()
	shoppb.RegisterInventoryServer(srv, quickInventory{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(ln)
	}()
	b.Cleanup(func() {
		srv.Stop()
		<-done
	})
	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = conn.Close() })
	c := newClient(b, jgrpc.Upstream{Name: "inventory", Target: ln.Addr().String(), IdempotentMethods: []string{getStock}})
	return shoppb.NewInventoryClient(conn), shoppb.NewInventoryClient(c)
}

func getStockOnce(b *testing.B, stub shoppb.InventoryClient) {
	if _, err := stub.GetStock(context.Background(), &shoppb.GetStockRequest{Sku: "sku-42"}); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkUnaryInterleaved compares a unary GetStock through the plugin's
// client (breaker, bulkhead, retry budget, deadline, metadata, metrics) with
// the same call on a bare grpc.ClientConn to the same loopback server,
// alternately in one loop, so the machine's load hits both alike. It reports
// both medians and their ratio; docs/performance.md has the figures.
//
//	go test -run '^$' -bench 'Unary' -benchtime 20000x -count 6 ./plugins/grpc/
func BenchmarkUnaryInterleaved(b *testing.B) {
	bare, plugin := benchPair(b)
	interleaved(b, bare, plugin, "plugin")
}

// interleaved times one GetStock on bare and one on other per iteration,
// the order flipping every iteration, and reports both medians (other's as
// "<name>-median-ns") and their ratio.
func interleaved(b *testing.B, bare, other shoppb.InventoryClient, name string) {
	getStockOnce(b, bare) // connect both channels before measuring
	getStockOnce(b, other)
	var bareNs, otherNs []time.Duration
	timed := func(stub shoppb.InventoryClient) time.Duration {
		start := time.Now()
		getStockOnce(b, stub)
		return time.Since(start)
	}
	i := 0
	for b.Loop() {
		if i%2 == 0 {
			bareNs = append(bareNs, timed(bare))
			otherNs = append(otherNs, timed(other))
		} else {
			otherNs = append(otherNs, timed(other))
			bareNs = append(bareNs, timed(bare))
		}
		i++
	}
	slices.Sort(bareNs)
	slices.Sort(otherNs)
	bm, om := bareNs[len(bareNs)/2], otherNs[len(otherNs)/2]
	b.ReportMetric(float64(bm.Nanoseconds()), "bare-median-ns")
	b.ReportMetric(float64(om.Nanoseconds()), name+"-median-ns")
	b.ReportMetric(float64(om)/float64(bm), "ratio")
}

// BenchmarkUnary measures each client alone, for allocations per call.
func BenchmarkUnary(b *testing.B) {
	bare, plugin := benchPair(b)
	for _, c := range []struct {
		name string
		stub shoppb.InventoryClient
	}{{"bare", bare}, {"plugin", plugin}} {
		b.Run(c.name, func(b *testing.B) {
			getStockOnce(b, c.stub)
			b.ReportAllocs()
			for b.Loop() {
				getStockOnce(b, c.stub)
			}
		})
	}
}

// serveQuick serves quickInventory on loopback until the benchmark ends.
func serveQuick(b *testing.B) string {
	b.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	srv := grpc.NewServer()
	shoppb.RegisterInventoryServer(srv, quickInventory{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(ln)
	}()
	b.Cleanup(func() {
		srv.Stop()
		<-done
	})
	return ln.Addr().String()
}

// BenchmarkUnaryInstances compares a call through a client with one target
// with a call through a client with three instances (a pick, its breaker
// ticket and the instance's channel per attempt), for time and allocations.
//
//	go test -run '^$' -bench 'UnaryInstances' -benchtime 20000x -count 6 ./plugins/grpc/
func BenchmarkUnaryInstances(b *testing.B) {
	addrs := []string{serveQuick(b), serveQuick(b), serveQuick(b)}
	for _, c := range []struct {
		name string
		up   jgrpc.Upstream
	}{
		{"target", jgrpc.Upstream{Name: "inventory", Target: addrs[0], IdempotentMethods: []string{getStock}}},
		{"instances=3", jgrpc.Upstream{Name: "inventory", Instances: addrs, IdempotentMethods: []string{getStock}}},
	} {
		b.Run(c.name, func(b *testing.B) {
			stub := shoppb.NewInventoryClient(newClient(b, c.up))
			for range 3 {
				getStockOnce(b, stub) // connect every channel before measuring
			}
			b.ReportAllocs()
			for b.Loop() {
				getStockOnce(b, stub)
			}
		})
	}
}

// serverPair serves quickInventory twice on loopback, on a bare
// grpc.Server and on the plugin's server (its interceptors: request ID,
// deadline, the handler on a goroutine of its own, the front door, access
// log at warn, metrics), and returns a stub on a bare grpc.ClientConn to
// each.
func serverPair(b *testing.B) (bare, served shoppb.InventoryClient) {
	b.Helper()
	p := jgrpc.New()
	jfasttest.Start(b, jfasttest.Options{
		TOML:    "[app]\nlog_level = \"warn\"\n[plugins]\nenabled = [\"grpc\"]\n[plugin.grpc.server]\nlisten = \"127.0.0.1:0\"\n",
		Plugins: []framework.Plugin{p},
		Routes: func(app *framework.App, _ chi.Router) error {
			srv, err := jgrpc.Server(app)
			if err != nil {
				return err
			}
			shoppb.RegisterInventoryServer(srv, quickInventory{})
			return nil
		},
	})
	stub := func(addr string) shoppb.InventoryClient {
		conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = conn.Close() })
		return shoppb.NewInventoryClient(conn)
	}
	return stub(serveQuick(b)), stub(p.Addr())
}

// BenchmarkServeUnaryInterleaved compares a unary GetStock served by the
// plugin's server with the same call served by a bare grpc.Server, both
// called by a bare client, alternately in one loop, so the machine's load
// hits both alike. It reports both medians and their ratio; sub-benchmarks
// of BenchmarkServeUnary give the allocations. docs/performance.md has the
// figures.
//
//	go test -run '^$' -bench 'ServeUnary' -benchmem -benchtime 20000x -count 6 ./plugins/grpc/
func BenchmarkServeUnaryInterleaved(b *testing.B) {
	bare, served := serverPair(b)
	interleaved(b, bare, served, "served")
}

// BenchmarkServeUnary measures each server alone, for allocations per
// call (the client's and the server's, in one process).
func BenchmarkServeUnary(b *testing.B) {
	bare, served := serverPair(b)
	for _, c := range []struct {
		name string
		stub shoppb.InventoryClient
	}{{"bare-server", bare}, {"jfast-server", served}} {
		b.Run(c.name, func(b *testing.B) {
			getStockOnce(b, c.stub)
			b.ReportAllocs()
			for b.Loop() {
				getStockOnce(b, c.stub)
			}
		})
	}
}
