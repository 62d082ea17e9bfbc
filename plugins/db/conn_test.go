package db

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/framework/resilience"
	"github.com/jfastframework/jfast/problem"
)

// isDBDependencyError reports whether err is the db dependency error.
func isDBDependencyError(err error) bool {
	var de *problem.DependencyError
	return errors.As(err, &de) && de.Dependency == "db"
}

// isDB503 reports whether a response is the 503 problem naming db.
func isDB503(status int, body []byte) bool {
	var p struct {
		Dependency string `json:"dependency"`
	}
	_ = json.Unmarshal(body, &p)
	return status == http.StatusServiceUnavailable && p.Dependency == "db"
}

// A session the server ends while a statement runs on a connection taken
// with Acquire is an outage for that request, as with DB.Exec: a 503 naming
// db, not a 500. Before Conn, the handler got pgx's *pgconn.PgError as is.
func TestAcquiredConnTerminatedSessionIs503(t *testing.T) {
	t.Parallel()
	appName := "jfast_acqterm_" + suffix()
	var pg *DB
	b := setup(t, setupOpts{
		toml: fmt.Sprintf("application_name = %q", appName),
		routes: func(app *framework.App, r chi.Router) error {
			pg, _ = Get(app)
			r.Method(http.MethodGet, "/hold", framework.Handler(func(w http.ResponseWriter, r *http.Request) error {
				c, err := pg.Acquire(r.Context())
				if err != nil {
					return err
				}
				defer c.Release()
				if _, err := c.Exec(r.Context(), "SELECT pg_sleep(10)"); err != nil {
					return err
				}
				return framework.JSON(w, http.StatusOK, map[string]bool{"ok": true})
			}))
			return nil
		},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	type answer struct {
		status int
		body   []byte
	}
	done := make(chan answer, 1)
	go func() {
		r := b.svc.Get(t, "/hold")
		done <- answer{r.Status, r.Body}
	}()
	admin, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	for {
		var n int
		if err := admin.QueryRow(ctx, "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = $1 AND query LIKE 'SELECT pg_sleep%'", appName).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatal("the statement never showed in pg_stat_activity")
		case <-time.After(20 * time.Millisecond):
		}
	}
	a := <-done
	if !isDB503(a.status, a.body) {
		t.Fatalf("terminated session on an acquired connection: %d %s; want a 503 naming db", a.status, a.body)
	}

	// The same seen from Go: the cause (SQLSTATE 57P01) stays reachable.
	c, err := pg.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Release()
	var pid uint32
	if err := c.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&pid); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Exec(ctx, "SELECT pg_terminate_backend($1)", pid); err != nil {
		t.Fatal(err)
	}
	_, err = c.Exec(ctx, "SELECT 1")
	var pgErr *pgconn.PgError
	if !isDBDependencyError(err) || !errors.As(err, &pgErr) || pgErr.Code != "57P01" {
		// The server's message may be lost to the closed socket: then a
		// db dependency error is all that is asked.
		if !isDBDependencyError(err) {
			t.Fatalf("a statement on a terminated session: %T %v; want a db dependency error", err, err)
		}
	}
	if snap := pg.Breaker(); snap.Consecutive != 0 {
		t.Fatalf("breaker %+v: a broken statement is not a connection attempt", snap)
	}
}

// The watchdog cuts a statement on a connection taken with Acquire as it
// cuts DB's: the breaker's 503 (Retry-After, errors.Is ErrOpen), and so is
// the next statement on the cut connection (pgx: "conn closed").
func TestWatchdogCutsAnAcquiredConn(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{proxy: true, toml: "ping_timeout = \"300ms\"\nconnect_timeout = \"10s\"\npool_size = 2"})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := b.db.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Release()
	if _, err := c.Exec(ctx, "SELECT 1"); err != nil {
		t.Fatal(err)
	}
	b.proxy.Hold()
	done := make(chan error, 1)
	go func() {
		_, err := c.Exec(ctx, "SELECT 1")
		done <- err
	}()
	watchUntil(t, b, func() bool { return b.db.gate.watch.trips.Load() > 0 })
	err = <-done
	var de *problem.DependencyError
	if !errors.As(err, &de) || de.Dependency != "db" || !errors.Is(err, resilience.ErrOpen) || de.RetryAfter <= 0 {
		t.Fatalf("a statement the watchdog cut on an acquired connection: %T %v; want the breaker's error with Retry-After", err, err)
	}
	_, err = c.Exec(ctx, "SELECT 1")
	if !isDBDependencyError(err) || !errors.Is(err, resilience.ErrOpen) {
		t.Fatalf("the next statement on the cut connection: %T %v; want the breaker's error", err, err)
	}
}
