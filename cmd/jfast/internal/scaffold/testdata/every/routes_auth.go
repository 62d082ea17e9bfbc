package main

import (
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/plugins/auth"
)

// authRoutes mounts GET /me, which needs a valid bearer token and answers with its
// subject; without one the auth plugin answers 401 problem+json.
func authRoutes(app *framework.App, r chi.Router) error {
	a, err := auth.From(app)
	if err != nil {
		return err
	}
	r.With(a.RequireAuth()).Method(http.MethodGet, "/me", framework.Handler(func(w http.ResponseWriter, r *http.Request) error {
		claims, _ := auth.ClaimsFrom(r.Context())
		return framework.JSON(w, http.StatusOK, map[string]string{"subject": claims.Subject})
	}))
	return nil
}
