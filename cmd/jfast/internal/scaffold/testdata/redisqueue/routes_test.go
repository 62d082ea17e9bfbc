package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/jfastframework/jfast/jfasttest"
	"github.com/jfastframework/jfast/plugins/cache"
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
	toml, queue := ownQueue(t, toml)
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
	// The test's queue is deleted from Redis, with any job left in it, once
	// the service has stopped (a cleanup registered before Start runs after
	// the one that stops it).
	var redisAt *redis.Options
	t.Cleanup(func() { deleteQueue(t, redisAt, queue) })
	svc := jfasttest.Start(t, jfasttest.Options{TOML: string(toml), Plugins: opts.Plugins, Routes: opts.Routes, Env: vars})
	if c, err := cache.From(svc.App); err == nil {
		if rc, ok := c.Client().(*redis.Client); ok {
			redisAt = rc.Options()
		}
	}
	return svc
}

// serviceQueue is the header of the service's queue in jfast.toml.
const serviceQueue = "[plugin.queue.queues.shop]"

// ownQueue renames the service's queue in the jfast.toml text to one no other
// process works: the service's jobs go to it and only this test's workers
// fetch from it, so a dev server working the same Redis never takes
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

// deleteQueue deletes the test's queue from the Redis at o: its jobs and
// every key asynq keeps for it, the processed and failed counters included
// (asynq's DeleteQueue leaves those, and they never expire), so runs of the
// tests leave nothing behind. A Redis it cannot reach (the tests that need one
// were skipped) holds no queue of the test's; nor does one it has no address
// for (a cluster or sentinel URL: o is nil).
func deleteQueue(t *testing.T, o *redis.Options, queue string) {
	if o == nil {
		return
	}
	in := asynq.NewInspector(asynq.RedisClientOpt{Network: o.Network, Addr: o.Addr, Username: o.Username, Password: o.Password, DB: o.DB, TLSConfig: o.TLSConfig})
	defer in.Close()
	queues, err := in.Queues()
	if err != nil {
		return
	}
	if slices.Contains(queues, queue) {
		if err := in.DeleteQueue(queue, true); err != nil {
			t.Errorf("deleting the test's queue %s from Redis: %v", queue, err)
		}
	}
	c := redis.NewClient(o)
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// Every key of an asynq queue has the queue in braces (its cluster hash tag).
	iter := c.Scan(ctx, 0, "asynq:{"+queue+"}*", 100).Iterator()
	for iter.Next(ctx) {
		if err := c.Del(ctx, iter.Val()).Err(); err != nil {
			t.Errorf("deleting the test's queue %s from Redis: %v", queue, err)
			return
		}
	}
	if err := iter.Err(); err != nil {
		t.Errorf("deleting the test's queue %s from Redis: %v", queue, err)
	}
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
