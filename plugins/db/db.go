package db

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/jfastframework/jfast/framework/resilience"
	"github.com/jfastframework/jfast/problem"
)

// DB is a PostgreSQL pool whose every acquisition goes through the bounded
// ping and the connection breaker. Its methods are those of *pgxpool.Pool;
// a statement that cannot get a connection returns a
// *problem.DependencyError naming "db" (503, with Retry-After while the
// breaker is open), and an error the server sent (a constraint violation, a
// syntax error) is returned as pgx returns it (*pgconn.PgError) and counts
// for nothing in the breaker.
//
// When command_timeout is set, each statement runs under it as well as
// under ctx (a batch, and a transaction's COMMIT and ROLLBACK, too);
// getting the connection is bounded by ctx, ping_timeout and
// connect_timeout, not by command_timeout. A DB is safe for concurrent use.
type DB struct {
	pool           *pgxpool.Pool
	gate           *gate
	commandTimeout time.Duration

	// tenants and tenant are set on a tenant's DB: where it came from and
	// for whom, so that once evicted it can follow the tenant to its pool of
	// the moment (see Acquire).
	tenants *tenantPools
	tenant  string
	evicted atomic.Bool // set (under tenants.mu) before the pool is closed
}

// close closes the pool for good: the plugin's Stop, a tenant pool's
// eviction. pgxpool's Close waits for the connections in use, and the
// watchdog keeps watching them until it returns: a statement in flight on a
// server that stopped answering is cut within the watchdog's bound (a 503
// naming db), and the Stop ends then, instead of waiting for a server that
// may never answer.
func (d *DB) close() {
	d.gate.close()
	d.pool.Close()
	d.gate.stopWatching()
}

// maxFollows bounds how many times one acquisition follows a tenant to a
// pool evicted again before it could use it. Only more tenants busy at once
// than max_tenant_pools make a pool evicted that quickly.
const maxFollows = 3

// Pool returns the underlying pool, for libraries that take a
// *pgxpool.Pool (River, for one). Its acquisitions still make the bounded
// ping, but they do not go through the breaker. For a tenant's DB it is the
// tenant's pool of the moment, opened again if it was evicted; a pool kept
// from an earlier call may have been closed by an eviction since.
func (d *DB) Pool() *pgxpool.Pool {
	if cur, err := d.follow(); err == nil {
		return cur.pool
	}
	return d.pool
}

// Stat returns the pool's statistics (for an evicted tenant's DB, those of
// the tenant's open pool if there is one, else of the closed one).
func (d *DB) Stat() *pgxpool.Stat { return d.current().pool.Stat() }

// Breaker returns a snapshot of the connection breaker (for an evicted
// tenant's DB, as Stat).
func (d *DB) Breaker() resilience.BreakerSnapshot { return d.current().gate.breaker.Snapshot() }

// Acquire returns a connection through the bounded ping and the breaker,
// whose statements get command_timeout and report a broken connection as
// the db dependency error, as DB's do (see [Conn]). Release it when done.
//
// A tenant's DB whose pool the LRU evicted (while a request was using it,
// say) follows the tenant: it acquires from the tenant's pool of the moment,
// opening it again if needed, so the request keeps working. Connections
// already taken from the evicted pool keep working until released: its close
// waits for them.
func (d *DB) Acquire(ctx context.Context) (*Conn, error) {
	c, _, err := d.acquire(ctx)
	if err != nil {
		return nil, err
	}
	return &Conn{c: c, db: d}, nil
}

// acquire is Acquire, with the connection's slot (nil for a connection the
// plugin did not open).
func (d *DB) acquire(ctx context.Context) (*pgxpool.Conn, *connSlot, error) {
	cur := d
	for range maxFollows {
		next, err := cur.follow()
		if err != nil {
			return nil, nil, err
		}
		c, s, err := next.gate.acquire(ctx, next.pool)
		if next.tenants == nil || !errors.Is(err, errPoolClosed) {
			return c, s, err
		}
		cur = next // evicted between follow and acquire: follow again
	}
	return nil, nil, &problem.DependencyError{Dependency: dependencyName, Err: fmt.Errorf(
		"db: tenant %s: its pool was evicted %d times while this call waited for it: more tenants are busy at once than max_tenant_pools (%d)",
		d.tenant, maxFollows, d.tenants.p.cfg.MaxTenantPools)}
}

