package db

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/jackc/pgx/v5"

	"github.com/jfastframework/jfast/framework"
)

// setupPrivate starts an App on a private cluster, where a test may end
// sessions (the machine's server is shared with other tests and services),
// and returns an administrator's connection to it.
func setupPrivate(t *testing.T, o setupOpts) (*bundle, *pgx.Conn) {
	t.Helper()
	target := privateCluster(t)
	o.url = target.url
	b := setup(t, o)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	admin, err := pgx.Connect(ctx, target.url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = admin.Close(context.Background()) })
	return b, admin
}

// atCommit makes table, whose rows run body (PL/pgSQL) when the
// transaction that inserted them commits: a deferred constraint trigger,
// which makes a COMMIT slow, or end its session, on demand.
func atCommit(t *testing.T, d *DB, table, body string) {
	t.Helper()
	mustExec(t, d, fmt.Sprintf("CREATE TABLE %s (id int)", table))
	mustExec(t, d, fmt.Sprintf("CREATE FUNCTION %s_at_commit() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN %s; RETURN NULL; END $$", table, body))
	mustExec(t, d, fmt.Sprintf("CREATE CONSTRAINT TRIGGER at_commit AFTER INSERT ON %s DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION %s_at_commit()", table, table))
}

// commitRuns are the ways of committing a transaction that ran insert:
// DB.Tx, Commit of a transaction begun on *DB, and of one begun on a Conn.
func (b *bundle) commitRuns(ctx context.Context, insert string) []statementRun {
	commit := func(tx pgx.Tx, err error) error {
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, insert); err != nil {
			return err
		}
		return tx.Commit(ctx)
	}
	return []statementRun{
		{"DB.Tx: COMMIT", func() error {
			return b.db.Tx(ctx, func(tx pgx.Tx) error { _, err := tx.Exec(ctx, insert); return err })
		}},
		{"DB.Begin: COMMIT", func() error { return commit(b.db.Begin(ctx)) }},
		{"Conn.Begin: COMMIT", b.onConn(ctx, func(c *Conn) error { return commit(c.Begin(ctx)) })},
	}
}

// endOwnSession is a PL/pgSQL body that makes the server end the session
// running it (57P01, as pg_terminate_backend from another session).
const endOwnSession = "PERFORM pg_terminate_backend(pg_backend_pid()); PERFORM pg_sleep(10)"

// endSession makes the server end the session of pid, and waits until it
// has ended.
func endSession(ctx context.Context, t *testing.T, admin *pgx.Conn, pid uint32) {
	t.Helper()
	var ended bool
	if err := admin.QueryRow(ctx, "SELECT pg_terminate_backend($1, 10000)", pid).Scan(&ended); err != nil || !ended {
		t.Fatalf("terminate session %d: %v %v", pid, ended, err)
	}
}

// backendPID is the server's process of the session q runs on.
func backendPID(ctx context.Context, t *testing.T, q interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}) uint32 {
	t.Helper()
	var pid uint32
	if err := q.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&pid); err != nil {
		t.Fatal(err)
	}
	return pid
}

// A statement that breaks its connection is the db dependency error, a 503
// naming db, whichever statement it is: the COMMIT and ROLLBACK that end a
// transaction and a Conn's Ping too (before, those asked the connection
// whether it had broken before sending the statement), and each statement
// of a batch, read with Exec, Query or QueryRow (before, only Close's error
// was): not pgx's error, a 500.
func TestEveryStatementThatBreaksItsConnectionIs503(t *testing.T) {
	t.Parallel()
	table := tableName(t)
	insert := "INSERT INTO " + table + " VALUES (1)"
	b, admin := setupPrivate(t, setupOpts{routes: func(app *framework.App, r chi.Router) error {
		pg, err := Get(app)
		if err != nil {
			return err
		}
		r.Method(http.MethodPost, "/commit", framework.Handler(func(w http.ResponseWriter, r *http.Request) error {
			return pg.Tx(r.Context(), func(tx pgx.Tx) error {
				_, err := tx.Exec(r.Context(), insert)
				return err
			})
		}))
		return nil
	}})
	atCommit(t, b.db, table, endOwnSession)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	if r := b.svc.Do(t, http.MethodPost, "/commit", ""); !isDB503(r.Status, r.Body) {
		t.Errorf("a COMMIT whose session the server ended: %d %s; want a 503 naming db", r.Status, r.Body)
	}

	runs := append(b.commitRuns(ctx, insert), []statementRun{
		{"DB.Begin: ROLLBACK", func() error {
			tx, err := b.db.Begin(ctx)
			if err != nil {
				return err
			}
			endSession(ctx, t, admin, backendPID(ctx, t, tx))
			return tx.Rollback(ctx)
		}},
		{"Conn.Ping", b.onConn(ctx, func(c *Conn) error {
			endSession(ctx, t, admin, backendPID(ctx, t, c))
			return c.Ping(ctx)
		})},
	}...)
	// A batch whose statement ends its own session.
	mustExec(t, b.db, fmt.Sprintf("CREATE FUNCTION %s_end_session() RETURNS int LANGUAGE plpgsql AS $$ BEGIN %s; RETURN 1; END $$", table, endOwnSession))
	runs = append(runs, b.batchRuns(ctx, "SELECT "+table+"_end_session()")...)
	for _, tc := range runs {
		if err := tc.run(); !isDBDependencyError(err) {
			t.Errorf("%s, its session ended by the server: %T %v; want a db dependency error", tc.name, err, err)
		}
	}
	if snap := b.db.Breaker(); snap.Consecutive != 0 {
		t.Fatalf("breaker %+v: a broken statement is not a connection attempt", snap)
	}
}
