package db

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/framework/resilience"
	"github.com/jfastframework/jfast/jfasttest"
	"github.com/jfastframework/jfast/plugins/idempotency"
	"github.com/jfastframework/jfast/readiness"
)

// holdProbe opens the breaker, lets its cool-down pass on the test clock and
// takes the half-open breaker's probe, as a request's statement would; the
// caller ends it.
func (b *bundle) holdProbe(t *testing.T) resilience.Ticket {
	t.Helper()
	br := b.db.gate.breaker
	if !br.Trip() {
		t.Fatal("Trip did not open the breaker")
	}
	if r := b.db.check(context.Background()); r.Healthy || !r.Unreachable {
		t.Fatalf("check with the breaker open = %+v, want unreachable from the breaker", r)
	}
	b.clock.Advance(15 * time.Second)
	probe, err := br.Allow()
	if err != nil || !probe.Probe() {
		t.Fatalf("Allow after the cool-down = %v, want the probe", err)
	}
	return probe
}

// A readiness check that finds the half-open breaker's probe taken by another
// call (a request's statement, the idempotency store's check) asks
// PostgreSQL itself: a server that answers passes, even with critical =
// true, instead of failing because something else asked first. The check's
// SELECT 1 decides nothing: the breaker stays half-open until the probe
// answers.
func TestReadyWhileAnotherCallHoldsTheProbe(t *testing.T) {
	t.Parallel()
	for _, warm := range []bool{true, false} {
		name := "idle connection"
		if !warm {
			name = "no connection open"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, setupOpts{toml: "critical = true\nbreaker_cool_down = \"15s\""})
			if warm {
				b.warm(t, 1)
			} else {
				b.db.pool.Reset()
			}
			probe := b.holdProbe(t)
			r := b.svc.Get(t, "/ready")
			var body struct {
				Checks map[string]readiness.Report `json:"checks"`
			}
			if err := json.Unmarshal(r.Body, &body); err != nil {
				t.Fatalf("/ready: %v: %s", err, r.Body)
			}
			if c := body.Checks["db"]; r.Status != 200 || !c.Healthy {
				t.Fatalf("/ready with a server that answers, another call holding the probe = %d %s", r.Status, r.Body)
			}
			if s := b.db.Breaker(); s.State != resilience.StateHalfOpen || !s.Probing {
				t.Fatalf("breaker after the check = %+v, want half-open with the probe still in flight", s)
			}
			probe.Done(resilience.Success)
			if s := b.db.Breaker(); s.State != resilience.StateClosed {
				t.Fatalf("breaker after the probe answered = %+v, want closed", s)
			}
		})
	}
}

// The same check against a server that does not answer fails within
// ping_timeout, and reports nothing to the breaker either: the probe decides.
func TestReadyOutsideTheBreakerIsBounded(t *testing.T) {
	t.Parallel()
	addr := jfasttest.SilentServer(t)
	b := setup(t, setupOpts{
		url:  "postgres://postgres@" + addr + "/" + testDB + "?sslmode=disable",
		toml: "connect_timeout = \"10s\"\nping_timeout = \"300ms\"\nbreaker_cool_down = \"15s\"",
	})
	probe := b.holdProbe(t)
	defer probe.Done(resilience.Ignore)
	var r readiness.Report
	took := timed(func() { r = b.db.check(context.Background()) })
	if r.Healthy || !r.Unreachable || !strings.HasPrefix(r.Detail, "db unreachable: ") || strings.Contains(r.Detail, "suspended") {
		t.Fatalf("check against a hung server, another call holding the probe = %+v, want unreachable from the server, not from the breaker", r)
	}
	if took > 5*time.Second {
		t.Fatalf("the check took %s, want it bounded by ping_timeout (300ms), not connect_timeout (10s)", took)
	}
	if s := b.db.Breaker(); s.State != resilience.StateHalfOpen || !s.Probing {
		t.Fatalf("breaker after the check = %+v, want half-open with the probe still in flight", s)
	}
}

// With the idempotency plugin on the PostgreSQL store, right after the db
// breaker's cool-down, both plugins critical and the half-open breaker's
// probe taken by another call, a server that answers is reported passing by
// the db entry and the idempotency one: the idempotency entry is the db's
// check, and its table query, refused by the breaker only because the probe
// is taken, does not overrule it. (It lives here because only the db's own
// tests can hold its breaker's probe.)
func TestIdempotencyReadyAfterTheCoolDown(t *testing.T) {
	t.Parallel()
	clock := jfasttest.NewClock()
	svc := jfasttest.Start(t, jfasttest.Options{
		TOML: "[app]\nname = \"dbtest\"\n[plugins]\nenabled = [\"db\", \"idempotency\"]\n" +
			"[plugin.db]\ncritical = true\nbreaker_cool_down = \"15s\"\n" +
			"[plugin.idempotency]\ncritical = true\ntable = \"ready_cool_down_keys\"\n",
		Plugins: []framework.Plugin{New(), idempotency.New()},
		Env:     map[string]string{"JFAST_DB_URL": testURL()},
		Clock:   clock,
	})
	d, err := Get(svc.App)
	if err != nil {
		t.Fatal(err)
	}
	b := &bundle{svc: svc, db: d, clock: clock}
	// The idempotency table's creation, begun at start in the background,
	// goes through the db breaker and must be over before the probe is
	// held: a check of the idempotency store waits for it, so /ready passes
	// once it is (each /ready is bounded by readiness_timeout).
	for give := time.Now().Add(30 * time.Second); svc.Get(t, "/ready").Status != 200; {
		if time.Now().After(give) { // only a broken test gets here
			t.Fatal("/ready did not pass within 30 s of the start, before the breaker was opened")
		}
	}
	probe := b.holdProbe(t)
	defer probe.Done(resilience.Success)
	r := svc.Get(t, "/ready")
	var body struct {
		Checks map[string]readiness.Report `json:"checks"`
	}
	if err := json.Unmarshal(r.Body, &body); err != nil {
		t.Fatalf("/ready: %v: %s", err, r.Body)
	}
	if r.Status != 200 || !body.Checks["db"].Healthy || !body.Checks["idempotency"].Healthy {
		t.Fatalf("/ready with a server that answers, another call holding the probe = %d %s", r.Status, r.Body)
	}
}

// A pool whose every connection is in use on a healthy server says nothing
// about the server (the watchdog asks it while statements run): /ready does
// not wait for a free slot behind them, so a critical db is not taken out
// of rotation by its own load. Before, the check queued for a slot until the
// readiness timeout: "no answer within 800ms", a 503.
func TestReadyWithABusyPool(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{toml: "critical = true\npool_size = 2"})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for range 2 {
		c, err := b.db.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Release()
	}
	r := b.svc.Get(t, "/ready")
	var body struct {
		Checks map[string]readiness.Report `json:"checks"`
	}
	if err := json.Unmarshal(r.Body, &body); err != nil {
		t.Fatalf("/ready: %v: %s", err, r.Body)
	}
	if c := body.Checks["db"]; r.Status != 200 || !c.Healthy || !strings.Contains(c.Detail, "busy") {
		t.Fatalf("/ready with every connection in use on a healthy server = %d %s; want 200, db passing and saying the pool is busy", r.Status, r.Body)
	}
}
