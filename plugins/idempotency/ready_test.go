package idempotency

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/framework/resilience"
	"github.com/jfastframework/jfast/readiness"
)

// On the Redis store, /ready reports the one Redis alike in the cache's and
// the idempotency entries. Right after the cache breaker's cool-down, with
// both plugins critical and the half-open breaker's probe taken by another
// call, a Redis that answers is reported passing by both: neither check fails
// because the other, or a request, asked first.
func TestRedisReadyAfterTheCoolDown(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{store: StoreRedis, toml: "critical = true", cacheTOML: "critical = true"})
	cache, err := framework.Get[framework.Redis](b.svc.App, "cache")
	if err != nil {
		t.Fatal(err)
	}
	br := cache.Breaker()
	checks := func(t *testing.T) (int, map[string]readiness.Report) {
		t.Helper()
		r := b.svc.Get(t, "/ready")
		var body struct {
			Checks map[string]readiness.Report `json:"checks"`
		}
		if err := json.Unmarshal(r.Body, &body); err != nil {
			t.Fatalf("/ready: %v: %s", err, r.Body)
		}
		return r.Status, body.Checks
	}
	openThenCoolDown := func(t *testing.T) {
		t.Helper()
		if !br.Trip() {
			t.Fatal("Trip did not open the cache breaker")
		}
		if r := b.idem.Check(context.Background()); r.Healthy || !r.Unreachable {
			t.Fatalf("idempotency check with the cache breaker open = %+v, want unreachable", r)
		}
		b.clock.Advance(resilience.DefaultBreakerCoolDown)
	}

	t.Run("probe held by a request", func(t *testing.T) {
		openThenCoolDown(t)
		probe, err := br.Allow()
		if err != nil || !probe.Probe() {
			t.Fatalf("Allow after the cool-down = %v, want the probe", err)
		}
		defer probe.Done(resilience.Success)
		status, c := checks(t)
		if status != 200 || !c["cache"].Healthy || !c["idempotency"].Healthy {
			t.Fatalf("/ready with a Redis that answers, a request holding the probe = %d %+v", status, c)
		}
	})
	t.Run("both checks at once", func(t *testing.T) {
		openThenCoolDown(t)
		status, c := checks(t)
		if status != 200 || !c["cache"].Healthy || !c["idempotency"].Healthy {
			t.Fatalf("/ready with a Redis that answers, right after the cool-down = %d %+v", status, c)
		}
		if s := br.Snapshot(); s.State != resilience.StateClosed {
			t.Fatalf("cache breaker after /ready = %+v, want closed by the probe", s)
		}
	})
}
