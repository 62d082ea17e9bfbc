package db

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/jfastframework/jfast/framework/resilience"
	"github.com/jfastframework/jfast/problem"
)

// watchUntil advances the test clock one watchdog tick at a time, each once
// the watchdog waits on the clock again (a check in progress runs on real
// time), until cond holds. It returns how many ticks it took.
func watchUntil(t *testing.T, b *bundle, cond func() bool) int {
	t.Helper()
	tick := b.db.gate.watchTick()
	for n := 0; ; n++ {
		if cond() {
			return n
		}
		if n > 10*watchSuspectTicks {
			t.Fatalf("%d watchdog ticks and nothing happened", n)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		err := b.clock.BlockUntilContext(ctx, 1)
		cancel()
		if err != nil {
			t.Fatalf("the watchdog did not wait on the clock again: %v", err)
		}
		b.clock.Advance(tick)
	}
}

// waitPool waits until the pool's statistics satisfy cond (what names it),
// for at most within.
func waitPool(t *testing.T, d *DB, within time.Duration, what string, cond func(*pgxpool.Stat) bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond(d.Stat()) {
		if time.Now().After(deadline) {
			s := d.Stat()
			t.Fatalf("the pool is not %s after %s: %d connections, %d in use, %d idle", what, within, s.TotalConns(), s.AcquiredConns(), s.IdleConns())
		}
		time.Sleep(time.Millisecond)
	}
}

// begin starts a transaction and runs a statement in it, so its connection
// is in use with no ping ahead of the next statement.
func begin(t *testing.T, d *DB) pgx.Tx {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	tx, err := d.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "SELECT 1"); err != nil {
		t.Fatal(err)
	}
	return tx
}

// A server that stops answering while statements run: the watchdog finds
// the connections in use past ping_timeout / 2, its liveness check gets no
// answer within ping_timeout, and every statement in flight ends at once
// with the breaker's 503 naming db (Retry-After, errors.Is ErrOpen), an
// acquisition waiting for a new connection too, well before their own
// deadlines (30 s here, and connect_timeout 10 s). Then the half-open probe
// opens a new connection while the server is suspect: bounded by
// ping_timeout, not connect_timeout. After the resume the same pool serves.
func TestWatchdogCutsStatementsOnAHungServer(t *testing.T) {
	t.Parallel()
	const pingTimeout, connectTimeout = 300 * time.Millisecond, 10 * time.Second
	b := setup(t, setupOpts{proxy: true, toml: "ping_timeout = \"300ms\"\nconnect_timeout = \"10s\"\npool_size = 3"})
	tx1, tx2 := begin(t, b.db), begin(t, b.db)
	b.proxy.Hold()

	got := make([]error, 3)
	var wg sync.WaitGroup
	start := time.Now()
	run := func(i int, f func(context.Context) error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			got[i] = f(ctx)
		}()
	}
	for i, tx := range []pgx.Tx{tx1, tx2} {
		run(i, func(ctx context.Context) error {
			_, err := tx.Exec(ctx, "SELECT 1")
			_ = tx.Rollback(context.Background())
			return err
		})
	}
	// A third statement needs a new connection (the pool's two are in
	// use), which the held server never completes. It ends when the
	// breaker opens, or at ping_timeout when it began after the check
	// (the server is suspect then): a 503 naming db either way.
	run(2, func(ctx context.Context) error { _, err := b.db.Exec(ctx, "SELECT 1"); return err })

	watchUntil(t, b, func() bool { return b.db.gate.watch.trips.Load() > 0 })
	wg.Wait()
	took := time.Since(start)
	for i, err := range got {
		var de *problem.DependencyError
		if !errors.As(err, &de) || de.Dependency != "db" {
			t.Fatalf("statement %d: %v; want a db dependency error", i, err)
		}
		if i < 2 && (!errors.Is(err, resilience.ErrOpen) || de.RetryAfter <= 0) {
			t.Fatalf("statement %d, in flight: %v; want the breaker's error with Retry-After", i, err)
		}
	}
	if took >= connectTimeout {
		t.Fatalf("the statements ended after %s; want the watchdog's check (ping_timeout %s), not a deadline", took, pingTimeout)
	}
	if snap := b.db.Breaker(); snap.State != resilience.StateOpen || snap.Opens != 1 {
		t.Fatalf("breaker %+v; want open once", snap)
	}
	if n := b.db.gate.watch.trips.Load(); n != 1 {
		t.Fatalf("%d trips; want 1", n)
	}

	// The probe after the cool-down, bounded by ping_timeout since the
	// server is suspect: it fails, whether it waits for a free slot (the
	// connect begun for the third statement is held) or opens a new
	// connection (the cut connections freed theirs at once).
	b.clock.Advance(resilience.DefaultBreakerCoolDown)
	var probeErr error
	probe := timed(func() { _, probeErr = b.db.Exec(context.Background(), "SELECT 1") })
	if probeErr == nil || probe >= connectTimeout/2 {
		t.Fatalf("the probe on a held server: %v after %s; want a failure within ping_timeout (%s)", probeErr, probe, pingTimeout)
	}
	if snap := b.db.Breaker(); snap.State != resilience.StateOpen || snap.Opens != 2 {
		t.Fatalf("breaker after the probe %+v; want open again", snap)
	}

	_ = b.proxy.Pass()
	// The test clock passes the cool-down at once, but the connects the
	// held server kept (the one begun for the third statement before the
	// reset, destroyed once it completes; the probe's, which goes on in the
	// background and lands in the pool) end on real time, as the resumed
	// server answers them. In production the 15 s cool-down covers that;
	// here the test waits for the pool to settle: nothing in use, nothing
	// connecting. (The cut connections kept no slot: they send no cancel
	// request, see sockets.go.) Then a connection opened outside the breaker
	// (as River's through DB.Pool), bounded by connect_timeout rather than
	// by the suspect server's ping_timeout, which a new session on a loaded
	// machine may exceed, lands in the pool for the probe.
	waitPool(t, b.db, connectTimeout, "settled", func(s *pgxpool.Stat) bool {
		return s.AcquiredConns() == 0 && s.ConstructingConns() == 0
	})
	ctx, cancel := context.WithTimeout(context.Background(), connectTimeout)
	c, err := b.db.Pool().Acquire(ctx)
	cancel()
	if err != nil {
		t.Fatalf("a connection to the resumed server: %v", err)
	}
	c.Release()
	waitPool(t, b.db, connectTimeout, "holding one idle connection", func(s *pgxpool.Stat) bool { return s.IdleConns() == 1 })
	b.clock.Advance(resilience.DefaultBreakerCoolDown)
	if r := b.svc.Get(t, "/one"); r.Status != 200 {
		t.Fatalf("after the resume and the cool-down: %d %s", r.Status, r.Body)
	}
}

