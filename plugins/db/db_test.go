package db

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/problem"
)

func TestQueriesReleaseTheirConnections(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	tbl := tableName(t)
	mustExec(t, b.db, "CREATE TABLE "+tbl+" (id int PRIMARY KEY, name text NOT NULL)")

	tag, err := b.db.Exec(ctx, "INSERT INTO "+tbl+" VALUES ($1, $2), ($3, $4)", 1, "one", 2, "two")
	if err != nil || tag.RowsAffected() != 2 {
		t.Fatalf("insert: %v, %v", tag, err)
	}
	n, err := b.db.CopyFrom(ctx, pgx.Identifier{tbl}, []string{"id", "name"}, pgx.CopyFromRows([][]any{{3, "three"}, {4, "four"}}))
	if err != nil || n != 2 {
		t.Fatalf("copy: %d, %v", n, err)
	}
	batch := &pgx.Batch{}
	batch.Queue("INSERT INTO " + tbl + " VALUES (5, 'five')")
	batch.Queue("SELECT count(*) FROM " + tbl)
	br := b.db.SendBatch(ctx, batch)
	if _, err := br.Exec(); err != nil {
		t.Fatalf("batch exec: %v", err)
	}
	var count int
	if err := br.QueryRow().Scan(&count); err != nil || count != 5 {
		t.Fatalf("batch count: %d, %v", count, err)
	}
	if err := br.Close(); err != nil {
		t.Fatal(err)
	}

	rows, err := b.db.Query(ctx, "SELECT name FROM "+tbl+" ORDER BY id")
	if err != nil {
		t.Fatal(err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil || strings.Join(names, ",") != "one,two,three,four,five" {
		t.Fatalf("names: %v, %v", names, err)
	}
	var name string
	if err := b.db.QueryRow(ctx, "SELECT name FROM "+tbl+" WHERE id = $1", 3).Scan(&name); err != nil || name != "three" {
		t.Fatalf("query row: %q, %v", name, err)
	}
	if err := b.db.QueryRow(ctx, "SELECT name FROM "+tbl+" WHERE id = 99").Scan(&name); !errors.Is(err, pgx.ErrNoRows) {
		t.Fatalf("no rows: %v", err)
	}
	// A Query read to the end without Close still gives its connection back.
	rows, err = b.db.Query(ctx, "SELECT id FROM "+tbl)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
	}
	if got := b.db.Stat().AcquiredConns(); got != 0 {
		t.Fatalf("%d connections still acquired after every statement finished", got)
	}
}

func TestSessionSettings(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{toml: `session_timezone = "America/Mexico_City"`})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var tz, app string
	if err := b.db.QueryRow(ctx, "SELECT current_setting('TimeZone'), current_setting('application_name')").Scan(&tz, &app); err != nil {
		t.Fatal(err)
	}
	if tz != "America/Mexico_City" || app != "dbtest" {
		t.Fatalf("TimeZone %q, application_name %q; want America/Mexico_City and app.name dbtest", tz, app)
	}
}

