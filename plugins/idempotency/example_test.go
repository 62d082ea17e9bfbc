package idempotency_test

import (
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/plugins/auth"
	"github.com/jfastframework/jfast/plugins/db"
	"github.com/jfastframework/jfast/plugins/idempotency"
)

func charge(w http.ResponseWriter, r *http.Request) error {
	return framework.JSON(w, http.StatusCreated, map[string]string{"payment_id": "p_1"})
}

// Guard the payment route: a retry with the same Idempotency-Key gets the
// first response, never a second charge. RequireAuth runs first: the verified
// bearer token names the caller, and each caller has its own keys.
func ExamplePlugin_Middleware() {
	_ = framework.Options{
		Plugins: []framework.Plugin{db.New(), auth.New(), idempotency.New()},
		Routes: func(app *framework.App, r chi.Router) error {
			a, err := auth.From(app)
			if err != nil {
				return err
			}
			idem, err := idempotency.From(app)
			if err != nil {
				return err // not enabled: the boot fails, naming it
			}
			r.With(a.RequireAuth(), idem.Middleware(idempotency.Opts{RequireKey: true})).
				Method(http.MethodPost, "/payments", framework.Handler(charge))
			return nil
		},
	}
}

// Identify the caller by the token's subject rather than the token itself, so
// a caller that refreshes its token between retries still gets its replay.
func ExampleOpts_subject() {
	_ = idempotency.Opts{
		RequireKey: true,
		Subject: func(r *http.Request) string {
			if c, ok := auth.ClaimsFrom(r.Context()); ok {
				return c.Subject
			}
			return ""
		},
	}
}

// A public webhook receiver: its senders are not authenticated by a bearer
// token, so the route opts into one key space for every caller. The senders'
// keys must be unguessable (a UUID), since any caller who learns one gets its
// stored response.
func ExampleOpts_globalScope() {
	_ = idempotency.Opts{RequireKey: true, Scope: idempotency.ScopeGlobal}
}
