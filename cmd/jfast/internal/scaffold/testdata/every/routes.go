package main

import (
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/problem"
)

// Routes mounts the service's routes. It runs once at boot, after the plugins have
// started: take the clients the handlers need here, so a missing one fails the boot
// instead of a request.
func Routes(app *framework.App, r chi.Router) error {
	r.Method(http.MethodGet, "/hello", framework.Handler(hello))
	if err := httpRoutes(app, r); err != nil {
		return err
	}
	if err := dbRoutes(app, r); err != nil {
		return err
	}
	if err := cacheRoutes(app, r); err != nil {
		return err
	}
	if err := authRoutes(app, r); err != nil {
		return err
	}
	if err := storageRoutes(app, r); err != nil {
		return err
	}
	if err := queueRoutes(app, r); err != nil {
		return err
	}
	if err := mailRoutes(app, r); err != nil {
		return err
	}
	if err := telemetryRoutes(app, r); err != nil {
		return err
	}
	if err := idempotencyRoutes(app, r); err != nil {
		return err
	}
	if err := grpcRoutes(app, r); err != nil {
		return err
	}
	return nil
}

type greeting struct {
	Message string `json:"message"`
}

// hello answers GET /hello?name=... A handler returns an error; problem errors
// render as RFC 9457 problem+json.
func hello(w http.ResponseWriter, r *http.Request) error {
	name := r.URL.Query().Get("name")
	if name == "" {
		name = "world"
	}
	if len(name) > 100 {
		return problem.Unprocessable("name is too long", problem.FieldError{Field: "name", Detail: "at most 100 characters"})
	}
	return framework.JSON(w, http.StatusOK, greeting{Message: "hello, " + name})
}
