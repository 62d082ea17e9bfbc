package db

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jfastframework/jfast/framework/resilience"
	"github.com/jfastframework/jfast/jfasttest"
	"github.com/jfastframework/jfast/problem"
)

// A connection that stopped answering (its socket open, nothing coming
// back) is terminated by the bounded ping and replaced, within the
// caller's deadline, and the request succeeds.
func TestPingTerminatesHungConnection(t *testing.T) {
	t.Parallel()
	// ping_timeout 1s: the replacement connection gets 500ms, which a loaded
	// CI machine running the race detector needs.
	b := setup(t, setupOpts{proxy: true, toml: `ping_timeout = "1s"`})
	b.warm(t, 1)
	time.Sleep(pingIdle + 200*time.Millisecond) // idle long enough to be pinged (pgxpool's real clock)
	b.proxy.HangExisting()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var n int
	calls, attempts := b.db.gate.calls.Load(), b.db.gate.attempts.Load()
	took := timed(func() {
		if err := b.db.QueryRow(ctx, "SELECT 1").Scan(&n); err != nil {
			t.Fatalf("query after the hang: %v", err)
		}
	})
	if took < time.Second || took > 3*time.Second {
		t.Fatalf("query took %s; want ping_timeout (1s) plus a new connection", took)
	}
	if got := b.db.gate.pingTerminations.Load(); got != 1 {
		t.Fatalf("%d connections terminated by the ping, want 1", got)
	}
	// One connection asked for, two attempts: the hung one's, its replacement.
	if c, a := b.db.gate.calls.Load()-calls, b.db.gate.attempts.Load()-attempts; c != 1 || a != 2 {
		t.Fatalf("jfast_db_acquisitions_total +%d, jfast_db_acquisition_attempts_total +%d; want +1 and +2", c, a)
	}
	deadline := time.Now().Add(5 * time.Second)
	for b.db.Stat().TotalConns() != 1 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond) // the terminated connection is destroyed in the background
	}
	if s := b.db.Stat(); s.NewConnsCount() != 2 || s.TotalConns() != 1 {
		t.Fatalf("pool opened %d connections and holds %d; want the hung one replaced by one new", s.NewConnsCount(), s.TotalConns())
	}
	// The ping's hang made the breaker half-open (nothing answered while it
	// waited); the new connection was the probe, and its answer closed it:
	// one dead connection is no outage.
	if snap := b.db.Breaker(); snap.State != resilience.StateClosed || snap.Consecutive != 0 || snap.Opens != 0 {
		t.Fatalf("breaker %+v; want closed, never opened", snap)
	}
}

// A statement on a connection used a moment ago is not pinged: when it meets
// a connection that stopped answering, it waits for its own deadline and
// marks the pool stale, and the next acquisition pings whatever the idle
// time, terminates the dead connection and succeeds on a new one.
func TestStatementCutMarksThePoolStale(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{proxy: true, toml: `ping_timeout = "1s"`})
	b.warm(t, 1)
	b.proxy.HangExisting()
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	var n int
	err := b.db.QueryRow(ctx, "SELECT 1").Scan(&n)
	cancel()
	var de *problem.DependencyError
	if !errors.As(err, &de) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a statement on a dead recently used connection: %v; want the db dependency error for its deadline", err)
	}
	if !b.db.gate.stale.Load() {
		t.Fatal("the pool is not stale after a statement got no answer within its deadline")
	}
	if got := b.db.gate.pingTerminations.Load(); got != 0 {
		t.Fatalf("%d pings before the stale pool was used", got)
	}
	ctx, cancel = context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := b.db.QueryRow(ctx, "SELECT 1").Scan(&n); err != nil {
		t.Fatalf("the statement after: %v", err)
	}
	if snap := b.db.Breaker(); snap.State != resilience.StateClosed {
		t.Fatalf("breaker %+v; want closed (the statement's cut is not counted)", snap)
	}
}

