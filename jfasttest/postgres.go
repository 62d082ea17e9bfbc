package jfasttest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"regexp"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"go.uber.org/goleak"
)

// PostgresAdminURL reaches the PostgreSQL that private test databases are made
// on: $JFAST_TEST_PG_ADMIN_URL, else the local server with trust auth.
func PostgresAdminURL() string {
	if u := os.Getenv("JFAST_TEST_PG_ADMIN_URL"); u != "" {
		return u
	}
	return "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"
}

// Database is a private PostgreSQL database, so tests never share tables with
// other suites on the same server.
type Database struct {
	// Name is "jfast_<prefix>_test_<12 hex characters>".
	Name  string
	admin string
}

var namePart = regexp.MustCompile(`^[a-z][a-z0-9_]{0,20}$`)

// CreateDatabase makes a private database named after prefix ("db", "queue").
func CreateDatabase(ctx context.Context, prefix string) (*Database, error) {
	if !namePart.MatchString(prefix) {
		return nil, fmt.Errorf("jfasttest: database prefix %q must be a short lowercase identifier", prefix)
	}
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	d := &Database{Name: "jfast_" + prefix + "_test_" + hex.EncodeToString(b), admin: PostgresAdminURL()}
	admin, err := pgx.Connect(ctx, d.admin)
	if err != nil {
		return nil, fmt.Errorf("jfasttest: tests need PostgreSQL (set JFAST_TEST_PG_ADMIN_URL, default 127.0.0.1:5432): %w", err)
	}
	defer admin.Close(ctx)
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+d.Name); err != nil {
		return nil, fmt.Errorf("jfasttest: create database %s: %w", d.Name, err)
	}
	return d, nil
}

// URL is the database's connection string on the admin URL's server.
func (d *Database) URL() string {
	cfg, err := pgx.ParseConfig(d.admin)
	if err != nil {
		return ""
	}
	return d.URLVia(fmt.Sprintf("%s:%d", cfg.Host, cfg.Port))
}

// URLVia is the database's connection string through addr ("host:port", e.g. a
// drills.Proxy in front of the server).
func (d *Database) URLVia(addr string) string {
	cfg, err := pgx.ParseConfig(d.admin)
	if err != nil {
		return ""
	}
	return fmt.Sprintf("postgres://%s@%s/%s?sslmode=disable", cfg.User, addr, d.Name)
}

// Drop removes the database, ending any session still in it.
func (d *Database) Drop(ctx context.Context) error {
	admin, err := pgx.Connect(ctx, d.admin)
	if err != nil {
		return fmt.Errorf("jfasttest: drop database %s: %w", d.Name, err)
	}
	defer admin.Close(ctx)
	if _, err := admin.Exec(ctx, "DROP DATABASE IF EXISTS "+d.Name+" WITH (FORCE)"); err != nil {
		return fmt.Errorf("jfasttest: drop database %s: %w", d.Name, err)
	}
	return nil
}

// NewDatabase makes a private database for one test and drops it when the test
// ends.
func NewDatabase(t testing.TB, prefix string) *Database {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	d, err := CreateDatabase(ctx, prefix)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := d.Drop(ctx); err != nil {
			t.Error(err)
		}
	})
	return d
}

// MainWithDatabase is a TestMain body for a package whose tests share one private
// database: it makes the database, stores it in *db, runs the tests, drops it,
// and then checks for leaked goroutines (goleak). It returns the exit code:
//
//	var testDB *jfasttest.Database
//
//	func TestMain(m *testing.M) { os.Exit(jfasttest.MainWithDatabase(m, "orders", &testDB)) }
//
// Each ready function runs once the database exists, before the tests.
func MainWithDatabase(m *testing.M, prefix string, db **Database, ready ...func(*Database)) int {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	d, err := CreateDatabase(ctx, prefix)
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	*db = d
	for _, f := range ready {
		f(d)
	}
	code := m.Run()
	ctx, cancel = context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := d.Drop(ctx); err != nil {
		fmt.Fprintln(os.Stderr, err)
	}
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: %v\n", err)
			return 1
		}
	}
	return code
}