// follow returns the DB that serves d's calls now: d, or for an evicted
// tenant's DB the tenant's open pool, opened again if needed (which may
// evict another). When the plugin has stopped, the error is a 503 naming db.
func (d *DB) follow() (*DB, error) {
	if d.tenants == nil || !d.evicted.Load() {
		return d, nil
	}
	cur, err := d.tenants.get(d.tenant)
	if err == nil {
		return cur, nil
	}
	var de *problem.DependencyError
	if errors.As(err, &de) {
		return nil, err // the plugin stopped: already the db dependency error
	}
	return nil, &problem.DependencyError{Dependency: dependencyName, Err: err}
}

// current is d, or for an evicted tenant's DB the tenant's open pool if there
// is one; it opens nothing.
func (d *DB) current() *DB {
	if d.tenants == nil || !d.evicted.Load() {
		return d
	}
	if cur := d.tenants.peek(d.tenant); cur != nil {
		return cur
	}
	return d
}

// statementCtx applies command_timeout.
func (d *DB) statementCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	if d.commandTimeout <= 0 {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, d.commandTimeout)
}

// Exec runs sql and returns its command tag.
func (d *DB) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	c, _, err := d.acquire(ctx)
	if err != nil {
		return pgconn.CommandTag{}, err
	}
	defer c.Release()
	ctx, cancel := d.statementCtx(ctx)
	defer cancel()
	tag, err := c.Exec(ctx, sql, args...)
	return tag, d.connErr(endOf(c.Conn()), err)
}

// Query runs sql. The connection goes back to the pool when the rows are
// closed (pgx.CollectRows and ForEachRow close them; otherwise call Close).
func (d *DB) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	return asRows(d.query(ctx, sql, args...))
}

func (d *DB) query(ctx context.Context, sql string, args ...any) (*releasingRows, error) {
	c, s, err := d.acquire(ctx)
	if err != nil {
		return nil, err
	}
	ctx, cancel := d.statementCtx(ctx)
	rows, err := c.Query(ctx, sql, args...)
	if err != nil {
		err = d.connErr(endOf(c.Conn()), err)
		c.Release()
		cancel()
		return nil, err
	}
	r := s.newRows()
	*r = releasingRows{Rows: rows, db: d, conn: c.Conn(), pooled: c, cancel: cancel}
	return r, nil
}

// QueryRow runs sql; its error, if any, is returned by Scan.
func (d *DB) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return asRow(d.query(ctx, sql, args...))
}

// SendBatch sends every query of b in one round trip. The connection goes
// back to the pool when the results are closed. A query that broke the
// connection is the db dependency error, whichever of the results' methods
// returns its error (Exec, Query and its rows' Err, QueryRow, Close).
func (d *DB) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	c, _, err := d.acquire(ctx)
	if err != nil {
		return pgx.FailedBatchResults(b, err)
	}
	ctx, cancel := d.statementCtx(ctx)
	return d.batchOf(c.SendBatch(ctx, b), c.Conn(), c, cancel)
}

// CopyFrom copies rows into tableName with the COPY protocol.
func (d *DB) CopyFrom(ctx context.Context, tableName pgx.Identifier, columnNames []string, rowSrc pgx.CopyFromSource) (int64, error) {
	c, _, err := d.acquire(ctx)
	if err != nil {
		return 0, err
	}
	defer c.Release()
	ctx, cancel := d.statementCtx(ctx)
	defer cancel()
	n, err := c.CopyFrom(ctx, tableName, columnNames, rowSrc)
	return n, d.connErr(endOf(c.Conn()), err)
}

// Begin starts a transaction. Commit or Rollback it; either returns the
// connection to the pool. Prefer [DB.Tx], which cannot forget to.
func (d *DB) Begin(ctx context.Context) (pgx.Tx, error) {
	return d.BeginTx(ctx, pgx.TxOptions{})
}

// BeginTx starts a transaction with opts.
func (d *DB) BeginTx(ctx context.Context, opts pgx.TxOptions) (pgx.Tx, error) {
	c, _, err := d.acquire(ctx)
	if err != nil {
		return nil, err
	}
	sctx, cancel := d.statementCtx(ctx)
	tx, err := c.BeginTx(sctx, opts)
	cancel()
	if err != nil {
		err = d.connErr(endOf(c.Conn()), err)
		c.Release()
		return nil, err
	}
	return &poolTx{Tx: tx, conn: c, db: d}, nil
}

