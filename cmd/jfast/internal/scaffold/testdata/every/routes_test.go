package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/jfastframework/jfast/jfasttest"
)

// setup starts the service as main does, with jfast.toml, on a free port, and
// stops it when the test ends. The test's JFAST_<PLUGIN>_* variables for the
// plugins the service compiles in reach it (JFAST_DB_URL=... go test points the
// tests at a database), then env. Its queue is one of its own (ownQueue).
func setup(t *testing.T, env map[string]string) *jfasttest.Service {
	t.Helper()
	toml, err := os.ReadFile("jfast.toml")
	if err != nil {
		t.Fatal(err)
	}
	toml, _ = ownQueue(t, toml) // on PostgreSQL the queue goes with the test's database
	opts := Options()
	compiled := map[string]bool{}
	for _, p := range opts.Plugins {
		compiled[strings.ToUpper(p.Name())] = true
	}
	vars := map[string]string{}
	for _, kv := range os.Environ() {
		k, v, _ := strings.Cut(kv, "=")
		rest, ok := strings.CutPrefix(k, "JFAST_")
		section, _, _ := strings.Cut(rest, "_")
		if ok && compiled[section] {
			vars[k] = v
		}
	}
	// The files disk's root is a directory of the test's own, not jfast.toml's
	// data/files in the project (the storage plugin makes its root at start),
	// unless the environment moves it.
	if _, ok := vars["JFAST_STORAGE_DISKS__FILES__ROOT"]; !ok {
		vars["JFAST_STORAGE_DISKS__FILES__ROOT"] = t.TempDir()
	}
	// The gRPC server listens on a free port, so that tests in parallel (and a
	// running service) never compete for jfast.toml's.
	vars["JFAST_GRPC_SERVER__LISTEN"] = "127.0.0.1:0"
	for k, v := range env {
		vars[k] = v
	}
	return jfasttest.Start(t, jfasttest.Options{TOML: string(toml), Plugins: opts.Plugins, Routes: opts.Routes, Env: vars})
}

// serviceQueue is the header of the service's queue in jfast.toml.
const serviceQueue = "[plugin.queue.queues.shop]"

// ownQueue renames the service's queue in the jfast.toml text to one no other
// process works: the service's jobs go to it and only this test's workers
// fetch from it, so a dev server working the same database never takes
// the test's jobs, nor the test's workers the dev server's. The queue is
// shop-test-<random>, which it returns with the text.
func ownQueue(t *testing.T, toml []byte) ([]byte, string) {
	t.Helper()
	text := string(toml)
	if !strings.Contains(text, serviceQueue) {
		t.Fatalf("jfast.toml has no %s: the tests give that queue a name of their own; keep the table, or change serviceQueue in routes_test.go", serviceQueue)
	}
	own := fmt.Sprintf("shop-test-%016x", rand.Uint64())
	return []byte(strings.Replace(text, serviceQueue, "[plugin.queue.queues."+own+"]", 1)), own
}

// privateDB makes a database of the test's own on the machine's PostgreSQL
// (jfasttest.PostgresAdminURL: $JFAST_TEST_PG_ADMIN_URL, else postgres@127.0.0.1:5432
// with trust auth) and drops it when the test ends: its tables and jobs are its
// own, never a dev server's or another test's. It returns the JFAST_DB_URL that
// points the service at it. Without a PostgreSQL to reach the test is skipped,
// saying why; any other failure fails it.
func privateDB(t *testing.T) map[string]string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	d, err := jfasttest.CreateDatabase(ctx, "shop")
	var unreachable *pgconn.ConnectError
	switch {
	case errors.As(err, &unreachable):
		t.Skipf("skipped: no PostgreSQL to make a private database on (set JFAST_TEST_PG_ADMIN_URL): %v", err)
	case err != nil:
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := d.Drop(ctx); err != nil {
			t.Error(err)
		}
	})
	return map[string]string{"JFAST_DB_URL": d.URL()}
}

func TestHello(t *testing.T) {
	t.Parallel()
	svc := setup(t, nil)
	resp := svc.Get(t, "/hello?name=jfast")
	if resp.Status != http.StatusOK {
		t.Fatalf("status %d: %s", resp.Status, resp)
	}
	var got greeting
	if err := json.Unmarshal(resp.Body, &got); err != nil {
		t.Fatal(err)
	}
	if got.Message != "hello, jfast" {
		t.Fatalf("message %q", got.Message)
	}
	if resp := svc.Get(t, "/hello?name="+strings.Repeat("x", 101)); resp.Status != http.StatusUnprocessableEntity {
		t.Fatalf("a long name: status %d: %s", resp.Status, resp)
	}
}

func TestProbes(t *testing.T) {
	t.Parallel()
	svc := setup(t, nil)
	if resp := svc.Get(t, "/live"); resp.Status != http.StatusOK {
		t.Fatalf("/live: status %d: %s", resp.Status, resp)
	}
	// No plugin is critical in jfast.toml, so a dependency that is down makes the
	// service "degraded", still 200: the orchestrator keeps the replica.
	if resp := svc.Get(t, "/ready"); resp.Status != http.StatusOK {
		t.Fatalf("/ready: status %d: %s", resp.Status, resp)
	}
}
