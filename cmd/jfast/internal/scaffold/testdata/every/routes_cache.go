package main

import (
	"context"
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/plugins/cache"
)

type cachedGreeting struct {
	Message    string    `json:"message"`
	ComputedAt time.Time `json:"computed_at"`
}

// cacheRoutes mounts GET /cache/greeting: a value remembered in Redis for a minute.
// Remember fails open: while Redis is down the value is computed and returned
// uncached, so a cache outage does not become a service outage.
func cacheRoutes(app *framework.App, r chi.Router) error {
	c, err := cache.From(app)
	if err != nil {
		return err
	}
	r.Method(http.MethodGet, "/cache/greeting", framework.Handler(func(w http.ResponseWriter, r *http.Request) error {
		g, err := cache.RememberJSON(r.Context(), c, "greeting", time.Minute, func(context.Context) (cachedGreeting, error) {
			return cachedGreeting{Message: "hello from the cache", ComputedAt: time.Now().UTC()}, nil
		})
		if err != nil {
			return err
		}
		return framework.JSON(w, http.StatusOK, g)
	}))
	return nil
}