// Tx runs fn in a transaction: it commits when fn returns nil and rolls
// back when fn returns an error (which Tx returns) or panics (Tx rolls back,
// then panics again with the same value).
func (d *DB) Tx(ctx context.Context, fn func(pgx.Tx) error) error {
	return d.TxWith(ctx, pgx.TxOptions{}, fn)
}

// TxWith is [DB.Tx] with transaction options (isolation level, read only).
func (d *DB) TxWith(ctx context.Context, opts pgx.TxOptions, fn func(pgx.Tx) error) (err error) {
	tx, err := d.BeginTx(ctx, opts)
	if err != nil {
		return err
	}
	done := false
	defer func() {
		if done {
			return
		}
		// fn panicked: roll back on a context that is not the caller's (it may
		// be what ended), then let the panic go on.
		rctx, cancel := rollbackCtx(ctx)
		_ = tx.Rollback(rctx)
		cancel()
	}()
	ferr := fn(tx)
	done = true
	if ferr != nil {
		rctx, cancel := rollbackCtx(ctx)
		defer cancel()
		if rerr := tx.Rollback(rctx); rerr != nil && !isTxClosed(rerr) {
			return fmt.Errorf("%w (and the rollback failed: %v)", ferr, rerr)
		}
		return ferr
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("db: commit: %w", err)
	}
	return nil
}

// rollbackTimeout bounds a rollback made after the caller's work failed: if
// the server does not answer, the connection is closed, which rolls back too.
const rollbackTimeout = 5 * time.Second

func rollbackCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), rollbackTimeout)
}

func isTxClosed(err error) bool { return errors.Is(err, pgx.ErrTxClosed) }

// connErr turns the error of a statement that broke its connection (the
// server went away, stopped answering within the statement's deadline, or
// terminated the session) into the db dependency error: a 503 naming db,
// not a 500. An error that left the connection usable (a constraint
// violation, a syntax error) is the caller's and is returned as is. errors.Is
// and errors.As still reach the cause (context.DeadlineExceeded,
// *pgconn.PgError).
//
// A statement that broke its connection at a deadline (the caller's, or
// command_timeout) got no answer: the pool is marked stale, so the next
// acquisitions ping their connections (bounded by ping_timeout) whatever
// their idle time, and a server that stopped answering opens the breaker on
// that ping's hang instead of holding more statements. The cut itself is not
// counted: a query may be slow, a SELECT 1 may not.
//
// A statement the watchdog cut (the server answered no liveness check while
// it ran) gets the breaker's error: a 503 naming db with Retry-After.
func (d *DB) connErr(e connEnd, err error) error {
	if err == nil || !e.broken {
		return err
	}
	if e.cut {
		return d.gate.hungErr(err)
	}
	if resilience.IsTimeout(err) {
		d.gate.stale.Store(true)
	}
	var de *problem.DependencyError
	if errors.As(err, &de) {
		return err
	}
	return &problem.DependencyError{Dependency: dependencyName, Err: scrub(fmt.Errorf("db: the connection broke during the statement: %w", err))}
}

// releasingRows returns its connection when closed, and reports an error
// that broke the connection as the db dependency error.
type releasingRows struct {
	pgx.Rows
	db       *DB
	conn     *pgx.Conn          // asked how it ended before it is released
	pooled   *pgxpool.Conn      // released on Close; nil in a transaction
	cancel   context.CancelFunc // of the statement's context; nil in a batch
	end      connEnd
	released bool
}

// Close closes the rows and releases the connection, once: a second Close (Next
// closes at the end, and callers close again) must not touch a connection that
// is back in the pool and may be serving another request.
func (r *releasingRows) Close() {
	r.Rows.Close()
	if r.released {
		return
	}
	r.released = true
	r.end = endOf(r.conn)
	if r.pooled != nil {
		r.pooled.Release()
	}
	if r.cancel != nil {
		r.cancel()
	}
}