// A statement that is merely slow on a server that answers is left alone:
// the watchdog asks the server (it answers) and cuts nothing; the breaker
// counts nothing.
func TestWatchdogLeavesSlowStatementsAlone(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{toml: `ping_timeout = "300ms"`})
	const ticks = 8 // enough for the first check and the next ones (every 2 ticks)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	lock, err := b.db.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lock.Exec(ctx, "SELECT pg_advisory_xact_lock(hashtext($1))", t.Name()); err != nil {
		t.Fatal(err)
	}
	res := make(chan error, 1)
	inUse := make(chan struct{})
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		tx, err := b.db.Begin(ctx)
		if err != nil {
			close(inUse)
			res <- err
			return
		}
		defer func() { _ = tx.Rollback(ctx) }()
		close(inUse)
		// Slow until the test has made its ticks (an advisory lock the
		// test holds), then one more statement on the same connection.
		_, err = tx.Exec(ctx, "SELECT pg_advisory_xact_lock(hashtext($1))", t.Name())
		if err == nil {
			_, err = tx.Exec(ctx, "SELECT 1")
		}
		res <- err
	}()
	<-inUse
	tick := b.db.gate.watchTick()
	for range ticks {
		if err := b.clock.BlockUntilContext(ctx, 1); err != nil {
			t.Fatal(err)
		}
		b.clock.Advance(tick)
	}
	if err := b.clock.BlockUntilContext(ctx, 1); err != nil { // the last tick's check is over
		t.Fatal(err)
	}
	if err := lock.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-res; err != nil {
		t.Fatalf("the slow statement: %v; want it to finish", err)
	}
	checks, trips := b.db.gate.watch.checks.Load(), b.db.gate.watch.trips.Load()
	if checks < 2 || trips != 0 {
		t.Fatalf("%d checks, %d trips; want at least 2 answered checks and no trip", checks, trips)
	}
	if snap := b.db.Breaker(); snap.State != resilience.StateClosed || snap.Consecutive != 0 || snap.Opens != 0 {
		t.Fatalf("breaker %+v; want closed with nothing counted", snap)
	}
}

// A long healthy load: 100 callers each running SELECT pg_sleep(0.05) in a
// loop for 30 s on the default pool (10 connections, so each statement also
// waits for a free one), the App on the real clock so the watchdog ticks by
// itself: nothing fails, nothing is cut, the breaker never opens.
func TestHealthyLoadOpensNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("30 s of load")
	}
	t.Parallel()
	const callers, span = 100, 30 * time.Second
	b := setup(t, setupOpts{realClock: true})
	end := time.Now().Add(span)
	var ok atomic.Int64
	var wg sync.WaitGroup
	for range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(end) {
				if _, err := b.db.Exec(context.Background(), "SELECT pg_sleep(0.05)"); err != nil {
					t.Errorf("a statement under healthy load: %v", err)
					return
				}
				ok.Add(1)
			}
		}()
	}
	wg.Wait()
	checks, trips := b.db.gate.watch.checks.Load(), b.db.gate.watch.trips.Load()
	snap := b.db.Breaker()
	t.Logf("%d statements in %s by %d callers; %d liveness checks, %d trips; breaker %s, %d failures", ok.Load(), span, callers, checks, trips, snap.State, snap.WindowFailures)
	if trips != 0 || snap.State != resilience.StateClosed || snap.Opens != 0 || snap.WindowFailures != 0 {
		t.Fatalf("healthy load: %d trips, breaker %+v; want nothing opened or counted", trips, snap)
	}
}