// A server that accepts the TCP connection and never answers costs
// connect_timeout, not the caller's whole deadline, and answers a db
// dependency error.
func TestConnectTimeout(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{proxy: true, toml: `connect_timeout = "300ms"`})
	b.proxy.Hold()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var err error
	took := timed(func() { _, err = b.db.Exec(ctx, "SELECT 1") })
	var de *problem.DependencyError
	if !errors.As(err, &de) || de.Dependency != "db" {
		t.Fatalf("got %v; want a db dependency error", err)
	}
	if took < 250*time.Millisecond || took > 3*time.Second {
		t.Fatalf("connect gave up after %s; want connect_timeout 300ms", took)
	}
	if p, _ := problem.As(err); p == nil || p.Status != 503 {
		t.Fatalf("problem %+v; want a 503", p)
	}
}

// connect_timeout bounds the whole connect of a multi-host connection
// string, not each host: pgconn gives each its own, so three hosts that
// accept and never answer cost three connect_timeouts (with the defaults,
// the request's whole 30 s). The hosts after the first are not dialled once
// its connect_timeout is used up.
func TestConnectTimeoutCoversEveryHost(t *testing.T) {
	t.Parallel()
	const connectTimeout = 500 * time.Millisecond
	first := jfasttest.SilentServer(t)
	second, reachedSecond := jfasttest.CountingSilentServer(t)
	third, reachedThird := jfasttest.CountingSilentServer(t)
	b := setup(t, setupOpts{
		url:  fmt.Sprintf("postgres://u@%s,%s,%s/db?sslmode=disable", first, second, third),
		toml: fmt.Sprintf("connect_timeout = %q", connectTimeout),
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var err error
	took := timed(func() { _, err = b.db.Exec(ctx, "SELECT 1") })
	t.Logf("three silent hosts: %s (connect_timeout %s)", took, connectTimeout)
	if !isDBDependencyError(err) || !resilience.IsTimeout(err) {
		t.Fatalf("three silent hosts: %T %v; want a db dependency error that is a timeout", err, err)
	}
	// Exec returned once pgxpool's connect ended: every dial it made is done.
	if n, m := reachedSecond.Load(), reachedThird.Load(); n != 0 || m != 0 {
		t.Fatalf("the second and third hosts were dialled %d and %d times after the first used up connect_timeout; want never", n, m)
	}
	if took >= 3*connectTimeout {
		t.Fatalf("the connect took %s; want less than a connect_timeout per host (%s)", took, 3*connectTimeout)
	}
}

// The connect's deadline ends with the connect: a statement on a new
// connection runs past connect_timeout from its start.
func TestConnectionOutlivesItsConnectDeadline(t *testing.T) {
	t.Parallel()
	const connectTimeout = time.Second
	b := setup(t, setupOpts{toml: fmt.Sprintf("connect_timeout = %q", connectTimeout)})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := b.db.Exec(ctx, "SELECT pg_sleep($1)", (2 * connectTimeout).Seconds()); err != nil {
		t.Fatalf("a statement on a new connection, running past connect_timeout: %v", err)
	}
	if n := b.db.Stat().NewConnsCount(); n != 1 {
		t.Fatalf("%d connections opened; want the statement on the one new connection", n)
	}
}

// The breaker opens on a paused server after one request (a ping that
// hangs, then its replacement, the probe), answers at once while open (503
// naming db, Retry-After), and closes again on the same App and pool when the
// probe after the cool-down succeeds.
func TestBreakerOpensAndRecoversWithoutRestart(t *testing.T) {
	t.Parallel()
	const connectTimeout = 20 * time.Second
	b := setup(t, setupOpts{proxy: true, toml: "ping_timeout = \"500ms\"\nconnect_timeout = \"20s\"\nbreaker_failures = 3\nbreaker_cool_down = \"15s\""})
	b.warm(t, 4)
	if r := b.svc.Get(t, "/one"); r.Status != 200 {
		t.Fatalf("before the pause: %d %s", r.Status, r)
	}
	pool := b.db.Pool()
	time.Sleep(pingIdle + 200*time.Millisecond) // a quiet service: the connections are pinged
	b.proxy.Hold()

	// Told apart by what they did (see timedRequest): the requests for
	// which the gate made attempts, until one the breaker answered alone.
	var slow []time.Duration
	var attempts []uint64
	var retryAfter []string
	for i := 0; ; i++ {
		took, made, r := b.timedResponse(t, i)
		if made == 0 {
			break
		}
		slow, attempts = append(slow, took), append(attempts, made)
		retryAfter = append(retryAfter, r.Header.Get("Retry-After"))
		if i > 10 {
			t.Fatalf("the breaker never answered: %v", slow)
		}
	}
	// The first request's ping hangs (half-open: nothing answered while it
	// waited) and its replacement attempt, the probe, hangs too (open): one
	// slow request of two attempts, bounded by ping_timeout and
	// replaceBound (1.5 × ping_timeout on an unloaded machine, logged: real
	// timers fire late on a loaded one), not by connect_timeout, which
	// would bound the replacement's connect otherwise.
	if len(slow) != 1 || attempts[0] != 2 {
		t.Fatalf("%d slow requests (%v, attempts %v) before the breaker answered; want 1 of 2 attempts", len(slow), slow, attempts)
	}
	t.Logf("the slow request waited %s; its bounds on an unloaded machine: %s", slow[0], 750*time.Millisecond)
	// Its probe opened the breaker: it tells its caller the wait the
	// requests after it are told.
	if retryAfter[0] != "15" {
		t.Fatalf("the request whose probe opened the breaker: Retry-After %q, want 15 (the cool-down)", retryAfter[0])
	}
	if slow[0] >= connectTimeout/2 {
		t.Fatalf("a request waited %s; want it bounded by ping_timeout and its replacement's bound, not by connect_timeout (%s)", slow[0], connectTimeout)
	}
	r := b.svc.Get(t, "/one")
	if r.Status != 503 {
		t.Fatalf("the open breaker answered %d %s; want 503", r.Status, r)
	}
	if _, made := b.timedRequest(t, 0); made != 0 {
		t.Fatalf("the open breaker let %d attempts reach the paused server", made)
	}
	if ra := r.Header.Get("Retry-After"); ra != "15" {
		t.Fatalf("Retry-After %q, want 15 (the cool-down; the test clock has not moved)", ra)
	}
	var body map[string]any
	_ = json.Unmarshal(r.Body, &body)
	if body["dependency"] != "db" {
		t.Fatalf("problem body %s does not name db", r)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := b.db.Exec(ctx, "SELECT 1"); !errors.Is(err, resilience.ErrOpen) {
		t.Fatalf("open breaker error %v; want errors.Is(err, resilience.ErrOpen)", err)
	}
	ready := b.svc.Get(t, "/ready")
	if ready.Status != 200 || !strings.Contains(ready.String(), `"state":"open"`) || !strings.Contains(ready.String(), `"degraded"`) {
		t.Fatalf("/ready while open: %d %s", ready.Status, ready)
	}
	// The breaker's hook ran on the request that opened it, before that
	// request answered: the shared families show the open breaker already.
	if state, opens, _ := sharedBreakerMetrics(t, b); state != float64(resilience.StateOpen) || opens != 1 {
		t.Fatalf("while open: jfast_client_breaker_state %v, transitions to open %v; want 1 and 1", state, opens)
	}

	b.proxy.Pass()
	if r := b.svc.Get(t, "/one"); r.Status != 503 {
		t.Fatalf("the breaker let a call through before its cool-down: %d", r.Status)
	}
	b.clock.Advance(15 * time.Second)
	if r := b.svc.Get(t, "/one"); r.Status != 200 {
		t.Fatalf("after the cool-down with the server back: %d %s", r.Status, r)
	}
	if snap := b.db.Breaker(); snap.State != resilience.StateClosed || snap.Opens != 1 {
		t.Fatalf("breaker %+v; want closed after one open", snap)
	}
	if state, opens, _ := sharedBreakerMetrics(t, b); state != float64(resilience.StateClosed) || opens != 1 {
		t.Fatalf("after recovery: jfast_client_breaker_state %v, transitions to open %v; want 0 and 1", state, opens)
	}
	if b.db.Pool() != pool {
		t.Fatal("the pool was replaced")
	}
	for i := 0; i < 5; i++ {
		if r := b.svc.Get(t, "/one"); r.Status != 200 {
			t.Fatalf("after recovery, request %d: %d", i, r.Status)
		}
	}
	if ready := b.svc.Get(t, "/ready"); !strings.Contains(ready.String(), `"status":"ok"`) {
		t.Fatalf("/ready after recovery: %s", ready)
	}
}

// When the breaker opens, requests already waiting for a connection are
// answered at once instead of waiting out their own attempts: those whose
// context can end (a request's: each attempt has its own cancel context) and
// those whose context cannot (a job's: the attempts wait under the gate's
// epoch, which the opening ends).
func TestBreakerOpeningReleasesWaiters(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		ctx  func(context.Context) context.Context
	}{
		{"caller_deadline", func(ctx context.Context) context.Context { return ctx }},
		{"context_that_cannot_end", context.WithoutCancel},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, setupOpts{proxy: true, toml: "ping_timeout = \"300ms\"\nconnect_timeout = \"10s\"\nbreaker_failures = 1\npool_size = 2"})
			b.warm(t, 1)
			time.Sleep(pingIdle + 200*time.Millisecond) // idle: the pooled connection is pinged
			b.proxy.Hold()
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			errs := make(chan time.Duration, 4)
			for range 4 {
				go func() {
					start := time.Now()
					_, err := b.db.Exec(tc.ctx(ctx), "SELECT 1")
					if err == nil {
						t.Error("a query succeeded against a paused server")
					}
					errs <- time.Since(start)
				}()
			}
			for range 4 {
				select {
				case d := <-errs:
					if d > 2*time.Second {
						t.Fatalf("a waiter took %s; want released when the breaker opened (~300ms)", d)
					}
				case <-ctx.Done():
					t.Fatal("a waiter was never released (its context cannot end)")
				}
			}
		})
	}
}