func (r *releasingRows) Err() error {
	if r.db == nil {
		return r.Rows.Err()
	}
	return r.db.connErr(r.end, r.Rows.Err())
}

func (r *releasingRows) Next() bool {
	if r.Rows.Next() {
		return true
	}
	r.Close()
	return false
}

// rowOf is QueryRow's Row: Scan reads the first row and closes. A pointer
// to the rows themselves, so that returning it as a pgx.Row allocates
// nothing more.
type rowOf releasingRows

func (ro *rowOf) Scan(dest ...any) error {
	r := (*releasingRows)(ro)
	defer r.Close()
	if !r.Next() {
		if err := r.Err(); err != nil {
			return err
		}
		return pgx.ErrNoRows
	}
	if err := r.Rows.Scan(dest...); err != nil {
		return err
	}
	r.Close()
	return r.Err()
}

// asRows is Query's answer from query's, for DB and poolTx alike: with an
// error the rows are a nil interface, not a nil *releasingRows in one.
func asRows(rows *releasingRows, err error) (pgx.Rows, error) {
	if err != nil {
		return nil, err
	}
	return rows, nil
}

// asRow is QueryRow's answer from query's, for DB and poolTx alike: an error
// waits for Scan.
func asRow(rows *releasingRows, err error) pgx.Row {
	if err != nil {
		return errRow{err}
	}
	return (*rowOf)(rows)
}

type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }

// releasingBatch is a batch's results: each statement's error, and the
// rows it returns, are those of a single statement (one that broke the
// connection is the db dependency error), and Close gives the connection
// back.
type releasingBatch struct {
	pgx.BatchResults
	tx      *poolTx
	db      *DB
	conn    *pgx.Conn // asked how it ended until the batch is closed
	release func()    // of the statement's context, and the connection unless held; nil once closed
	end     connEnd   // how the connection ended, once closed
}

// batchOf is the results br of a batch sent on conn under the context
// cancel ends. pooled is the pool's connection, released by Close (nil when
// the caller holds it); a batch that began a transaction leaves it to the
// transaction.
func (d *DB) batchOf(br pgx.BatchResults, conn *pgx.Conn, pooled *pgxpool.Conn, cancel context.CancelFunc) *releasingBatch {
	b := &releasingBatch{BatchResults: br, db: d, conn: conn, release: cancel}
	if tx := br.Tx(); tx != nil {
		// The batch began a transaction: it owns the connection until it ends.
		b.tx = &poolTx{Tx: tx, conn: pooled, db: d}
	} else if pooled != nil {
		b.release = func() { pooled.Release(); cancel() }
	}
	return b
}

// ended is how the batch left its connection: asked of the connection
// while the batch holds it, remembered once closed (the connection may then
// be back in the pool, serving another request).
func (b *releasingBatch) ended() connEnd {
	if b.release == nil {
		return b.end
	}
	return endOf(b.conn)
}

func (b *releasingBatch) Exec() (pgconn.CommandTag, error) {
	tag, err := b.BatchResults.Exec()
	return tag, b.db.connErr(b.ended(), err)
}

func (b *releasingBatch) Query() (pgx.Rows, error) { return asRows(b.query()) }

func (b *releasingBatch) QueryRow() pgx.Row { return asRow(b.query()) }

// query is the next statement's rows, which the batch holds: closing them
// releases nothing.
func (b *releasingBatch) query() (*releasingRows, error) {
	rows, err := b.BatchResults.Query()
	if err != nil {
		return nil, b.db.connErr(b.ended(), err)
	}
	r := heldSlot(b.conn).newRows()
	*r = releasingRows{Rows: rows, db: b.db, conn: b.conn}
	return r, nil
}

func (b *releasingBatch) Tx() pgx.Tx {
	if b.tx == nil {
		return b.BatchResults.Tx()
	}
	return b.tx
}

func (b *releasingBatch) Close() error {
	err := b.BatchResults.Close()
	if b.release != nil {
		b.end = endOf(b.conn)
		b.release()
		b.release = nil
	}
	return b.db.connErr(b.end, err)
}

// poolTx is a transaction on a connection of the pool: statements get
// command_timeout, and Commit and Rollback return the connection (conn; nil
// for one begun on a Conn, whose holder releases it).
type poolTx struct {
	pgx.Tx
	conn *pgxpool.Conn
	db   *DB
}