func TestTxCommitsAndRollsBack(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	tbl := tableName(t)
	mustExec(t, b.db, "CREATE TABLE "+tbl+" (id int PRIMARY KEY)")
	count := func() int {
		var n int
		if err := b.db.QueryRow(ctx, "SELECT count(*) FROM "+tbl).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}

	if err := b.db.Tx(ctx, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, "INSERT INTO "+tbl+" VALUES (1)")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if count() != 1 {
		t.Fatal("commit: the row is not there")
	}

	errBoom := errors.New("boom")
	err := b.db.Tx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "INSERT INTO "+tbl+" VALUES (2)"); err != nil {
			return err
		}
		return errBoom
	})
	if !errors.Is(err, errBoom) {
		t.Fatalf("Tx returned %v, want fn's error", err)
	}
	if count() != 1 {
		t.Fatal("error: the transaction was not rolled back")
	}

	func() {
		defer func() {
			if r := recover(); r != "kaboom" {
				t.Fatalf("recovered %v, want the same panic value", r)
			}
		}()
		_ = b.db.Tx(ctx, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, "INSERT INTO "+tbl+" VALUES (3)"); err != nil {
				return err
			}
			panic("kaboom")
		})
		t.Fatal("Tx swallowed the panic")
	}()
	if count() != 1 {
		t.Fatal("panic: the transaction was not rolled back")
	}

	// Begin without Tx: Commit and Rollback give the connection back.
	tx, err := b.db.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "INSERT INTO "+tbl+" VALUES (4)"); err != nil {
		t.Fatal(err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if err := tx.Rollback(ctx); !errors.Is(err, pgx.ErrTxClosed) {
		t.Fatalf("second rollback: %v", err)
	}
	if count() != 1 || b.db.Stat().AcquiredConns() != 0 {
		t.Fatal("Begin/Rollback: row kept or connection not returned")
	}

	// A SQL error inside the transaction comes back as the server's error.
	err = b.db.Tx(ctx, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, "INSERT INTO "+tbl+" VALUES (1)")
		return err
	})
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "23505" {
		t.Fatalf("duplicate key in Tx: %v, want a unique violation", err)
	}
	if got := b.db.Stat().AcquiredConns(); got != 0 {
		t.Fatalf("%d connections still acquired after the transactions ended", got)
	}
}

// wantCut runs f, a statement that runs longer than command_timeout
// (200ms in the tests), and fails unless its deadline cut it: a 503 naming
// db that still says what happened.
func wantCut(t *testing.T, name string, f func() error) {
	t.Helper()
	var err error
	took := timed(func() { err = f() })
	if err == nil || took > 3*time.Second {
		t.Fatalf("%s: pg_sleep(5) returned %v after %s; want a timeout after about 200ms", name, err, took)
	}
	// The statement's deadline closed the connection: a 503 naming db
	// that still says what happened.
	var de *problem.DependencyError
	if !errors.As(err, &de) || de.Dependency != "db" || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("%s: error %T %v; want a db dependency error wrapping context.DeadlineExceeded", name, err, err)
	}
}

// onConn returns f run on a connection taken with Acquire, released after.
func (b *bundle) onConn(ctx context.Context, f func(c *Conn) error) func() error {
	return func() error {
		c, err := b.db.Acquire(ctx)
		if err != nil {
			return err
		}
		defer c.Release()
		return f(c)
	}
}

func TestCommandTimeoutBoundsEveryStatement(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{toml: `command_timeout = "200ms"`})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	check := func(name string, f func() error) { t.Helper(); wantCut(t, name, f) }
	check("Exec", func() error { _, err := b.db.Exec(ctx, "SELECT pg_sleep(5)"); return err })
	check("QueryRow", func() error { var s string; return b.db.QueryRow(ctx, "SELECT pg_sleep(5)::text").Scan(&s) })
	check("Tx.Exec", func() error {
		return b.db.Tx(ctx, func(tx pgx.Tx) error { _, err := tx.Exec(ctx, "SELECT pg_sleep(5)"); return err })
	})
	// A connection taken with Acquire: each statement breaks it, so each
	// check takes its own.
	onConn := func(f func(c *Conn) error) func() error { return b.onConn(ctx, f) }
	check("Acquire+Exec", onConn(func(c *Conn) error { _, err := c.Exec(ctx, "SELECT pg_sleep(5)"); return err }))
	check("Acquire+QueryRow", onConn(func(c *Conn) error { var s string; return c.QueryRow(ctx, "SELECT pg_sleep(5)::text").Scan(&s) }))
	check("Acquire+Query", onConn(func(c *Conn) error {
		rows, err := c.Query(ctx, "SELECT pg_sleep(5)")
		if err != nil {
			return err
		}
		rows.Close()
		return rows.Err()
	}))
	check("Acquire+Begin+Exec", onConn(func(c *Conn) error {
		tx, err := c.Begin(ctx)
		if err != nil {
			return err
		}
		defer func() { _ = tx.Rollback(ctx) }()
		_, err = tx.Exec(ctx, "SELECT pg_sleep(5)")
		return err
	}))
	// Fast statements are not affected.
	var n int
	if err := b.db.QueryRow(ctx, "SELECT 1").Scan(&n); err != nil {
		t.Fatal(err)
	}
}

