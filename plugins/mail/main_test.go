package mail_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"go.uber.org/goleak"
)

// adminURL reaches the machine's PostgreSQL (trust auth) to make and drop this
// package's private database, where the queue (postgres backend) keeps jobs.
const adminURL = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"

// testDB is this run's private database. Tests share it; each works a queue of
// its own, so no App runs another test's deliveries.
var testDB string

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	testDB = "jfast_mail_test_" + hex.EncodeToString(b)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	admin, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		fmt.Fprintf(os.Stderr, "mail tests need the machine's PostgreSQL at 127.0.0.1:5432: %v\n", err)
		return 1
	}
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+testDB); err != nil {
		fmt.Fprintf(os.Stderr, "create database %s: %v\n", testDB, err)
		return 1
	}
	_ = admin.Close(ctx)

	code := m.Run()

	dctx, dcancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer dcancel()
	if admin, err := pgx.Connect(dctx, adminURL); err == nil {
		if _, err := admin.Exec(dctx, "DROP DATABASE IF EXISTS "+testDB+" WITH (FORCE)"); err != nil {
			fmt.Fprintf(os.Stderr, "drop database %s: %v\n", testDB, err)
		}
		_ = admin.Close(dctx)
	}
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: %v\n", err)
			return 1
		}
	}
	return code
}

func dbURL() string {
	return "postgres://postgres@127.0.0.1:5432/" + testDB + "?sslmode=disable"
}
