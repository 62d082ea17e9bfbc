package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"
)

// TestEndToEnd runs jfast new for a service with no plugins, for one with every
// plugin jfast new offers, and for one whose queue runs on Redis (cache, queue
// and mail, no db), then in each: go build ./..., go test ./..., builds the
// binary, runs its check, starts it and asks /live and /ready, and stops it with
// SIGTERM. A private database on the machine's PostgreSQL (127.0.0.1:5432) and the
// machine's Redis (127.0.0.1:6379, keys under the service's prefix) serve the db,
// idempotency and cache routes' tests; the services pass without them too (the
// routes then answer 503 or fail open). The Redis-queue service's job tests are
// pointed at the machine's Redis and must run, not skip: each works a queue of
// its own. Skipped with -short.
func TestEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("builds two services: skipped with -short")
	}
	if _, err := exec.LookPath("go"); err != nil {
		t.Fatal("the go command is not in PATH")
	}
	for _, tc := range []struct {
		name, plugins string
		db            bool     // a private database, as JFAST_DB_URL
		env           []string // more variables
		mustRun       []string // tests that must pass, not skip
	}{
		{"plain", "", false, nil, nil},
		{"every-plugin", strings.Join(availableForNew(), ","), true, nil, nil},
		{"redis-queue", "cache,queue,mail", false, []string{"JFAST_CACHE_URL=redis://127.0.0.1:6379/0"}, []string{"TestGreetingJob", "TestWelcomeMail"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), tc.name)
			args := []string{"new", tc.name, "--dir", dir, "--module", "example.com/" + tc.name}
			if tc.plugins != "" {
				args = append(args, "--plugins", tc.plugins)
			}
			if code, _, stderr := jfast(t, args...); code != 0 {
				t.Fatalf("jfast new: exit %d: %s", code, stderr)
			}
			if tc.env != nil {
				t.Cleanup(func() { deleteAsynqQueues(t, tc.name) })
			}
			dbURL := ""
			if tc.db {
				dbURL = privateDatabase(t)
			}
			env := append(serviceEnv(dbURL), tc.env...)
			// go build ./..., keeping the binary (one link instead of two).
			bins := t.TempDir()
			goCmd(t, dir, env, "build", "-o", bins+string(filepath.Separator), "./...")
			var before []string // left by runs of older generated tests
			if tc.env != nil {
				before = redisKeys(t, "asynq:{"+tc.name+"-test-*")
			}
			out := goCmd(t, dir, env, "test", "-count=1", "-v", "./...")
			for _, name := range tc.mustRun {
				if !strings.Contains(out, "--- PASS: "+name+" ") {
					t.Errorf("%s did not pass (skipped, or absent):\n%s", name, out)
				}
			}
			if tc.env != nil {
				// The generated tests delete the queues of their own.
				if left := asynqQueues(t, tc.name+"-test-"); len(left) > 0 {
					t.Errorf("the generated tests left their queues in Redis: %v", left)
				}
				left := slices.DeleteFunc(redisKeys(t, "asynq:{"+tc.name+"-test-*"), func(k string) bool { return slices.Contains(before, k) })
				if len(left) > 0 {
					t.Errorf("the generated tests left keys of their queues in Redis: %v", left)
				}
			}
			// The tests' files are in temp dirs, never in the project.
			if _, err := os.Stat(filepath.Join(dir, "data")); err == nil {
				t.Errorf("go test made %s in the project", filepath.Join(dir, "data"))
			}
			bin := filepath.Join(bins, tc.name)

			check := exec.Command(bin, "check")
			check.Dir, check.Env = dir, env
			if out, err := check.CombinedOutput(); err != nil || !strings.Contains(string(out), "jfast.toml is valid") {
				t.Fatalf("%s check: %v\n%s", tc.name, err, out)
			}
			serve(t, bin, dir, env)
			if tc.name == "plain" {
				checkAgreesWithTheService(t, dir, bin)
			}
		})
	}
}

