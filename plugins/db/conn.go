package db

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Conn is a connection taken with [DB.Acquire], held until Release. Its
// statements are those of *pgxpool.Conn with what [DB]'s have: each runs
// under command_timeout as well as its ctx, and one that broke the
// connection (the watchdog cut it on a server that stopped answering, the
// server ended the session, its deadline closed it) returns the db
// dependency error, a 503 naming db, not a 500. A transaction begun on it
// is the same, and Commit or Rollback leaves the connection held.
//
// Conn, Pooled and Hijack give the connection itself, for code that needs
// a *pgx.Conn or a *pgxpool.Conn: statements sent on those get neither.
type Conn struct {
	c  *pgxpool.Conn
	db *DB
}

// Release gives the connection back to the pool (a broken one is
// destroyed). The Conn must not be used after.
func (c *Conn) Release() { c.c.Release() }

// Conn returns the underlying *pgx.Conn.
func (c *Conn) Conn() *pgx.Conn { return c.c.Conn() }

// Pooled returns the underlying *pgxpool.Conn; release either, once.
func (c *Conn) Pooled() *pgxpool.Conn { return c.c }

// Hijack takes the connection out of the pool, as pgxpool.Conn.Hijack: the
// caller closes it. The Conn must not be used after.
func (c *Conn) Hijack() *pgx.Conn { return c.c.Hijack() }

// Ping sends an empty statement, as pgxpool.Conn.Ping.
func (c *Conn) Ping(ctx context.Context) error {
	ctx, cancel := c.db.statementCtx(ctx)
	defer cancel()
	err := c.c.Ping(ctx) // before the connection is asked how the ping left it
	return c.db.connErr(endOf(c.c.Conn()), err)
}

// Exec runs sql and returns its command tag.
func (c *Conn) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	ctx, cancel := c.db.statementCtx(ctx)
	defer cancel()
	tag, err := c.c.Exec(ctx, sql, args...)
	return tag, c.db.connErr(endOf(c.c.Conn()), err)
}

// Query runs sql. Close the rows (pgx.CollectRows and ForEachRow do) before
// the next statement on the connection.
func (c *Conn) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	return asRows(c.query(ctx, sql, args...))
}

func (c *Conn) query(ctx context.Context, sql string, args ...any) (*releasingRows, error) {
	ctx, cancel := c.db.statementCtx(ctx)
	conn := c.c.Conn()
	rows, err := conn.Query(ctx, sql, args...)
	if err != nil {
		cancel()
		return nil, c.db.connErr(endOf(conn), err)
	}
	r := heldSlot(conn).newRows()
	*r = releasingRows{Rows: rows, db: c.db, conn: conn, cancel: cancel}
	return r, nil
}

// QueryRow runs sql; its error, if any, is returned by Scan.
func (c *Conn) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return asRow(c.query(ctx, sql, args...))
}

// SendBatch sends every query of b in one round trip. Close the results
// before the next statement on the connection.
func (c *Conn) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	ctx, cancel := c.db.statementCtx(ctx)
	return c.db.batchOf(c.c.SendBatch(ctx, b), c.c.Conn(), nil, cancel)
}

// CopyFrom copies rows into tableName with the COPY protocol.
func (c *Conn) CopyFrom(ctx context.Context, tableName pgx.Identifier, columnNames []string, rowSrc pgx.CopyFromSource) (int64, error) {
	ctx, cancel := c.db.statementCtx(ctx)
	defer cancel()
	n, err := c.c.CopyFrom(ctx, tableName, columnNames, rowSrc)
	return n, c.db.connErr(endOf(c.c.Conn()), err)
}

// Begin starts a transaction on the connection.
func (c *Conn) Begin(ctx context.Context) (pgx.Tx, error) {
	return c.BeginTx(ctx, pgx.TxOptions{})
}

// BeginTx starts a transaction with opts on the connection.
func (c *Conn) BeginTx(ctx context.Context, opts pgx.TxOptions) (pgx.Tx, error) {
	sctx, cancel := c.db.statementCtx(ctx)
	tx, err := c.c.BeginTx(sctx, opts)
	cancel()
	if err != nil {
		return nil, c.db.connErr(endOf(c.c.Conn()), err)
	}
	return &poolTx{Tx: tx, db: c.db}, nil
}
