package service_test

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/jfastframework/jfast/examples/internal/exampletest"
	"github.com/jfastframework/jfast/examples/inventory/service"
	"github.com/jfastframework/jfast/examples/inventory/shoppb"
	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/framework/resilience"
	"github.com/jfastframework/jfast/jfasttest"
	jgrpc "github.com/jfastframework/jfast/plugins/grpc"
)

// setup runs inventory from its own jfast.toml, gRPC on a free port, and
// returns a plugin client of it (attempts = 1: these tests count calls).
func setup(t *testing.T, store *service.Store) *jgrpc.ServiceClient {
	t.Helper()
	opts := service.Options(store)
	p := jgrpc.New()
	jfasttest.Start(t, jfasttest.Options{
		TOML:    exampletest.Config(t, "../jfast.toml", `listen = "127.0.0.1:9020"`, `listen = "127.0.0.1:0"`),
		Plugins: []framework.Plugin{p},
		Routes:  opts.Routes,
	})
	c, err := jgrpc.NewClient(jgrpc.Upstream{Name: "inventory", Target: p.Addr(), Insecure: true, PolicyConfig: resilience.PolicyConfig{Attempts: 1}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// TestGetStockAndReserve: GetStock answers the seeded stock; Reserve takes
// items and says what is left; too many is FAILED_PRECONDITION and takes
// nothing; an unknown SKU is NOT_FOUND; a quantity of 0 INVALID_ARGUMENT.
func TestGetStockAndReserve(t *testing.T) {
	t.Parallel()
	store := service.NewStore(service.Seed())
	inv := shoppb.NewInventoryClient(setup(t, store))
	ctx := ctxFor(t)
	st, err := inv.GetStock(ctx, &shoppb.GetStockRequest{Sku: "sku-42"})
	if err != nil || st.GetAvailable() != 7 {
		t.Fatalf("GetStock(sku-42) = %v, %v; want 7", st, err)
	}
	r, err := inv.Reserve(ctx, &shoppb.ReserveRequest{Sku: "sku-42", Quantity: 3, OrderId: "1"})
	if err != nil || r.GetAvailable() != 4 || r.GetQuantity() != 3 || r.GetReservationId() == "" {
		t.Fatalf("Reserve(3) = %v, %v; want 4 left", r, err)
	}
	if _, err := inv.Reserve(ctx, &shoppb.ReserveRequest{Sku: "sku-42", Quantity: 5}); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("Reserve(5 of 4) err = %v, want FAILED_PRECONDITION", err)
	}
	if n, _ := store.Available("sku-42"); n != 4 {
		t.Fatalf("stock after a refused reservation = %d, want 4", n)
	}
	for _, tc := range []struct {
		name string
		call func() error
		code codes.Code
	}{
		{"GetStock of no such sku", func() error {
			_, err := inv.GetStock(ctx, &shoppb.GetStockRequest{Sku: "nope"})
			return err
		}, codes.NotFound},
		{"Reserve of no such sku", func() error {
			_, err := inv.Reserve(ctx, &shoppb.ReserveRequest{Sku: "nope", Quantity: 1})
			return err
		}, codes.NotFound},
		{"Reserve of 0", func() error {
			_, err := inv.Reserve(ctx, &shoppb.ReserveRequest{Sku: "sku-42"})
			return err
		}, codes.InvalidArgument},
	} {
		if err := tc.call(); status.Code(err) != tc.code {
			t.Errorf("%s: err = %v, want %s", tc.name, err, tc.code)
		}
	}
}

// TestExport streams every SKU in SKU order, numbered from 1.
func TestExport(t *testing.T) {
	t.Parallel()
	store := service.NewStore(map[string]int64{"b": 2, "a": 1, "c": 3})
	stream, err := shoppb.NewInventoryClient(setup(t, store)).Export(ctxFor(t), &shoppb.ExportRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for {
		it, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if it.GetSeq() != int64(len(got)+1) {
			t.Fatalf("item %s has seq %d, want %d", it.GetSku(), it.GetSeq(), len(got)+1)
		}
		got = append(got, it.GetSku())
	}
	if len(got) != 3 || got[0] != "a" || got[1] != "b" || got[2] != "c" {
		t.Fatalf("Export = %v, want a, b, c", got)
	}
}

// TestHealth: grpc.health.v1 answers SERVING for the whole server and for
// shop.Inventory.
func TestHealth(t *testing.T) {
	t.Parallel()
	h := healthpb.NewHealthClient(setup(t, service.NewStore(service.Seed())))
	for _, name := range []string{"", "shop.Inventory"} {
		r, err := h.Check(ctxFor(t), &healthpb.HealthCheckRequest{Service: name})
		if err != nil || r.GetStatus() != healthpb.HealthCheckResponse_SERVING {
			t.Fatalf("Check(%q) = %v, %v; want SERVING", name, r, err)
		}
	}
}