// statementRun is one way of running a statement; run returns its error.
type statementRun struct {
	name string
	run  func() error
}

// batchRuns are the ways of running sql, which returns one row, in a batch
// of its own: its results read with Exec, Query (and the rows' Err) or
// QueryRow, or only closed; sent on *DB, in DB.Tx, or on a Conn.
func (b *bundle) batchRuns(ctx context.Context, sql string) []statementRun {
	one := func() *pgx.Batch {
		q := &pgx.Batch{}
		q.Queue(sql)
		return q
	}
	exec := func(br pgx.BatchResults) error {
		defer br.Close()
		_, err := br.Exec()
		return err
	}
	return []statementRun{
		{"DB.SendBatch: Exec", func() error { return exec(b.db.SendBatch(ctx, one())) }},
		{"DB.SendBatch: Query, rows.Err", func() error {
			br := b.db.SendBatch(ctx, one())
			defer br.Close()
			rows, err := br.Query()
			if err != nil {
				return err
			}
			for rows.Next() {
			}
			return rows.Err()
		}},
		{"DB.SendBatch: QueryRow", func() error {
			br := b.db.SendBatch(ctx, one())
			defer br.Close()
			var n int
			return br.QueryRow().Scan(&n)
		}},
		{"DB.Tx: SendBatch: Exec", func() error {
			return b.db.Tx(ctx, func(tx pgx.Tx) error { return exec(tx.SendBatch(ctx, one())) })
		}},
		{"DB.Tx: SendBatch: Close", func() error {
			return b.db.Tx(ctx, func(tx pgx.Tx) error { return tx.SendBatch(ctx, one()).Close() })
		}},
		{"Conn.SendBatch: Exec", b.onConn(ctx, func(c *Conn) error { return exec(c.SendBatch(ctx, one())) })},
	}
}

// command_timeout bounds a batch and a COMMIT as any statement, and one it
// cut is a 503 naming db, however a batch's results are read; a COMMIT's
// error says that whether the transaction committed is unknown. Before,
// only a batch's Close's error named db (Exec's, Query's and QueryRow's
// were pgx's), and a COMMIT ran as long as it took.
func TestCommandTimeoutBoundsBatchesAndCommits(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{toml: `command_timeout = "200ms"`})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, r := range b.batchRuns(ctx, "SELECT 1 FROM pg_sleep(5)") {
		t.Run(r.name, func(t *testing.T) { wantCut(t, r.name, r.run) })
	}
	slow := tableName(t)
	atCommit(t, b.db, slow, "PERFORM pg_sleep(5)")
	for _, r := range b.commitRuns(ctx, "INSERT INTO "+slow+" VALUES (1)") {
		t.Run(r.name, func(t *testing.T) {
			wantCut(t, r.name, func() error {
				err := r.run()
				if err != nil && !errors.Is(err, errCommitUnknown) {
					t.Errorf("%s: %v; want it to say that whether the transaction committed is unknown", r.name, err)
				}
				return err
			})
		})
	}
	// Each batch broke its connection, which frees its slot once pgconn's
	// cleanup ends: a cancel request bounded by ping_timeout, answered at
	// once by a healthy server (as in TestPingCutFreesItsSlotAndStopIsPrompt).
	waitPool(t, b.db, 2*defaultConfig().PingTimeout, "without a connection in use", func(s *pgxpool.Stat) bool { return s.AcquiredConns() == 0 })
}

