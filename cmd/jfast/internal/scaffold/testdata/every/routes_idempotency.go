package main

import (
	"crypto/rand"
	"encoding/hex"
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/plugins/idempotency"
)

// idempotencyRoutes mounts POST /payments behind the idempotency middleware: the
// first request with an Idempotency-Key runs and its response is stored; a retry
// with the same key gets the stored response (Idempotent-Replayed: true) and the
// handler does not run twice.
//
// The route does not authenticate its callers, so they share one key space
// (Scope global): a caller who learns another's key gets that caller's stored
// response, hence keys must be unguessable (a UUID). Once callers are
// identified (the auth plugin on the route, or Opts.Subject), remove Scope:
// each caller then has its own keys, and a keyed request from an unknown
// caller is refused.
func idempotencyRoutes(app *framework.App, r chi.Router) error {
	idem, err := idempotency.From(app)
	if err != nil {
		return err
	}
	guard := idem.Middleware(idempotency.Opts{RequireKey: true, Scope: idempotency.ScopeGlobal})
	r.With(guard).Method(http.MethodPost, "/payments", framework.Handler(func(w http.ResponseWriter, r *http.Request) error {
		var id [8]byte
		_, _ = rand.Read(id[:])
		return framework.JSON(w, http.StatusCreated, map[string]string{"payment_id": hex.EncodeToString(id[:])})
	}))
	return nil
}