func (t *poolTx) releaseConn() {
	if t.conn != nil {
		t.conn.Release()
		t.conn = nil
	}
}

// errCommitUnknown is added to the error of a COMMIT that broke its
// connection after it may have reached the server (its deadline cut it,
// the server ended the session, the watchdog cut it): the server may have
// committed before the connection broke, and nothing can tell the caller.
var errCommitUnknown = errors.New("db: the connection broke after the COMMIT was sent, before its answer: whether the transaction committed is unknown")

// Commit commits under command_timeout, as any statement. A COMMIT that
// broke its connection is the db dependency error, and says that whether
// the transaction committed is unknown.
func (t *poolTx) Commit(ctx context.Context) error {
	return t.finish(ctx, t.Tx.Commit, errCommitUnknown)
}

// finish runs the COMMIT or ROLLBACK that ends the transaction under
// command_timeout, its error as endErr makes it, and gives back the
// connection the transaction held.
func (t *poolTx) finish(ctx context.Context, stmt func(context.Context) error, unknown error) error {
	ctx, cancel := t.db.statementCtx(ctx)
	defer cancel()
	err := t.endErr(stmt(ctx), unknown)
	t.releaseConn()
	return err
}

func (t *poolTx) end() connEnd { return endOf(t.Tx.Conn()) }

// endErr is connErr for the error of the COMMIT or ROLLBACK that ended the
// transaction, the connection asked once it has run; unknown, when not nil,
// is added to the error when the statement broke the connection after it may
// have reached the server. A transaction that was already over is not asked:
// its connection may be back in the pool, serving another request.
func (t *poolTx) endErr(err, unknown error) error {
	if err == nil || isTxClosed(err) {
		return err
	}
	e := t.end()
	if e.broken && unknown != nil && !pgconn.SafeToRetry(err) {
		err = fmt.Errorf("%w: %w", unknown, err)
	}
	return t.db.connErr(e, err)
}

// Begin starts a savepoint (a nested transaction), under command_timeout as
// any statement; its statements are the plugin's too: command_timeout, and
// the db dependency error when one breaks the connection. It holds no
// connection of its own: the transaction's is given back when that ends.
func (t *poolTx) Begin(ctx context.Context) (pgx.Tx, error) {
	sctx, cancel := t.db.statementCtx(ctx)
	defer cancel()
	sp, err := t.Tx.Begin(sctx)
	if err != nil {
		return nil, t.db.connErr(t.end(), err)
	}
	return &poolTx{Tx: sp, db: t.db}, nil
}

// Rollback rolls back under command_timeout, as any statement.
func (t *poolTx) Rollback(ctx context.Context) error {
	return t.finish(ctx, t.Tx.Rollback, nil)
}

func (t *poolTx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	ctx, cancel := t.db.statementCtx(ctx)
	defer cancel()
	tag, err := t.Tx.Exec(ctx, sql, args...)
	return tag, t.db.connErr(t.end(), err)
}

func (t *poolTx) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	return asRows(t.query(ctx, sql, args...))
}

func (t *poolTx) query(ctx context.Context, sql string, args ...any) (*releasingRows, error) {
	ctx, cancel := t.db.statementCtx(ctx)
	rows, err := t.Tx.Query(ctx, sql, args...)
	if err != nil {
		cancel()
		return nil, t.db.connErr(t.end(), err)
	}
	r := heldSlot(t.Tx.Conn()).newRows()
	*r = releasingRows{Rows: rows, db: t.db, conn: t.Tx.Conn(), cancel: cancel}
	return r, nil
}

func (t *poolTx) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return asRow(t.query(ctx, sql, args...))
}

func (t *poolTx) CopyFrom(ctx context.Context, tableName pgx.Identifier, columnNames []string, rowSrc pgx.CopyFromSource) (int64, error) {
	ctx, cancel := t.db.statementCtx(ctx)
	defer cancel()
	n, err := t.Tx.CopyFrom(ctx, tableName, columnNames, rowSrc)
	return n, t.db.connErr(t.end(), err)
}

func (t *poolTx) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	ctx, cancel := t.db.statementCtx(ctx)
	return t.db.batchOf(t.Tx.SendBatch(ctx, b), t.Tx.Conn(), nil, cancel)
}