// Errors a healthy server sends are the caller's: not a 503, and never a
// breaker failure.
func TestSQLErrorsAreNotUnavailable(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{toml: "breaker_failures = 2"})
	for i := 0; i < 6; i++ {
		for _, path := range []string{"/sql", "/div"} {
			if r := b.svc.Get(t, path); r.Status != 500 {
				t.Fatalf("%s: status %d, want 500 (a bug in the query, not an outage): %s", path, r.Status, r)
			}
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := b.db.Exec(ctx, "SELEC 1")
	var de *problem.DependencyError
	if errors.As(err, &de) || !isPgErr(err) {
		t.Fatalf("syntax error came back as %T %v; want the *pgconn.PgError", err, err)
	}
	if snap := b.db.Breaker(); snap.State != resilience.StateClosed || snap.Consecutive != 0 || snap.WindowFailures != 0 {
		t.Fatalf("breaker %+v after SQL errors; want closed with no failures", snap)
	}
	if r := b.svc.Get(t, "/one"); r.Status != 200 {
		t.Fatalf("/one: %d", r.Status)
	}
}

// A server that is down does not fail the boot: the App starts, /ready
// reports db, requests answer 503.
func TestServerDownDoesNotFailTheBoot(t *testing.T) {
	t.Parallel()
	addr := jfasttest.RefusedAddr(t) // connections are refused
	b := setup(t, setupOpts{url: "postgres://app:Sup3rSecretPw@" + addr + "/nothing?sslmode=disable"})
	r := b.svc.Get(t, "/one")
	if r.Status != 503 {
		t.Fatalf("status %d, want 503", r.Status)
	}
	ready := b.svc.Get(t, "/ready")
	if ready.Status != 200 || !strings.Contains(ready.String(), `"db"`) || !strings.Contains(ready.String(), `"degraded"`) {
		t.Fatalf("/ready: %d %s", ready.Status, ready)
	}
	for what, text := range map[string]string{"response": r.String(), "/ready": ready.String(), "logs": b.svc.Logs()} {
		if strings.Contains(text, "Sup3rSecretPw") {
			t.Fatalf("the password appears in the %s:\n%s", what, text)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := b.db.Exec(ctx, "SELECT 1")
	if err == nil || strings.Contains(err.Error(), "Sup3rSecretPw") {
		t.Fatalf("error %v", err)
	}
}

func TestReadyReportsPoolAndServer(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	r := b.svc.Get(t, "/ready")
	var body struct {
		Status string
		Checks map[string]struct {
			Healthy bool
			Meta    struct {
				Breaker       map[string]any
				Pool          map[string]float64
				ServerVersion string `json:"server_version"`
			}
		}
	}
	if err := json.Unmarshal(r.Body, &body); err != nil {
		t.Fatal(err)
	}
	c := body.Checks["db"]
	if r.Status != 200 || body.Status != "ok" || !c.Healthy {
		t.Fatalf("/ready: %d %s", r.Status, r)
	}
	if c.Meta.Breaker["state"] != "closed" || c.Meta.Pool["max"] != 10 || c.Meta.Pool["total"] < 1 || c.Meta.ServerVersion == "" {
		t.Fatalf("meta %+v", c.Meta)
	}
	families, err := b.svc.App.Metrics().Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			if g := m.GetGauge(); g != nil {
				got[f.GetName()] = g.GetValue()
			} else if c := m.GetCounter(); c != nil {
				got[f.GetName()] = c.GetValue()
			}
		}
	}
	if got["jfast_db_pool_max_connections"] != 10 || got["jfast_db_pool_total_connections"] < 1 || got["jfast_db_pool_acquires_total"] < 1 {
		t.Fatalf("metrics %v", got)
	}
	if state, opens, ok := sharedBreakerMetrics(t, b); !ok || state != 0 || opens != 0 {
		t.Fatalf("jfast_client_breaker_state{plugin=\"db\",dependency=\"db\"} = %v (present: %v), opens %v; want 0 (closed) from the start, never opened", state, ok, opens)
	}
	// The plugin keeps no breaker family of its own beside the shared ones.
	for name := range got {
		if strings.HasPrefix(name, "jfast_db_") && strings.Contains(name, "breaker") {
			t.Errorf("%s is registered; the breaker is in the jfast_client_breaker_* families alone", name)
		}
	}
}

// sharedBreakerMetrics reads the main pool's breaker from the families
// every plugin that calls out shares, under plugin and dependency "db": its
// jfast_client_breaker_state, whether that series exists, and the
// transitions to open counted in jfast_client_breaker_transitions_total
// (from closed, and from half_open: a probe that failed). It fails t if
// another of those families has a series for the plugin.
func sharedBreakerMetrics(t *testing.T, b *bundle) (state, opens float64, ok bool) {
	t.Helper()
	reg := b.svc.App.Metrics()
	state, ok = jfasttest.Series(t, reg, "jfast_client_breaker_state", "plugin", "db", "dependency", "db")
	for _, from := range []string{"closed", "half_open"} {
		opens += jfasttest.Metric(t, reg, "jfast_client_breaker_transitions_total", "plugin", "db", "dependency", "db", "from", from, "to", "open")
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		name := f.GetName()
		if !strings.HasPrefix(name, "jfast_client_") {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["plugin"] != "db" {
				continue
			}
			switch name {
			case "jfast_client_breaker_state", "jfast_client_breaker_transitions_total":
			default:
				// The plugin counts its calls in its own families: a
				// policy series of its would read 0 for ever.
				t.Errorf("%s has a series for the db plugin, %v; only the breaker's families should", name, labels)
			}
		}
	}
	return state, opens, ok
}

// Whose deadline ended the attempt decides what the breaker learns
// (docs/resilience.md, "Whose deadline was it?"): attempts cut by a caller
// whose deadline (50 ms) is sooner than the plugin's own — connect_timeout for
// a new connection to a server that accepts and never answers, ping_timeout for
// a pooled connection that stopped answering — each answer the usual 503 naming
// db, and the breaker counts none of them, however many; an attempt cut by
// connect_timeout with the caller still waiting is a hang (half-open, nothing
// having answered meanwhile), and the next, the probe, opens it.
func TestCallerDeadlineIsNoEvidence(t *testing.T) {
	t.Parallel()
	exec := func(t *testing.T, d *DB, callerDeadline time.Duration) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), callerDeadline)
		defer cancel()
		_, err := d.Exec(ctx, "SELECT 1")
		var de *problem.DependencyError
		if !errors.As(err, &de) || de.Dependency != "db" || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("caller deadline %s: %v; want the db dependency error for the deadline", callerDeadline, err)
		}
		if p, _ := problem.As(err); p == nil || p.Status != 503 {
			t.Fatalf("caller deadline %s: problem %+v; want a 503", callerDeadline, p)
		}
	}
	nothingCounted := func(t *testing.T, d *DB, what string) {
		t.Helper()
		if snap := d.Breaker(); snap.State != resilience.StateClosed || snap.Consecutive != 0 || snap.WindowFailures != 0 {
			t.Fatalf("after %s: breaker %+v; want closed with no failure counted", what, snap)
		}
	}

	t.Run("connect", func(t *testing.T) {
		t.Parallel()
		// connect_timeout is far above what 5 calls of 50 ms take: the
		// connects they started, which go on in the background, are
		// counted at their own timeout (TestConnectOutlivingItsCallerIsEvidence).
		// (ping_timeout above it, so that the attempt after a failure is
		// still cut by connect_timeout, as before.)
		b := setup(t, setupOpts{proxy: true, toml: "connect_timeout = \"2s\"\nping_timeout = \"5s\"\nbreaker_failures = 2"})
		if err := b.proxy.Hold(); err != nil {
			t.Fatal(err)
		}
		for range 5 {
			exec(t, b.db, 50*time.Millisecond)
		}
		nothingCounted(t, b.db, "5 connects cut by the caller's deadline")
		for range 2 {
			exec(t, b.db, time.Minute)
		}
		if snap := b.db.Breaker(); snap.State != resilience.StateOpen {
			t.Fatalf("after a connect cut by connect_timeout and its probe: breaker %+v; want open", snap)
		}
		// A connection the open breaker refuses is a call and no attempt.
		calls, attempts := b.db.gate.calls.Load(), b.db.gate.attempts.Load()
		if _, err := b.db.Exec(context.Background(), "SELECT 1"); !errors.Is(err, resilience.ErrOpen) {
			t.Fatalf("with the breaker open: %v; want its refusal", err)
		}
		if c, a := b.db.gate.calls.Load()-calls, b.db.gate.attempts.Load()-attempts; c != 1 || a != 0 {
			t.Fatalf("refused by the open breaker: acquisitions +%d, attempts +%d; want +1 and +0", c, a)
		}
	})

	t.Run("ping", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{proxy: true, toml: "ping_timeout = \"2s\"\npool_size = 5\nbreaker_failures = 1"})
		b.warm(t, 5)
		time.Sleep(pingIdle + 200*time.Millisecond) // idle long enough to be pinged (pgxpool's real clock)
		b.proxy.HangExisting()
		for range 5 {
			exec(t, b.db, 50*time.Millisecond)
		}
		nothingCounted(t, b.db, "5 pings cut by the caller's deadline")
		if got := b.db.gate.pingTerminations.Load(); got != 5 {
			t.Fatalf("%d pooled connections terminated; want the 5 whose ping the callers cut", got)
		}
	})
}