// TestEndToEndLongName: a service with the longest name (63 characters) and
// its queue on PostgreSQL passes the test that works its queue: the queue its
// tests make of their own (the name, -test- and 16 hex digits) is cut to the
// 64 characters River takes. Only go test -run TestGreetingJob, which must
// run, not skip (it makes a private database on the machine's PostgreSQL).
// Skipped with -short.
func TestEndToEndLongName(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a service: skipped with -short")
	}
	name := strings.Repeat("abcde-", 10) + "xyz"
	dir := filepath.Join(t.TempDir(), "long")
	if code, _, stderr := jfast(t, "new", name, "--dir", dir, "--module", "example.com/long", "--plugins", "db,queue"); code != 0 {
		t.Fatalf("jfast new: exit %d: %s", code, stderr)
	}
	out := goCmd(t, dir, serviceEnv(""), "test", "-count=1", "-v", "-run", "^TestGreetingJob$", "./...")
	if !strings.Contains(out, "--- PASS: TestGreetingJob ") {
		t.Errorf("TestGreetingJob did not pass (skipped, or absent):\n%s", out)
	}
}

// checkAgreesWithTheService enables channels (and the cache it needs) in a
// service that compiles in neither: jfast check with its own plugins finds the
// file valid, the service's check refuses it, and jfast check in the service's
// directory gives the service's verdict, word for word. It fails without the
// delegation (serviceCheck), and with jfast's own plugins instead.
func checkAgreesWithTheService(t *testing.T, dir, bin string) {
	path := filepath.Join(dir, "jfast.toml")
	text, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	enabled := `enabled = ["observability"]`
	if !strings.Contains(string(text), enabled) {
		t.Fatalf("%s has no line %s", path, enabled)
	}
	text = []byte(strings.Replace(string(text), enabled, `enabled = ["observability", "cache", "channels"]`, 1))
	if err := os.WriteFile(path, text, 0o644); err != nil {
		t.Fatal(err)
	}
	if code, stdout, stderr := jfast(t, "check", "--builtin", "--config", path); code != 0 {
		t.Fatalf("jfast check --builtin: exit %d (want 0: jfast compiles channels in)\n%s%s", code, stdout, stderr)
	}
	var own, ownErr strings.Builder
	check := exec.Command(bin, "check")
	// The environment jfast check passes on: the test's own.
	check.Dir, check.Stdout, check.Stderr = dir, &own, &ownErr
	if err := check.Run(); err == nil || !strings.Contains(ownErr.String(), `plugin "channels" is enabled but not compiled into this service`) {
		t.Fatalf("the service's check: %v, want exit 1 naming channels\n%s%s", err, own.String(), ownErr.String())
	}
	inService, err1 := isServiceMain(dir)
	inJfast, err2 := isServiceMain(".")
	if !inService || inJfast || err1 != nil || err2 != nil {
		t.Fatalf("isServiceMain(%s) = %v, %v, isServiceMain(cmd/jfast) = %v, %v; want true, false", dir, inService, err1, inJfast, err2)
	}
	var out, errOut strings.Builder
	code := serviceCheck(context.Background(), dir, []string{"check"}, &out, &errOut)
	_, relayed, _ := strings.Cut(errOut.String(), "\n") // after jfast's one line saying what it runs
	if code != 1 || out.String() != own.String() || relayed != ownErr.String() {
		t.Fatalf("jfast check in the service's directory: exit %d\n%s%s\nwant exit 1 and the service's own\n%s%s", code, out.String(), errOut.String(), own.String(), ownErr.String())
	}
}

// serviceEnv is the test's environment without JFAST_* variables (a variable
// for a plugin the service does not compile in would put a WARNING in its log),
// with dbURL for the db plugin when given, and without a go.work that could
// change how the generated module resolves.
func serviceEnv(dbURL string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "JFAST_") && !strings.HasPrefix(kv, "GOFLAGS=") {
			env = append(env, kv)
		}
	}
	env = append(env, "GOWORK=off", "GOFLAGS=-mod=readonly")
	if dbURL != "" {
		env = append(env, "JFAST_DB_URL="+dbURL)
	}
	return env
}

func goCmd(t *testing.T, dir string, env []string, args ...string) string {
	t.Helper()
	cmd := exec.Command("go", args...)
	cmd.Dir, cmd.Env = dir, env
	start := time.Now()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	t.Logf("go %s: %s", strings.Join(args, " "), time.Since(start).Round(time.Millisecond))
	return string(out)
}

