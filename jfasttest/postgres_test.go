package jfasttest

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

func TestNewDatabaseIsPrivateAndDropped(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var d *Database
	t.Run("use", func(t *testing.T) {
		d = NewDatabase(t, "kit")
		conn, err := pgx.Connect(ctx, d.URL())
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(ctx)
		var name string
		if err := conn.QueryRow(ctx, "select current_database()").Scan(&name); err != nil || name != d.Name {
			t.Fatalf("current_database() = %q, %v; want %q", name, err, d.Name)
		}
	})
	admin, err := pgx.Connect(ctx, PostgresAdminURL())
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	var n int
	if err := admin.QueryRow(ctx, "select count(*) from pg_database where datname = $1", d.Name).Scan(&n); err != nil || n != 0 {
		t.Fatalf("database %s still exists after its test (%d, %v)", d.Name, n, err)
	}
	if _, err := CreateDatabase(ctx, "Bad Name"); err == nil {
		t.Fatal("a prefix that is not an identifier was accepted")
	}
}
