package service

import (
	"embed"
	"io/fs"
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/plugins/auth"
	"github.com/jfastframework/jfast/plugins/db"
	"github.com/jfastframework/jfast/plugins/idempotency"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// Migrations are billing's SQL migrations, in the db plugin's format.
func Migrations() fs.FS {
	sub, err := fs.Sub(migrationFiles, "migrations")
	if err != nil {
		panic("billing: migrations: " + err.Error()) // the embed pattern is fixed above
	}
	return sub
}

// Options is billing as its main compiles it; tests start the same thing.
// The configuration comes from jfast.toml (or Options.ConfigText).
func Options() framework.Options {
	return framework.Options{
		Plugins: []framework.Plugin{
			db.New(db.WithMigrations(Migrations())),
			auth.New(),
			idempotency.New(),
		},
		Routes: Routes,
	}
}

// Routes mounts billing's routes. It takes every client at boot: a plugin
// that is not enabled fails the boot, naming it.
func Routes(app *framework.App, r chi.Router) error {
	pg, err := db.Get(app)
	if err != nil {
		return err
	}
	a, err := auth.From(app)
	if err != nil {
		return err
	}
	idem, err := idempotency.From(app)
	if err != nil {
		return err
	}
	h := &handlers{db: pg, auth: a}
	r.Group(func(r chi.Router) {
		r.Use(a.RequireAuth())
		r.Method(http.MethodGet, "/invoices/{id}", framework.Handler(h.invoice))
		// Keys are kept per caller, the caller being the token's subject (not
		// the token itself: a client that refreshes its token between two
		// retries still gets its stored payment). So bob's "charge-7" is not
		// ada's "charge-7": he can neither be replayed her payment nor take
		// her key first to block it.
		r.With(idem.Middleware(idempotency.Opts{RequireKey: true, Subject: subject, Scope: idempotency.ScopeCaller})).
			Method(http.MethodPost, "/payments", framework.Handler(h.pay))
	})
	return nil
}
