// Package db is jfast's PostgreSQL plugin: a pgx/v5 pool (pgxpool) with
// deadlines on everything that can hang, a bounded ping before an idle
// connection is handed out, and a breaker on connection attempts, so a
// database that stops answering costs a few slow requests per process and
// then 503s answered at once, until it comes back — on the same App and
// pool, without a restart.
//
// # Configuration
//
//	[plugins]
//	enabled = ["observability", "db"]
//
//	[plugin.db]
//	url = "postgres://orders@db:5432/orders"   # or JFAST_DB_URL
//	pool_size = 10
//	ping_timeout = "2s"
//
// See [Config] for every key and docs/db.md for the reasons behind the
// defaults.
//
// # Example
//
// Take the pool at boot, in Routes, and use it like a *pgxpool.Pool:
//
//	func routes(app *framework.App, r chi.Router) error {
//		pg, err := db.Get(app)
//		if err != nil {
//			return err
//		}
//		r.Method(http.MethodGet, "/orders/{id}", framework.Handler(func(w http.ResponseWriter, r *http.Request) error {
//			var total int64
//			err := pg.QueryRow(r.Context(), "SELECT total FROM orders WHERE id = $1", chi.URLParam(r, "id")).Scan(&total)
//			if errors.Is(err, pgx.ErrNoRows) {
//				return problem.NotFound("no such order")
//			}
//			if err != nil {
//				return err // a *problem.DependencyError when the database is unreachable: 503
//			}
//			return framework.JSON(w, http.StatusOK, map[string]int64{"total": total})
//		}))
//		return nil
//	}
//
// [DB.Tx] commits or rolls back a transaction (also when its function
// panics); [TenantPools] gives one pool per tenant; [Plugin.Migrate] runs
// embedded migrations given with [WithMigrations].
package db
