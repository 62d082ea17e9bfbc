package main

import (
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/plugins/db"
)

// dbRoutes mounts GET /db/now, which asks PostgreSQL for its clock through the db
// plugin's pool ([plugin.db] url in jfast.toml, or JFAST_DB_URL).
func dbRoutes(app *framework.App, r chi.Router) error {
	pg, err := db.Get(app)
	if err != nil {
		return err
	}
	r.Method(http.MethodGet, "/db/now", framework.Handler(func(w http.ResponseWriter, r *http.Request) error {
		var now time.Time
		if err := pg.QueryRow(r.Context(), "SELECT now()").Scan(&now); err != nil {
			return err // the database unreachable: a 503 naming "db"
		}
		return framework.JSON(w, http.StatusOK, map[string]time.Time{"now": now})
	}))
	return nil
}
