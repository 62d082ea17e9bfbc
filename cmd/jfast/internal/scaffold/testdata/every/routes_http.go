package main

import (
	nethttp "net/http"

	"github.com/go-chi/chi/v5"

	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/plugins/http"
)

// httpRoutes mounts GET /upstream, which calls the "example" upstream
// ([plugin.http.upstreams.example] in jfast.toml) through the http plugin's client:
// deadlines, safe retries, a breaker and a bulkhead come with it.
func httpRoutes(app *framework.App, r chi.Router) error {
	example, err := http.Client(app, "example")
	if err != nil {
		return err // not configured: the boot fails, naming it
	}
	r.Method(nethttp.MethodGet, "/upstream", framework.Handler(func(w nethttp.ResponseWriter, r *nethttp.Request) error {
		resp, err := example.Get(r.Context(), "/status")
		if err != nil {
			return err // no response (timeout, refused, breaker open): 503 naming "example"
		}
		return framework.JSON(w, nethttp.StatusOK, map[string]int{"upstream_status": resp.StatusCode})
	}))
	return nil
}
