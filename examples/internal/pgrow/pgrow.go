// Package pgrow reads one row through the db plugin's pool.
//
// It stands in for db.DB.QueryRow while that closes its rows twice when no
// row is found: the second close reads the connection after it went back to
// the pool, which the race detector reports (plugins/db's releasingRows.Close
// asks whether the connection broke even when it was already released). Once
// that is fixed, callers go back to QueryRow(...).Scan(...).
package pgrow

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/jfastframework/jfast/plugins/db"
)

// Scan runs sql and scans its first row into dest, or returns pgx.ErrNoRows.
// Errors are the pool's: a *problem.DependencyError naming db when the
// database cannot be reached, the server's *pgconn.PgError otherwise.
func Scan(ctx context.Context, pg *db.DB, sql string, args []any, dest ...any) error {
	rows, err := pg.Query(ctx, sql, args...)
	if err != nil {
		return err
	}
	if !rows.Next() { // Next has closed the rows and released the connection
		if err := rows.Err(); err != nil {
			return err
		}
		return pgx.ErrNoRows
	}
	err = rows.Scan(dest...)
	rows.Close()
	if err != nil {
		return err
	}
	return rows.Err()
}
