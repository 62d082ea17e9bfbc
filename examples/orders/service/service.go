package service

import (
	"embed"
	"io/fs"
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/jfastframework/jfast/examples/inventory/shoppb"
	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/plugins/auth"
	"github.com/jfastframework/jfast/plugins/cache"
	"github.com/jfastframework/jfast/plugins/channels"
	"github.com/jfastframework/jfast/plugins/db"
	jgrpc "github.com/jfastframework/jfast/plugins/grpc"
	jhttp "github.com/jfastframework/jfast/plugins/http"
	"github.com/jfastframework/jfast/plugins/mail"
	"github.com/jfastframework/jfast/plugins/queue"
	"github.com/jfastframework/jfast/plugins/storage"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// Migrations are orders' SQL migrations, in the db plugin's format.
func Migrations() fs.FS {
	sub, err := fs.Sub(migrationFiles, "migrations")
	if err != nil {
		panic("orders: migrations: " + err.Error()) // the embed pattern is fixed above
	}
	return sub
}

// Options is orders as its main compiles it; tests start the same thing.
func Options() framework.Options {
	return framework.Options{
		Plugins: []framework.Plugin{
			db.New(db.WithMigrations(Migrations())),
			cache.New(),
			jhttp.New(),
			// orders signs order tokens, which billing verifies with the key it
			// verifies bearer tokens with: a configuration that cannot sign
			// (jwks mode) refuses to boot, naming plugin.auth.issue.
			auth.New(auth.NeedsIssue("order tokens billing verifies")),
			queue.New(),
			mail.New(),
			storage.New(),
			channels.New(),
			jgrpc.New(),
		},
		Routes: Routes,
	}
}

// Routes mounts orders' routes, taking every client at boot: a plugin that is
// not enabled or an upstream that is not configured fails the boot, naming it.
func Routes(app *framework.App, r chi.Router) error {
	s := &service{}
	var err error
	if s.db, err = db.Get(app); err != nil {
		return err
	}
	if s.cache, err = cache.From(app); err != nil {
		return err
	}
	if s.billing, err = jhttp.Client(app, "billing"); err != nil {
		return err
	}
	if s.mail, err = mail.From(app); err != nil {
		return err
	}
	if s.receipts, err = storage.For(app, "receipts"); err != nil {
		return err
	}
	if s.events, err = channels.From(app); err != nil {
		return err
	}
	inventory, err := jgrpc.Client(app, "inventory")
	if err != nil {
		return err
	}
	s.inventory = shoppb.NewInventoryClient(inventory)
	if s.auth, err = auth.From(app); err != nil {
		return err
	}
	a := s.auth
	s.log = app.Logger()

	r.Method(http.MethodGet, "/stock/{sku}", framework.Handler(s.stock))
	events, err := s.eventsHandler()
	if err != nil {
		return err
	}
	r.Group(func(r chi.Router) {
		r.Use(a.RequireAuth())
		r.Method(http.MethodGet, "/events", events)
		r.Method(http.MethodPost, "/orders", framework.Handler(s.createOrder))
		r.Method(http.MethodGet, "/orders/{id}", framework.Handler(s.getOrder))
		r.With(framework.MaxBodyBytes(maxReceipt)).Method(http.MethodPut, "/orders/{id}/receipt", framework.Handler(s.putReceipt))
		r.Method(http.MethodGet, "/orders/{id}/receipt", framework.Handler(s.getReceipt))
	})
	return nil
}
