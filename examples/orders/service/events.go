package service

import (
	"context"
	"encoding/json"
	"net/http"

	"github.com/jfastframework/jfast/plugins/channels"
)

// OrderPaid is the order.paid event: what every replica's browsers and every
// service subscribed to the channel learn when an order is paid. It carries
// the customer (the token's subject) so that GET /events sends each caller
// only their own orders, and no email.
type OrderPaid struct {
	ID          int64  `json:"id"`
	SKU         string `json:"sku"`
	Quantity    int    `json:"quantity"`
	AmountMinor int64  `json:"amount_minor"`
	Currency    string `json:"currency"`
	Customer    string `json:"customer"`
}

// eventsHandler is GET /events: order.paid as server-sent events, from
// whichever replica paid the order, behind RequireAuth. Each stream gets the
// caller's own orders only (a Last-Event-ID replays the caller's, never
// another's), and sse_max_streams_per_client counts streams per caller:
// behind the gateway every stream comes from the gateway's address.
// order.paid is a durable channel, so a browser that reconnects with
// Last-Event-ID gets what it missed.
func (s *service) eventsHandler() (http.Handler, error) {
	return s.events.SSE("order.paid", channels.SSEOpts{
		Filter:    ownOrder,
		ClientKey: customer,
	})
}

// ownOrder reports whether m is an order of the caller's.
func ownOrder(r *http.Request, m channels.Message) bool {
	var ev struct {
		Customer string `json:"customer"`
	}
	return json.Unmarshal(m.Payload, &ev) == nil && ev.Customer != "" && ev.Customer == customer(r)
}

// paid publishes order.paid. The order is paid whatever happens here: a
// publish that fails (Redis down) is logged, and the event is lost (a
// service that must not lose it writes it to an outbox table in the
// payment's transaction and publishes from there).
func (s *service) paid(ctx context.Context, o *Order) {
	err := s.events.PublishJSON(ctx, "order.paid", OrderPaid{ID: o.ID, SKU: o.SKU, Quantity: o.Quantity, AmountMinor: o.AmountMinor, Currency: o.Currency, Customer: o.customer})
	if err != nil {
		s.log.WarnContext(ctx, "orders: order.paid not published", "order", o.ID, "err", err)
	}
}
