package cache

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/jfastframework/jfast/framework/resilience"
)

// A readiness check that finds the half-open breaker's probe taken by another
// call (a request's command, another plugin's check) asks Redis itself: a
// Redis that answers passes, even with critical = true, instead of failing
// because something else asked first. The check's PING decides nothing: the
// breaker stays half-open until the probe answers.
func TestReadyWhileAnotherCallHoldsTheProbe(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{toml: "critical = true\n"})
	br := b.cache.Breaker()
	if !br.Trip() {
		t.Fatal("Trip did not open the breaker")
	}
	if r := b.cache.Check(context.Background()); r.Healthy || !r.Unreachable {
		t.Fatalf("check with the breaker open = %+v, want unreachable from the breaker", r)
	}
	b.clock.Advance(b.cache.cfg.BreakerCoolDown)
	probe, err := br.Allow()
	if err != nil || !probe.Probe() {
		t.Fatalf("Allow after the cool-down = %v, want the probe", err)
	}
	r := b.svc.Get(t, "/ready")
	var body struct {
		Checks map[string]struct {
			Healthy bool   `json:"healthy"`
			Detail  string `json:"detail"`
		} `json:"checks"`
	}
	if err := json.Unmarshal(r.Body, &body); err != nil {
		t.Fatalf("/ready: %v: %s", err, r.Body)
	}
	if c := body.Checks["cache"]; r.Status != 200 || !c.Healthy || c.Detail != "redis answered PING" {
		t.Fatalf("/ready with a Redis that answers, another call holding the probe = %d %s", r.Status, r.Body)
	}
	if s := br.Snapshot(); s.State != resilience.StateHalfOpen || !s.Probing {
		t.Fatalf("breaker after the check = %+v, want half-open with the probe still in flight", s)
	}
	probe.Done(resilience.Success)
	if s := br.Snapshot(); s.State != resilience.StateClosed {
		t.Fatalf("breaker after the probe answered = %+v, want closed", s)
	}
}