// A server that accepts connections and never answers is found by callers
// whose deadlines are all shorter than connect_timeout (an idempotency
// store's store_timeout, a short request): the connect a caller's attempt
// started goes on in the background, and its own silence is the evidence
// (a hang with nothing answered since the attempt began: the breaker goes
// half-open), so the next attempt, the probe, is bounded by ping_timeout
// and opens the breaker, and the callers after it get its 503 at once.
func TestConnectOutlivingItsCallerIsEvidence(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{proxy: true, toml: "connect_timeout = \"300ms\"\nping_timeout = \"100ms\""})
	ended := make(chan resilience.Outcome, 8)
	b.db.gate.onConnectEnd = func(o resilience.Outcome) { ended <- o }
	if err := b.proxy.Hold(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	_, err := b.db.Exec(ctx, "SELECT 1")
	cancel()
	var de *problem.DependencyError
	if !errors.As(err, &de) || de.Dependency != "db" || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a call cut by its own deadline: %v; want the db dependency error for the deadline", err)
	}
	select {
	case o := <-ended:
		if o != resilience.Hang {
			t.Fatalf("the connect the caller left ended %v; want a hang (no answer within connect_timeout)", o)
		}
	case <-t.Context().Done():
		t.Fatal("the connect the caller left was never counted")
	}
	if snap := b.db.Breaker(); snap.State != resilience.StateHalfOpen {
		t.Fatalf("after the connect's own timeout: breaker %+v; want half-open (a hang, nothing answered meanwhile)", snap)
	}
	if _, err := b.db.Exec(context.Background(), "SELECT 1"); !errors.As(err, &de) {
		t.Fatalf("the probe: %v; want the db dependency error", err)
	}
	if snap := b.db.Breaker(); snap.State != resilience.StateOpen {
		t.Fatalf("after the probe, bounded by ping_timeout, got no answer: breaker %+v; want open", snap)
	}
	if _, err := b.db.Exec(context.Background(), "SELECT 1"); !errors.Is(err, resilience.ErrOpen) {
		t.Fatalf("with the breaker open: %v; want its refusal", err)
	}
}