func TestTenantPoolsEvictLeastRecentlyUsed(t *testing.T) {
	t.Parallel()
	tmpl := "postgres://postgres@127.0.0.1:5432/" + testDB + "?sslmode=disable&application_name=tenant_{tenant}"
	b := setup(t, setupOpts{toml: fmt.Sprintf("tenant_url_template = %q\nmax_tenant_pools = 2\ntenant_pool_size = 2", tmpl)})
	p, err := From(b.svc.App)
	if err != nil {
		t.Fatal(err)
	}
	tp, err := p.Tenants()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	use := func(name string) *DB {
		t.Helper()
		d, err := tp.Get(name)
		if err != nil {
			t.Fatal(err)
		}
		var app string
		if err := d.QueryRow(ctx, "SELECT current_setting('application_name')").Scan(&app); err != nil {
			t.Fatalf("tenant %s: %v", name, err)
		}
		if app != "tenant_"+name {
			t.Fatalf("tenant %s reached a session named %q", name, app)
		}
		return d
	}
	a := use("a")
	use("b")
	if again := use("a"); again != a {
		t.Fatal("asking again for an open tenant made a new pool")
	}
	use("c") // evicts b, the least recently used
	if tp.Len() != 2 {
		t.Fatalf("%d tenant pools open, want max_tenant_pools 2", tp.Len())
	}
	b2, _ := tp.Get("b") // reopened: evicts a
	if b2 == nil {
		t.Fatal("no pool for b")
	}
	// a's pool was closed by the eviction; the DB kept from before follows
	// tenant a to a pool opened again (evicting c) and keeps working.
	deadline := time.Now().Add(5 * time.Second)
	for a.pool.Ping(ctx) == nil {
		if time.Now().After(deadline) {
			t.Fatal("the evicted pool still answers")
		}
		time.Sleep(10 * time.Millisecond)
	}
	var app string
	if err := a.QueryRow(ctx, "SELECT current_setting('application_name')").Scan(&app); err != nil || app != "tenant_a" {
		t.Fatalf("the evicted DB of a: %q, %v; want a session of tenant a", app, err)
	}
	if cur, _ := tp.Get("a"); cur == a || a.current() != cur {
		t.Fatal("the evicted DB did not follow tenant a to the pool Get now returns")
	}
	if tp.Len() != 2 {
		t.Fatalf("%d tenant pools open after following, want max_tenant_pools 2", tp.Len())
	}
	if _, err := tp.Get("x/../../y"); err == nil {
		t.Fatal("a tenant name with / was accepted")
	}
}

// A session the server ends during a statement (a crash, a failover, an
// administrator's pg_terminate_backend) is an outage for that request: a
// 503 naming db, not a 500, with the server's error still reachable.
func TestTerminatedSessionIsUnavailable(t *testing.T) {
	t.Parallel()
	appName := "jfast_terminate_" + suffix()
	b := setup(t, setupOpts{toml: fmt.Sprintf("application_name = %q", appName)})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := b.db.Exec(ctx, "SELECT pg_sleep(10)")
		done <- err
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
	err = <-done
	var de *problem.DependencyError
	var pgErr *pgconn.PgError
	if !errors.As(err, &de) || !errors.As(err, &pgErr) || pgErr.Code != "57P01" {
		t.Fatalf("terminated session: %T %v; want a db dependency error wrapping SQLSTATE 57P01", err, err)
	}
	if r := b.svc.Get(t, "/one"); r.Status != 200 {
		t.Fatalf("the next request: %d", r.Status)
	}
	if snap := b.db.Breaker(); snap.Consecutive != 0 {
		t.Fatalf("breaker %+v: a broken statement is not a connection attempt", snap)
	}
}

