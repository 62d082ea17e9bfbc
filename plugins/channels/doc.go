// Package channels is jfast's events plugin: one replica tells the others
// (and their connected browsers) that something happened, over the cache
// plugin's Redis.
//
// Each channel is declared in [plugin.channels] with one of two deliveries:
//
//   - broadcast (Redis pub/sub): every replica subscribed now gets every
//     message, at most once; nothing is kept for a replica that was away.
//     For "drop this cache entry", "a config changed", live dashboards.
//   - durable (a Redis stream with a consumer group per service): each
//     service gets every message at least once, handled by one of its
//     replicas and acknowledged after the handler returns; a replica that
//     dies mid-handler has its message claimed by another after
//     visibility_timeout; after max_deliveries it goes to a dead letter
//     stream. For "an order was paid".
//
// [Plugin.Publish] is one Redis command through the cache plugin's breaker
// and command_timeout: when Redis is down it fails fast with an
// [*UnavailableError], a 503 naming "channels". [Plugin.Subscribe] handlers
// run with handler_timeout, panic recovery, and the publisher's request ID and
// trace. Subscriptions reconnect by themselves after Redis is paused or
// restarted, and /ready reports them degraded meanwhile. [Plugin.SSE] streams
// a channel to browsers as server-sent events.
//
// # Example
//
//	[plugins]
//	enabled = ["cache", "channels"]
//
//	[plugin.channels]
//	durable = ["order.paid"]
//
//	Routes: func(app *framework.App, r chi.Router) error {
//		ch, err := channels.From(app)
//		if err != nil {
//			return err
//		}
//		if err := channels.SubscribeJSON(ch, "order.paid", func(ctx context.Context, o Order) error {
//			return receipts.Send(ctx, o)
//		}); err != nil {
//			return err
//		}
//		events, err := ch.SSE("order.paid", channels.SSEOpts{})
//		if err != nil {
//			return err
//		}
//		r.Method(http.MethodGet, "/events", events)
//		r.Method(http.MethodPost, "/orders/{id}/pay", framework.Handler(func(w http.ResponseWriter, r *http.Request) error {
//			// ... mark the order paid, then:
//			return ch.PublishJSON(r.Context(), "order.paid", Order{ID: chi.URLParam(r, "id")})
//		}))
//		return nil
//	}
//
// See docs/channels.md for the keys, defaults, guarantees and what is tested.
package channels
