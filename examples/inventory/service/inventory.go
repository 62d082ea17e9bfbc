package service

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/jfastframework/jfast/examples/inventory/shoppb"
)

// inventory serves shop.Inventory from a Store.
type inventory struct {
	shoppb.UnimplementedInventoryServer
	store *Store
	log   *slog.Logger
	seq   atomic.Int64 // reservation numbers
}

func (s *inventory) GetStock(_ context.Context, req *shoppb.GetStockRequest) (*shoppb.Stock, error) {
	n, ok := s.store.Available(req.GetSku())
	if !ok {
		return nil, status.Errorf(codes.NotFound, "no such sku %q", req.GetSku())
	}
	return &shoppb.Stock{Sku: req.GetSku(), Available: n}, nil
}

// Reserve takes the items at once: a second call for the same order takes
// them again, which is why orders never retries it.
func (s *inventory) Reserve(ctx context.Context, req *shoppb.ReserveRequest) (*shoppb.Reservation, error) {
	if req.GetQuantity() < 1 {
		return nil, status.Error(codes.InvalidArgument, "quantity must be at least 1")
	}
	left, known, enough := s.store.take(req.GetSku(), req.GetQuantity())
	switch {
	case !known:
		return nil, status.Errorf(codes.NotFound, "no such sku %q", req.GetSku())
	case !enough:
		return nil, status.Errorf(codes.FailedPrecondition, "%d of %s available, %d asked", left, req.GetSku(), req.GetQuantity())
	}
	r := &shoppb.Reservation{
		ReservationId: fmt.Sprintf("r%d", s.seq.Add(1)),
		Sku:           req.GetSku(), Quantity: req.GetQuantity(), Available: left,
	}
	s.log.InfoContext(ctx, "inventory: reserved", "reservation", r.ReservationId, "sku", r.Sku,
		"quantity", r.Quantity, "order", req.GetOrderId(), "available", left)
	return r, nil
}

func (s *inventory) Export(_ *shoppb.ExportRequest, stream grpc.ServerStreamingServer[shoppb.Item]) error {
	for i, it := range s.store.items() {
		if err := stream.Send(&shoppb.Item{Seq: int64(i + 1), Sku: it.sku, Available: it.available}); err != nil {
			return err
		}
	}
	return nil
}
