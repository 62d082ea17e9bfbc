package cache_test

import (
	"context"
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/plugins/cache"
)

type Price struct {
	SKU   string `json:"sku"`
	Cents int    `json:"cents"`
}

func loadPrice(_ context.Context, sku string) (Price, error) {
	return Price{SKU: sku, Cents: 1999}, nil
}

// A route behind a per-client rate limit whose answer is cached for a minute.
// RememberJSON computes a cold price once however many requests ask at the same
// time, and keeps answering (uncached) when Redis is down.
func Example() {
	_ = framework.Options{
		Plugins: []framework.Plugin{cache.New()},
		Routes: func(app *framework.App, r chi.Router) error {
			c, err := cache.From(app)
			if err != nil {
				return err
			}
			limited := r.With(c.RateLimit(cache.RateLimitOpts{Name: "prices", Limit: 100, Period: time.Minute}))
			limited.Method(http.MethodGet, "/prices/{sku}", framework.Handler(func(w http.ResponseWriter, r *http.Request) error {
				sku := chi.URLParam(r, "sku")
				p, err := cache.RememberJSON(r.Context(), c, "price:"+sku, time.Minute,
					func(ctx context.Context) (Price, error) { return loadPrice(ctx, sku) })
				if err != nil {
					return err
				}
				return framework.JSON(w, http.StatusOK, p)
			}))
			return nil
		},
	}
}

// A one-time token (a password-reset link): the first use wins, a replay is
// refused, and when Redis is down the link fails closed with a 503.
func ExampleTokenStore_Use() {
	_ = func(c *cache.Plugin) http.Handler {
		return framework.Handler(func(w http.ResponseWriter, r *http.Request) error {
			jti, expires := r.URL.Query().Get("t"), time.Now().Add(time.Hour) // from the verified token
			first, err := c.Tokens().Use(r.Context(), jti, expires)
			if err != nil {
				return err // *cache.UnavailableError: 503 naming the cache
			}
			if !first {
				return framework.JSON(w, http.StatusGone, map[string]string{"error": "link already used"})
			}
			return framework.JSON(w, http.StatusOK, map[string]string{"status": "reset"})
		})
	}
}
