package service

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/jackc/pgx/v5"

	"github.com/jfastframework/jfast/examples/inventory/shoppb"
	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/plugins/cache"
	"github.com/jfastframework/jfast/problem"
)

// stockTTL is how long GET /stock/{sku} is served from Redis: stock moves
// with every order, and a page that shows it 30 s late is still useful.
// POST /orders deletes the entry of the SKU it sold; a change the inventory
// makes on its own shows within the 30 s.
const stockTTL = 30 * time.Second

func stockKey(sku string) string { return "stock:" + sku }

// stock answers from Redis, or once per 30 s (single-flight) from
// PostgreSQL (the price) and the inventory (how many are available).
// Remember fails open: with Redis down every request reads both.
func (s *service) stock(w http.ResponseWriter, r *http.Request) error {
	sku := chi.URLParam(r, "sku")
	st, err := cache.RememberJSON(r.Context(), s.cache, stockKey(sku), stockTTL,
		func(ctx context.Context) (Stock, error) { return s.loadStock(ctx, sku) })
	if err != nil {
		return err // no such SKU (404, not cached), the database's or the inventory's 503
	}
	return framework.JSON(w, http.StatusOK, st)
}

func (s *service) loadStock(ctx context.Context, sku string) (Stock, error) {
	st := Stock{SKU: sku}
	err := s.db.QueryRow(ctx, `SELECT price_minor, currency FROM stock WHERE sku = $1`, sku).
		Scan(&st.PriceMinor, &st.Currency)
	if errors.Is(err, pgx.ErrNoRows) {
		return st, problem.NotFound("no such sku")
	}
	if err != nil {
		return st, err
	}
	// GetStock is listed in idempotent_methods: an UNAVAILABLE is retried
	// within the upstream's timeout. A NOT_FOUND from the inventory is a 404
	// too (the *grpc.Error renders so); an outage a 503 naming inventory.
	in, err := s.inventory.GetStock(ctx, &shoppb.GetStockRequest{Sku: sku})
	if err != nil {
		return st, err
	}
	st.Available = int(in.GetAvailable())
	return st, nil
}
