package service

import (
	"context"
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/jfastframework/jfast/plugins/channels"
)

// OrderPaid is the order.paid event: what every replica's browsers and every
// service subscribed to the channel learn when an order is paid. It carries
// no email or customer: GET /events is open to anyone who can reach it.
type OrderPaid struct {
	ID          int64  `json:"id"`
	SKU         string `json:"sku"`
	Quantity    int    `json:"quantity"`
	AmountMinor int64  `json:"amount_minor"`
	Currency    string `json:"currency"`
}

// mountEvents serves GET /events: order.paid as server-sent events, from
// whichever replica paid the order. order.paid is a durable channel, so a
// browser that reconnects with Last-Event-ID gets what it missed.
func (s *service) mountEvents(r chi.Router) error {
	events, err := s.events.SSE("order.paid", channels.SSEOpts{})
	if err != nil {
		return err
	}
	r.Method(http.MethodGet, "/events", events)
	return nil
}

// paid publishes order.paid. The order is paid whatever happens here: a
// publish that fails (Redis down) is logged, and the event is lost (a
// service that must not lose it writes it to an outbox table in the
// payment's transaction and publishes from there).
func (s *service) paid(ctx context.Context, o *Order) {
	err := s.events.PublishJSON(ctx, "order.paid", OrderPaid{ID: o.ID, SKU: o.SKU, Quantity: o.Quantity, AmountMinor: o.AmountMinor, Currency: o.Currency})
	if err != nil {
		s.log.WarnContext(ctx, "orders: order.paid not published", "order", o.ID, "err", err)
	}
}