// The probe's caller has a short deadline too: the connect it leaves is
// still bounded by ping_timeout as the probe, so the breaker opens
// ping_timeout after the probe began, not when the connect's own
// connect_timeout ends it (which it cannot do sooner: nothing answers).
func TestProbeCutByItsCallerIsStillBoundedByPingTimeout(t *testing.T) {
	t.Parallel()
	const connectTimeout = 3 * time.Second
	b := setup(t, setupOpts{proxy: true, toml: "connect_timeout = \"3s\"\nping_timeout = \"100ms\""})
	ended := make(chan resilience.Outcome, 8)
	b.db.gate.onConnectEnd = func(o resilience.Outcome) { ended <- o }
	if err := b.proxy.Hold(); err != nil {
		t.Fatal(err)
	}
	short := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		_, err := b.db.Exec(ctx, "SELECT 1")
		return err
	}
	_ = short()
	if o := <-ended; o != resilience.Hang {
		t.Fatalf("the first connect the caller left ended %v; want a hang", o)
	}
	if snap := b.db.Breaker(); snap.State != resilience.StateHalfOpen {
		t.Fatalf("after the first connect's timeout: breaker %+v; want half-open", snap)
	}
	probe := time.Now()
	var de *problem.DependencyError
	if err := short(); !errors.As(err, &de) || errors.Is(err, resilience.ErrOpen) {
		t.Fatalf("the probe: %v; want the db dependency error for its caller's deadline", err)
	}
	if o := <-ended; o != resilience.Hang {
		t.Fatalf("the probe's connect ended %v; want a hang", o)
	}
	if d := time.Since(probe); d >= connectTimeout {
		t.Fatalf("the probe was concluded %s after it began; want its ping_timeout, before connect_timeout (%s) could", d, connectTimeout)
	}
	if snap := b.db.Breaker(); snap.State != resilience.StateOpen || snap.RetryAfter <= 0 {
		t.Fatalf("after the probe: breaker %+v; want open, with its cool-down", snap)
	}
	if err := short(); !errors.Is(err, resilience.ErrOpen) {
		t.Fatalf("with the breaker open: %v; want its refusal", err)
	}
}