// Each tenant has its own breaker: a tenant whose database is unusable does
// not make the others answer 503.
func TestTenantBreakersAreSeparate(t *testing.T) {
	t.Parallel()
	tmpl := "postgres://postgres@127.0.0.1:5432/{tenant}?sslmode=disable"
	b := setup(t, setupOpts{toml: fmt.Sprintf("tenant_url_template = %q\nbreaker_failures = 2", tmpl)})
	tp, err := Tenants(b.svc.App)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	missing, err := tp.Get("jfast_no_such_db_" + suffix())
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		_, err := missing.Exec(ctx, "SELECT 1")
		var de *problem.DependencyError
		if !errors.As(err, &de) {
			t.Fatalf("a tenant whose database does not exist: %v; want a db dependency error", err)
		}
	}
	if missing.Breaker().State.String() != "open" {
		t.Fatalf("the missing tenant's breaker is %s, want open", missing.Breaker().State)
	}
	good, err := tp.Get(testDB)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := good.Exec(ctx, "SELECT 1"); err != nil {
		t.Fatalf("another tenant: %v", err)
	}
	if good.Breaker().State.String() != "closed" {
		t.Fatal("the healthy tenant's breaker is not closed")
	}
}

// A row that is not there closes its rows twice (Next at the end, then Scan's
// deferred Close); the second close must not touch the connection, which is
// already back in the pool serving someone else. With one connection and many
// goroutines, the race detector sees it if it does.
func TestQueryRowWithNoRowReleasesOnce(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{toml: "pool_size = 1"})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, 8*25)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 25 {
				var n int
				if err := b.db.QueryRow(ctx, "SELECT 1 WHERE false").Scan(&n); !errors.Is(err, pgx.ErrNoRows) {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("no row: %v", err)
	}
	if got := b.db.Stat().AcquiredConns(); got != 0 {
		t.Fatalf("%d connections still acquired", got)
	}
}

