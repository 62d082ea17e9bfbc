// Package cache is jfast's Redis plugin: one shared go-redis client with a
// deadline on every command and a breaker in front of Redis, and on top of it a
// cache API, a rate limiter and a token store.
//
// Every command, whoever sends it (this package, the queue through
// [Plugin.Client], a handler), is bounded by command_timeout (1 s) end to end
// and goes through the "redis" breaker; blocking commands (BLPOP, BLMOVE,
// XREAD BLOCK, ...) get their own wait plus command_timeout. While the breaker
// is open, commands fail at once with an [*UnavailableError], which renders as
// a 503 naming the cache.
//
// What fails open and what fails closed when Redis does not answer:
//
//   - [Plugin.Remember] and [RememberJSON] compute the value and return it
//     uncached: a cache outage must not become a service outage.
//   - [Plugin.RateLimit] lets requests through, counted in a metric.
//   - the [TokenStore] fails closed: "is this token revoked?" without an
//     answer is an error, which the auth plugin turns into a 503.
//   - [Plugin.Get], [Plugin.Set], [Plugin.Delete] and raw commands return the
//     error: the caller chooses.
//
// # Example
//
//	svc := framework.Options{
//		Plugins: []framework.Plugin{cache.New()},
//		Routes: func(app *framework.App, r chi.Router) error {
//			c, err := cache.From(app)
//			if err != nil {
//				return err
//			}
//			r.With(c.RateLimit(cache.RateLimitOpts{Limit: 100, Period: time.Minute})).
//				Get("/prices/{sku}", framework.Handler(func(w http.ResponseWriter, r *http.Request) error {
//					sku := chi.URLParam(r, "sku")
//					price, err := cache.RememberJSON(r.Context(), c, "price:"+sku, time.Minute,
//						func(ctx context.Context) (Price, error) { return loadPrice(ctx, sku) })
//					if err != nil {
//						return err
//					}
//					return framework.JSON(w, http.StatusOK, price)
//				}))
//			return nil
//		},
//	}
//
// See docs/cache.md for the keys, defaults, errors and what /ready reports.
package cache
