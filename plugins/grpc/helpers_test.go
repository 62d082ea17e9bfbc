package grpc_test

import (
	"context"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/jfastframework/jfast/examples/inventory/shoppb"
	"github.com/jfastframework/jfast/jfasttest"
	jgrpc "github.com/jfastframework/jfast/plugins/grpc"
)

// Full method names of the inventory service.
const (
	getStock = "/shop.Inventory/GetStock"
	reserve  = "/shop.Inventory/Reserve"
	export   = "/shop.Inventory/Export"
)

// inventory is a scripted shop.Inventory: it answers 7 for every SKU, and
// fails or slows down the calls a test asks it to.
type inventory struct {
	shoppb.UnimplementedInventoryServer

	// failGetStock: the first n GetStock calls answer UNAVAILABLE.
	failGetStock atomic.Int32
	// slowGetStock: GetStock call i (from 0) waits slowGetStock[i] before
	// answering, UNAVAILABLE unless it is the last listed; later calls
	// answer at once.
	slowGetStock []time.Duration
	// failExportOnce: the first Export sends items 1 and 2, then fails with
	// UNAVAILABLE; later ones send 1, 2, 3.
	failExportOnce bool
	// holdExport: Export sends holdExport items (0: none), then waits for
	// its stream to end (the client's stream_timeout) instead of the rest.
	holdExport int64
	holding    bool
	// failExport, when set, is the status every Export ends with after it
	// sent item 1.
	failExport error
	// getStockHook, when set, runs in GetStock call n (from 0) after its
	// deadline is recorded; an error it returns is the call's answer.
	getStockHook func(ctx context.Context, n int) error
	// reserveFails: Reserve takes the items and then answers UNAVAILABLE.
	reserveFails bool

	getStocks    atomic.Int32
	reservations atomic.Int32
	exports      atomic.Int32

	mu        sync.Mutex
	deadlines []time.Duration // time left of each GetStock's deadline on arrival
	incoming  []metadata.MD   // each GetStock's metadata
}

func (s *inventory) GetStock(ctx context.Context, req *shoppb.GetStockRequest) (*shoppb.Stock, error) {
	n := int(s.getStocks.Add(1)) - 1
	md, _ := metadata.FromIncomingContext(ctx)
	s.mu.Lock()
	if d, ok := ctx.Deadline(); ok {
		s.deadlines = append(s.deadlines, time.Until(d))
	} else {
		s.deadlines = append(s.deadlines, -1)
	}
	s.incoming = append(s.incoming, md)
	s.mu.Unlock()
	if s.getStockHook != nil {
		if err := s.getStockHook(ctx, n); err != nil {
			return nil, err
		}
	}
	if n < len(s.slowGetStock) {
		select {
		case <-time.After(s.slowGetStock[n]):
		case <-ctx.Done():
			return nil, status.FromContextError(ctx.Err()).Err()
		}
		if n < len(s.slowGetStock)-1 {
			return nil, status.Error(codes.Unavailable, "slow and failing")
		}
	}
	if s.failGetStock.Add(-1) >= 0 {
		return nil, status.Error(codes.Unavailable, "scripted outage")
	}
	if req.GetSku() == "missing" {
		return nil, status.Error(codes.NotFound, "no such sku")
	}
	return &shoppb.Stock{Sku: req.GetSku(), Available: 7}, nil
}

func (s *inventory) Reserve(ctx context.Context, req *shoppb.ReserveRequest) (*shoppb.Reservation, error) {
	n := s.reservations.Add(1)
	if s.reserveFails {
		// The write happened; the answer says otherwise.
		return nil, status.Error(codes.Unavailable, "reserved, then lost the answer")
	}
	return &shoppb.Reservation{ReservationId: fmt.Sprintf("r%d", n), Sku: req.GetSku(), Quantity: req.GetQuantity(), Available: 7 - req.GetQuantity()}, nil
}

func (s *inventory) Export(_ *shoppb.ExportRequest, stream grpc.ServerStreamingServer[shoppb.Item]) error {
	first := s.exports.Add(1) == 1
	for seq := int64(1); seq <= 3; seq++ {
		if s.holding && seq > s.holdExport {
			<-stream.Context().Done()
			return status.FromContextError(stream.Context().Err()).Err()
		}
		if s.failExport != nil && seq == 2 {
			return s.failExport
		}
		if first && s.failExportOnce && seq == 3 {
			return status.Error(codes.Unavailable, "export interrupted")
		}
		if err := stream.Send(&shoppb.Item{Seq: seq, Sku: "sku-42", Available: 7}); err != nil {
			return err
		}
	}
	return nil
}

func (s *inventory) lastDeadlines() []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Duration(nil), s.deadlines...)
}

func (s *inventory) metadata(i int) metadata.MD {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.incoming[i]
}

// serveInventory serves inv on a free loopback port until the test ends and
// returns its address.
func serveInventory(t testing.TB, inv *inventory, opts ...grpc.ServerOption) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr, _ := serveOn(t, ln, inv, opts...)
	return addr
}

// serveOn serves inv on ln until the test ends; the returned stop stops it
// earlier (and may be called again).
func serveOn(t testing.TB, ln net.Listener, inv *inventory, opts ...grpc.ServerOption) (string, func()) {
	t.Helper()
	srv := grpc.NewServer(opts...)
	shoppb.RegisterInventoryServer(srv, inv)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(ln)
	}()
	stop := func() {
		srv.Stop()
		<-done
	}
	t.Cleanup(stop)
	return ln.Addr().String(), stop
}

// newClient returns a plain-text client of target, closed when the test
// ends.
func newClient(t testing.TB, u jgrpc.Upstream, opts ...jgrpc.ClientOption) *jgrpc.ServiceClient {
	t.Helper()
	u.Insecure = true
	c, err := jgrpc.NewClient(u, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// ctxFor returns a context that ends when the test does, bounded by 30 s so a
// bug cannot hang the run.
func ctxFor(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// grpcUserAgent is a dial option that changes nothing the tests look at.
func grpcUserAgent(ua string) grpc.DialOption { return grpc.WithUserAgent(ua) }

// silentServer returns the address of a server that accepts connections and
// never answers.
func silentServer(t testing.TB) string { return jfasttest.SilentServer(t) }

func ctxWithTimeout(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, d)
}
