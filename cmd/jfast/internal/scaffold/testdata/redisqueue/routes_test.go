package main

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"strings"
	"testing"

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
	toml = ownQueue(t, toml)
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
	for k, v := range env {
		vars[k] = v
	}
	return jfasttest.Start(t, jfasttest.Options{TOML: string(toml), Plugins: opts.Plugins, Routes: opts.Routes, Env: vars})
}

// serviceQueue is the header of the service's queue in jfast.toml.
const serviceQueue = "[plugin.queue.queues.shop]"

// ownQueue renames the service's queue in the jfast.toml text to one no other
// process works: the service's jobs go to it and only this test's workers
// fetch from it, so a dev server working the same Redis never takes
// the test's jobs, nor the test's workers the dev server's. The queue is
// shop-test-<random>.
func ownQueue(t *testing.T, toml []byte) []byte {
	t.Helper()
	text := string(toml)
	if !strings.Contains(text, serviceQueue) {
		t.Fatalf("jfast.toml has no %s: the tests give that queue a name of their own; keep the table, or change serviceQueue in routes_test.go", serviceQueue)
	}
	own := fmt.Sprintf("[plugin.queue.queues.shop-test-%016x]", rand.Uint64())
	return []byte(strings.Replace(text, serviceQueue, own, 1))
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
