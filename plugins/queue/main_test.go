package queue_test

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
// package's private database.
const adminURL = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"

// redisAddr is the machine's Redis. Tests share it with other suites: every test
// uses queues of its own (asynq keys are per queue) and deletes them after.
const redisAddr = "127.0.0.1:6379"

// testDB is this test run's private database, made by TestMain.
var testDB = os.Getenv(childDBEnv)

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		os.Exit(runChild())
	}
	os.Exit(run(m))
}

func run(m *testing.M) int {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	testDB = "jfast_queue_test_" + hex.EncodeToString(b)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	admin, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		fmt.Fprintf(os.Stderr, "queue tests need the machine's PostgreSQL at 127.0.0.1:5432: %v\n", err)
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

// pgURL is the private database, reached at addr.
func pgURL(addr string) string {
	return "postgres://postgres@" + addr + "/" + testDB + "?sslmode=disable"
}