// Declared critical and booted with the database down (nothing listening),
// /ready is a 503 problem+json naming db on the first call and on every call
// after, also once the breaker has opened: the verdict follows the database,
// not the breaker.
func TestCriticalFromBootWithTheDatabaseDown(t *testing.T) {
	t.Parallel()
	addr := jfasttest.RefusedAddr(t)
	b := setup(t, setupOpts{url: "postgres://postgres@" + addr + "/test?sslmode=disable", toml: "critical = true"})
	for i := range 12 {
		if i == 3 {
			for range 6 {
				if r := b.svc.Get(t, "/one"); r.Status != 503 {
					t.Fatalf("/one with the database down: %d", r.Status)
				}
			}
			if snap := b.db.Breaker(); snap.State != resilience.StateOpen {
				t.Fatalf("breaker after 6 refused requests: %+v, want open", snap)
			}
		}
		r := b.svc.Get(t, "/ready")
		var body map[string]any
		if err := json.Unmarshal(r.Body, &body); err != nil {
			t.Fatal(err)
		}
		if r.Status != 503 || r.Header.Get("Content-Type") != problem.ContentType || body["status"] != 503.0 ||
			body["verdict"] != "unavailable" || body["detail"] != "critical check failed: db" {
			t.Fatalf("/ready %d (breaker %s) = %d %s, want the 503 problem naming db", i, b.db.Breaker().State, r.Status, r)
		}
		if _, ok := body["checks"].(map[string]any)["db"]; !ok {
			t.Fatalf("/ready %d has no db check: %s", i, r)
		}
	}
}
