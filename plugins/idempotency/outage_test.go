package idempotency

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jfastframework/jfast/jfasttest"
)

// With the store blackholed, a guarded route answers 503 naming the store
// within store_timeout and does not run the handler: a payment must not run
// unguarded because the store is down. When the store is back, the same App
// serves the route again.
func TestStoreOutageFailsClosed(t *testing.T) {
	t.Parallel()
	forStores(t, func(t *testing.T, store string) {
		b := setup(t, setupOpts{store: store, proxy: true, toml: `store_timeout = "500ms"`})
		if r := b.post(t, "/payments", "before", `{}`); r.Status != http.StatusCreated {
			t.Fatalf("before: %d %s", r.Status, r.Body)
		}
		b.settled("before") // the 201 went out before it was stored
		if err := b.proxy.Blackhole(); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		r := b.post(t, "/payments", "during", `{}`)
		elapsed := time.Since(start)
		p := wantProblem(t, r, http.StatusServiceUnavailable)
		wantDep := map[string]string{StorePostgres: "db", StoreRedis: "cache"}[store]
		if p["dependency"] != wantDep || !strings.Contains(fmt.Sprint(p["detail"]), "idempotency store ("+store) {
			t.Fatalf("problem %v, want dependency %q and a detail naming the store", p, wantDep)
		}
		if elapsed > 3*time.Second {
			t.Fatalf("the 503 took %s, want about store_timeout (500ms)", elapsed)
		}
		// A replay is refused too: the store cannot say what was stored.
		wantProblem(t, b.post(t, "/payments", "before", `{}`), http.StatusServiceUnavailable)
		if n := b.effects.Load(); n != 1 {
			t.Fatalf("%d side effects, want 1: the handler ran during the outage", n)
		}
		// Unguarded requests (no key) are not the plugin's to refuse.
		if r := b.post(t, "/payments", "-", `{}`); r.Status != http.StatusCreated {
			t.Fatalf("no key during the outage: %d", r.Status)
		}

		ready := b.svc.Get(t, "/ready")
		var rep struct {
			Checks map[string]struct {
				Healthy bool   `json:"healthy"`
				Detail  string `json:"detail"`
			} `json:"checks"`
		}
		if err := json.Unmarshal(ready.Body, &rep); err != nil {
			t.Fatalf("/ready: %v: %s", err, ready.Body)
		}
		if c, ok := rep.Checks["idempotency"]; !ok || c.Healthy {
			t.Fatalf("/ready during the outage: %s", ready.Body)
		}

		if err := b.proxy.Pass(); err != nil {
			t.Fatal(err)
		}
		// Recovery on the same App: a breaker the outage opened lets a probe
		// through after its cool-down on the App clock. Each attempt uses a
		// fresh key: a key whose claim reached the store just before the
		// outage stays held for its lease.
		deadline := time.Now().Add(20 * time.Second)
		for i := 0; ; i++ {
			b.clock.Advance(16 * time.Second)
			r := b.post(t, "/payments", fmt.Sprintf("after-%d", i), `{}`)
			if r.Status == http.StatusCreated {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("no recovery after the outage: %d %s", r.Status, r.Body)
			}
			time.Sleep(100 * time.Millisecond)
		}
		if r := b.post(t, "/payments", "before", `{}`); r.Header.Get(HeaderReplayed) != "true" {
			t.Fatalf("the record stored before the outage: %d replayed=%q", r.Status, r.Header.Get(HeaderReplayed))
		}
	})
}

