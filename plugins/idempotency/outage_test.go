package idempotency

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
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