// A request whose tenant pool is evicted while it runs (other requests asked
// for other tenants; here the handler asks itself, between two statements,
// with max_tenant_pools = 1) keeps working: its second statement follows the
// tenant to a pool opened again. A transaction open on the evicted pool
// finishes on it (the pool's close waits for it).
func TestTenantPoolEvictedDuringARequest(t *testing.T) {
	t.Parallel()
	tmpl := "postgres://postgres@127.0.0.1:5432/" + testDB + "?sslmode=disable&application_name=tenant_{tenant}"
	var tp *TenantPools
	b := setup(t, setupOpts{
		toml: fmt.Sprintf("tenant_url_template = %q\nmax_tenant_pools = 1\ntenant_pool_size = 2", tmpl),
		routes: func(app *framework.App, r chi.Router) error {
			var err error
			if tp, err = Tenants(app); err != nil {
				return err
			}
			r.Method(http.MethodGet, "/tenant/{name}", framework.Handler(func(w http.ResponseWriter, r *http.Request) error {
				pg, err := tp.Get(chi.URLParam(r, "name"))
				if err != nil {
					return err
				}
				var first, second string
				if err := pg.QueryRow(r.Context(), "SELECT current_setting('application_name')").Scan(&first); err != nil {
					return err
				}
				if _, err := tp.Get("other"); err != nil { // evicts this request's pool
					return err
				}
				if err := pg.QueryRow(r.Context(), "SELECT current_setting('application_name')").Scan(&second); err != nil {
					return err
				}
				return framework.JSON(w, http.StatusOK, []string{first, second})
			}))
			return nil
		},
	})
	for range 3 {
		r := b.svc.Get(t, "/tenant/a")
		if r.Status != 200 || strings.TrimSpace(r.String()) != `["tenant_a","tenant_a"]` {
			t.Fatalf("a request whose tenant pool was evicted mid-way: %d %s; want 200 with both statements on tenant a", r.Status, r)
		}
	}
	if tp.Len() != 1 {
		t.Fatalf("%d tenant pools open, want max_tenant_pools 1", tp.Len())
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	a, err := tp.Get("a")
	if err != nil {
		t.Fatal(err)
	}
	tx, err := a.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tp.Get("b"); err != nil { // evicts a, whose close now waits for tx
		t.Fatal(err)
	}
	var app string
	if err := tx.QueryRow(ctx, "SELECT current_setting('application_name')").Scan(&app); err != nil || app != "tenant_a" {
		t.Fatalf("a transaction on the evicted pool: %q, %v", app, err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatalf("commit on the evicted pool: %v", err)
	}
	if _, err := a.Exec(ctx, "SELECT 1"); err != nil {
		t.Fatalf("the evicted DB after its transaction: %v", err)
	}
}

// A pool closed for good (the plugin stopped) answers a 503 naming db, not a
// 500: the main pool, and a tenant's DB, which finds no pool to follow.
func TestClosedPoolIsUnavailable(t *testing.T) {
	t.Parallel()
	tmpl := "postgres://postgres@127.0.0.1:5432/" + testDB + "?sslmode=disable&application_name=tenant_{tenant}"
	b := setup(t, setupOpts{toml: fmt.Sprintf("tenant_url_template = %q", tmpl)})
	tp, err := Tenants(b.svc.App)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	a, err := tp.Get("a")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Exec(ctx, "SELECT 1"); err != nil {
		t.Fatal(err)
	}
	p, err := From(b.svc.App)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Stop(ctx); err != nil { // what the App's stop does; a second Stop at cleanup is harmless
		t.Fatal(err)
	}
	for name, d := range map[string]*DB{"main": b.db, "tenant": a} {
		_, err := d.Exec(ctx, "SELECT 1")
		var de *problem.DependencyError
		p, _ := problem.As(err)
		if !errors.As(err, &de) || de.Dependency != "db" || p == nil || p.Status != 503 {
			t.Errorf("%s pool after Stop: %v (%T), problem %+v; want a 503 naming db", name, err, err, p)
		}
	}
}

// A savepoint (a transaction's Begin) is the plugin's too: command_timeout
// cuts its statements, a 503 naming db, on a transaction of the DB and on
// one begun on a Conn. Before, Begin was pgx's, and its pg_sleep(5) ran
// whole.
func TestSavepointStatementsAreBounded(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{toml: `command_timeout = "200ms"`})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	inSavepoint := func(tx pgx.Tx) error {
		sp, err := tx.Begin(ctx)
		if err != nil {
			return err
		}
		_, err = sp.Exec(ctx, "SELECT pg_sleep(5)")
		return err
	}
	wantCut(t, "DB.Tx, then a savepoint", func() error { return b.db.Tx(ctx, inSavepoint) })
	wantCut(t, "Conn.Begin, then a savepoint", func() error {
		c, err := b.db.Acquire(ctx)
		if err != nil {
			return err
		}
		defer c.Release()
		tx, err := c.Begin(ctx)
		if err != nil {
			return err
		}
		defer func() { _ = tx.Rollback(ctx) }()
		return inSavepoint(tx)
	})
}

// A tenant asked for after the plugin stopped (a request still running
// during shutdown) is the same 503 naming db as a pool closed under a DB
// taken before: Get's error, not a plain one a handler turns into a 500.
func TestTenantGetAfterStopIsUnavailable(t *testing.T) {
	t.Parallel()
	tmpl := "postgres://postgres@127.0.0.1:5432/" + testDB + "?sslmode=disable&application_name=tenant_{tenant}"
	b := setup(t, setupOpts{toml: fmt.Sprintf("tenant_url_template = %q", tmpl)})
	tp, err := Tenants(b.svc.App)
	if err != nil {
		t.Fatal(err)
	}
	p, err := From(b.svc.App)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := p.Stop(ctx); err != nil { // a second Stop at cleanup is harmless
		t.Fatal(err)
	}
	_, err = tp.Get("b")
	var de *problem.DependencyError
	if pr, _ := problem.As(err); !errors.As(err, &de) || de.Dependency != "db" || pr == nil || pr.Status != 503 || !strings.Contains(err.Error(), "the plugin has stopped") {
		t.Errorf("Get after Stop: %v (%T); want a 503 naming db saying the plugin has stopped", err, err)
	}
}