// asynqQueues lists the asynq queues in the machine's Redis whose names
// start with prefix.
func asynqQueues(t *testing.T, prefix string) []string {
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	queues, err := c.SMembers(ctx, "asynq:queues").Result()
	if err != nil {
		t.Errorf("asynq queues: %v", err)
		return nil
	}
	var out []string
	for _, q := range queues {
		if strings.HasPrefix(q, prefix) {
			out = append(out, q)
		}
	}
	return out
}

// redisKeys lists the keys of the machine's Redis matching pattern.
func redisKeys(t *testing.T, pattern string) []string {
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var keys []string
	iter := c.Scan(ctx, 0, pattern, 500).Iterator()
	for iter.Next(ctx) {
		keys = append(keys, iter.Val())
	}
	if err := iter.Err(); err != nil {
		t.Errorf("scan %s: %v", pattern, err)
	}
	return keys
}

// deleteAsynqQueues removes from the machine's Redis the asynq queues a
// generated service and its tests made: the service's (named after it) and
// any test's left behind (<service>-test-<hex>), keys and entries in
// asynq:queues.
func deleteAsynqQueues(t *testing.T, service string) {
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, q := range asynqQueues(t, service) {
		if q != service && !strings.HasPrefix(q, service+"-test-") {
			continue
		}
		iter := c.Scan(ctx, 0, "asynq:{"+q+"}:*", 500).Iterator()
		for iter.Next(ctx) {
			c.Del(ctx, iter.Val())
		}
		if err := iter.Err(); err != nil {
			t.Errorf("delete queue %s: %v", q, err)
		}
		c.SRem(ctx, "asynq:queues", q)
	}
}

// privateDatabase creates a database of its own on the machine's PostgreSQL for
// the generated service (its idempotency table, its queries) and drops it when the
// test ends.
func privateDatabase(t *testing.T) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	admin := "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		t.Fatalf("the machine's PostgreSQL (%s): %v", admin, err)
	}
	defer conn.Close(ctx)
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := "jfast_cli_e2e_" + hex.EncodeToString(b[:])
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, admin)
		if err != nil {
			t.Errorf("drop %s: %v", name, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP DATABASE "+name+" WITH (FORCE)"); err != nil {
			t.Errorf("drop %s: %v", name, err)
		}
	})
	return "postgres://postgres@127.0.0.1:5432/" + name + "?sslmode=disable"
}

// serve starts the service binary on a free port, checks /live and /ready, and
// stops it with SIGTERM, expecting a clean exit.
func serve(t *testing.T, bin, dir string, env []string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	var logs strings.Builder
	cmd := exec.Command(bin)
	cmd.Dir = dir
	cmd.Env = append(env, "JFAST_APP_LISTEN="+addr)
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			_ = cmd.Process.Kill()
			<-done
		}
	})

	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := client.Get("http://" + addr + "/live")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("/live: status %d", resp.StatusCode)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/live never answered: %v\nlogs:\n%s", err, logs.String())
		}
		select {
		case err := <-done:
			stopped = true
			t.Fatalf("the service exited: %v\nlogs:\n%s", err, logs.String())
		case <-time.After(50 * time.Millisecond):
		}
	}

	resp, err := client.Get("http://" + addr + "/ready")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var ready struct {
		Status string `json:"status"`
	}
	if err := json.Unmarshal(body, &ready); err != nil {
		t.Fatalf("/ready body %s: %v", body, err)
	}
	// No plugin is critical in the generated jfast.toml: never 503.
	if resp.StatusCode != http.StatusOK || (ready.Status != "ok" && ready.Status != "degraded") {
		t.Fatalf("/ready: status %d: %s", resp.StatusCode, body)
	}
	t.Logf("/ready: %s", body)

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Second)
	defer cancel()
	select {
	case err := <-done:
		stopped = true
		if err != nil {
			t.Fatalf("exit after SIGTERM: %v\nlogs:\n%s", err, logs.String())
		}
	case <-ctx.Done():
		t.Fatalf("still running 25s after SIGTERM\nlogs:\n%s", logs.String())
	}
}
