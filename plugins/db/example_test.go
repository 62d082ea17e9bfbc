package db_test

import (
	"context"
	"embed"
	"errors"
	"io/fs"
	"net/http"

	"github.com/go-chi/chi/v5"
	"github.com/jackc/pgx/v5"

	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/plugins/db"
	"github.com/jfastframework/jfast/problem"
)

// The pool is taken once, at boot, in Routes; handlers use it like a
// *pgxpool.Pool and return its errors: an unreachable database answers 503
// naming db, a SQL error 500.
func Example() {
	routes := func(app *framework.App, r chi.Router) error {
		pg, err := db.Get(app)
		if err != nil {
			return err // the db plugin is not enabled: the boot fails
		}
		r.Method(http.MethodGet, "/orders/{id}", framework.Handler(func(w http.ResponseWriter, r *http.Request) error {
			var total int64
			err := pg.QueryRow(r.Context(), "SELECT total FROM orders WHERE id = $1", chi.URLParam(r, "id")).Scan(&total)
			if errors.Is(err, pgx.ErrNoRows) {
				return problem.NotFound("no such order")
			}
			if err != nil {
				return err
			}
			return framework.JSON(w, http.StatusOK, map[string]int64{"total": total})
		}))
		return nil
	}
	_ = framework.Options{Plugins: []framework.Plugin{db.New()}, Routes: routes}
}

// Tx commits when the function returns nil, and rolls back when it returns
// an error or panics.
func ExampleDB_Tx() {
	var pg *db.DB // from db.Get(app), at boot
	transfer := func(ctx context.Context, from, to, amount int64) error {
		return pg.Tx(ctx, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, "UPDATE accounts SET balance = balance - $1 WHERE id = $2", amount, from); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, "UPDATE accounts SET balance = balance + $1 WHERE id = $2", amount, to)
			return err
		})
	}
	_ = transfer
}

// One pool per tenant, from tenant_url_template; ask for the tenant's pool
// on each request.
func ExampleTenantPools_Get() {
	routes := func(app *framework.App, r chi.Router) error {
		tenants, err := db.Tenants(app)
		if err != nil {
			return err // tenant_url_template is not set: the boot fails
		}
		r.Method(http.MethodGet, "/{tenant}/orders", framework.Handler(func(w http.ResponseWriter, r *http.Request) error {
			pg, err := tenants.Get(chi.URLParam(r, "tenant"))
			if err != nil {
				return problem.NotFound("no such tenant")
			}
			var n int64
			if err := pg.QueryRow(r.Context(), "SELECT count(*) FROM orders").Scan(&n); err != nil {
				return err
			}
			return framework.JSON(w, http.StatusOK, map[string]int64{"orders": n})
		}))
		return nil
	}
	_ = routes
}

//go:embed testdata/migrations/*.sql
var migrationFiles embed.FS

// Migrations are compiled in; "migrate up|down|status" on the service's
// command line, or migrate_on_start = true, runs them.
func ExampleWithMigrations() {
	sub, err := fs.Sub(migrationFiles, "testdata/migrations")
	if err != nil {
		panic(err)
	}
	_ = framework.Options{Plugins: []framework.Plugin{db.New(db.WithMigrations(sub))}}
}
