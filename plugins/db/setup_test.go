package db

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/jackc/pgx/v5"

	"github.com/jfastframework/jfast/drills"
	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/framework/resilience"
	"github.com/jfastframework/jfast/jfasttest"
)

// bundle is what a test gets from setup.
type bundle struct {
	svc   *jfasttest.Service
	db    *DB
	clock *resilience.TestClock
	proxy *drills.Proxy
}

type setupOpts struct {
	toml   string // [plugin.db] keys, without the url
	app    string // more [app] keys
	url    string // defaults to the private database, through the proxy when proxy is set
	proxy  bool
	plugin *Plugin
	routes func(app *framework.App, r chi.Router) error // more routes
	// realClock runs the App on the real clock (bundle.clock is nil): the
	// watchdog ticks by itself, as in production.
	realClock bool
}

// setup starts an App with the db plugin on the private database, with a
// test clock, and routes:
//
//	GET /one    SELECT 1 through the pool
//	GET /sql    a syntax error (a healthy server's SQL error)
//	GET /div    division by zero (another SQL error)
func setup(t *testing.T, o setupOpts) *bundle {
	t.Helper()
	b := &bundle{}
	var clock resilience.Clock
	if !o.realClock {
		b.clock = jfasttest.NewClock()
		clock = b.clock
	}
	url := o.url
	if o.proxy {
		p, err := drills.StartProxy("127.0.0.1:5432")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = p.Close() })
		b.proxy = p
		url = urlVia(p.Addr())
	}
	if url == "" {
		url = testURL()
	}
	pl := o.plugin
	if pl == nil {
		pl = New()
	}
	toml := "[app]\nname = \"dbtest\"\n" + o.app + "\n[plugins]\nenabled = [\"db\"]\n"
	if o.toml != "" {
		toml += "[plugin.db]\n" + o.toml + "\n"
	}
	b.svc = jfasttest.Start(t, jfasttest.Options{
		TOML:    toml,
		Plugins: []framework.Plugin{pl},
		Env:     map[string]string{"JFAST_DB_URL": url},
		Clock:   clock,
		Routes: func(app *framework.App, r chi.Router) error {
			d, err := Get(app)
			if err != nil {
				return err
			}
			b.db = d
			r.Method(http.MethodGet, "/one", framework.Handler(func(w http.ResponseWriter, r *http.Request) error {
				var n int
				if err := d.QueryRow(r.Context(), "SELECT 1").Scan(&n); err != nil {
					return err
				}
				return framework.JSON(w, http.StatusOK, map[string]int{"one": n})
			}))
			r.Method(http.MethodGet, "/sql", framework.Handler(func(w http.ResponseWriter, r *http.Request) error {
				_, err := d.Exec(r.Context(), "SELEC nonsense")
				return err
			}))
			r.Method(http.MethodGet, "/div", framework.Handler(func(w http.ResponseWriter, r *http.Request) error {
				_, err := d.Exec(r.Context(), "SELECT 1/0")
				return err
			}))
			if o.routes != nil {
				return o.routes(app, r)
			}
			return nil
		},
	})
	if b.proxy != nil {
		// Cleanups run last-registered first: let the paused proxy forward
		// again before the App stops, so closing the pool does not wait on
		// the cancel requests pgconn sends for terminated connections.
		t.Cleanup(func() { _ = b.proxy.Pass() })
	}
	return b
}

// warm opens n connections in the pool and leaves them idle.
func (b *bundle) warm(t *testing.T, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conns := make([]interface{ Release() }, 0, n)
	for range n {
		c, err := b.db.Acquire(ctx)
		if err != nil {
			t.Fatalf("warm: %v", err)
		}
		conns = append(conns, c)
	}
	for _, c := range conns {
		c.Release()
	}
	if idle := b.db.Stat().IdleConns(); idle != int32(n) {
		t.Fatalf("warm: %d idle connections, want %d", idle, n)
	}
}

// timed runs f and returns how long it took.
func timed(f func()) time.Duration {
	start := time.Now()
	f()
	return time.Since(start)
}

func mustExec(t *testing.T, d *DB, sql string, args ...any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := d.Exec(ctx, sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// tableName makes a table name private to one run of a test (tests may
// run with -count=N against the same database).
func tableName(t *testing.T) string {
	return strings.ToLower(strings.NewReplacer("/", "_", "-", "_").Replace(t.Name())) + "_" + suffix()
}

// suffix is a short random identifier part.
func suffix() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func isPgErr(err error) bool {
	var pe interface{ SQLState() string }
	return errors.As(err, &pe) && !errors.Is(err, pgx.ErrNoRows)
}