// Once the store plugin's breaker is open (cache's, or db's: the PostgreSQL
// store takes its connections through the db plugin's breaker), the 503 comes
// at once with Retry-After, naming that plugin's dependency.
func TestOpenStoreBreakerAnswersAtOnceWithRetryAfter(t *testing.T) {
	t.Parallel()
	forStores(t, func(t *testing.T, store string) {
		// store_timeout above the plugin's own deadline (the cache's
		// command_timeout, the db's bounded ping): that deadline ends the call,
		// which the plugin's breaker counts.
		b := setup(t, setupOpts{store: store, proxy: true, toml: `store_timeout = "3s"`,
			cacheTOML: "breaker_failures = 1\ncommand_timeout = \"500ms\"",
			dbTOML:    "breaker_failures = 1\nping_timeout = \"500ms\""})
		if r := b.post(t, "/payments", "k0", `{}`); r.Status != http.StatusCreated {
			t.Fatalf("before: %d %s", r.Status, r.Body) // leaves a pooled connection to ping
		}
		if store == StorePostgres {
			// The db plugin pings a connection idle for over a second
			// (pgxpool's real clock); one used less recently is trusted.
			time.Sleep(1200 * time.Millisecond)
		}
		if err := b.proxy.Blackhole(); err != nil {
			t.Fatal(err)
		}
		wantProblem(t, b.post(t, "/payments", "k1", `{}`), http.StatusServiceUnavailable)
		start := time.Now()
		r := b.post(t, "/payments", "k2", `{}`)
		elapsed := time.Since(start)
		p := wantProblem(t, r, http.StatusServiceUnavailable)
		wantDep := map[string]string{StorePostgres: "db", StoreRedis: "cache"}[store]
		if r.Header.Get("Retry-After") == "" || p["dependency"] != wantDep {
			t.Fatalf("no Retry-After or dependency %q: %v %v", wantDep, r.Header, p)
		}
		if elapsed > 300*time.Millisecond {
			t.Fatalf("the 503 took %s with the breaker open, want at once", elapsed)
		}
		if n := b.effects.Load(); n != 1 {
			t.Fatalf("%d side effects, want 1 (before the outage)", n)
		}
	})
}

// The documented limit: the handler ran, then the store failed while the
// response was written to it. The client has its response; the key stays
// held (409) until the lease ends, and then a retry runs the handler again.
func TestStoreFailingAfterTheHandlerRan(t *testing.T) {
	t.Parallel()
	forStores(t, func(t *testing.T, store string) {
		b := setup(t, setupOpts{store: store, proxy: true, toml: "store_timeout = \"500ms\"\nlease = \"2m\""})
		entered, release := b.hold()
		defer release()
		done := make(chan jfasttest.Response, 1)
		go func() { done <- b.post(t, "/payments", "k", `{}`) }()
		<-entered
		if err := b.proxy.Blackhole(); err != nil {
			t.Fatal(err)
		}
		release()
		if r := <-done; r.Status != http.StatusCreated {
			t.Fatalf("first: %d %s", r.Status, r.Body)
		}
		b.settled("k") // the 201 went out before the store's write failed
		if !strings.Contains(b.svc.Logs(), "the response could not be stored") {
			t.Fatalf("not logged:\n%s", b.svc.Logs())
		}
		if err := b.proxy.Pass(); err != nil {
			t.Fatal(err)
		}
		// Wait for the store to answer again (a breaker the failure opened
		// lets a probe through after its cool-down on the App clock).
		deadline := time.Now().Add(20 * time.Second)
		for {
			r := b.post(t, "/payments", "k", `{}`)
			if r.Status == http.StatusConflict {
				break
			}
			if r.Status != http.StatusServiceUnavailable || time.Now().After(deadline) {
				t.Fatalf("during the lease: %d %s", r.Status, r.Body)
			}
			b.clock.Advance(16 * time.Second)
			time.Sleep(100 * time.Millisecond)
		}
		b.clock.Advance(2 * time.Minute)
		if r := b.post(t, "/payments", "k", `{}`); r.Status != http.StatusCreated || r.Header.Get(HeaderReplayed) != "" {
			t.Fatalf("after the lease: %d replayed=%q", r.Status, r.Header.Get(HeaderReplayed))
		}
		if n := b.effects.Load(); n != 2 {
			t.Fatalf("%d side effects, want 2", n)
		}
	})
}
