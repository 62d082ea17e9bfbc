package db

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/jfastframework/jfast/framework/resilience"
	"github.com/jfastframework/jfast/jfasttest"
)

// stopWithin stops the plugin and fails unless it returned nil within bound.
func stopWithin(t *testing.T, pl *Plugin, bound time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var err error
	took := timed(func() { err = pl.Stop(ctx) })
	if err != nil || took > bound {
		t.Fatalf("Stop: %v after %s; want nil within %s", err, took, bound)
	}
	t.Logf("Stop took %s", took)
}

// A connection whose ping got no answer within ping_timeout has its socket
// closed and sends no cancel request: its pool slot frees at once, not
// after pgconn's 15 s cleanup, and a Stop right after does not wait for it.
// The bound is twice ping_timeout: nothing in either waits on the server.
func TestPingCutFreesItsSlotAndStopIsPrompt(t *testing.T) {
	t.Parallel()
	const pingTimeout = 500 * time.Millisecond
	pl := New()
	b := setup(t, setupOpts{proxy: true, plugin: pl, toml: `ping_timeout = "500ms"` + "\npool_size = 2"})
	b.warm(t, 1)
	_ = b.proxy.Hold()
	b.db.gate.stale.Store(true) // the next acquisition pings, whatever the idle time
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := b.db.Exec(ctx, "SELECT 1"); !isDBDependencyError(err) {
		t.Fatalf("a statement on a held server: %v; want a db dependency error", err)
	}
	if n := b.db.gate.pingTerminations.Load(); n != 1 {
		t.Fatalf("%d ping terminations; want 1", n)
	}
	waitPool(t, b.db, 2*pingTimeout, "without a connection in use", func(s *pgxpool.Stat) bool { return s.AcquiredConns() == 0 })
	stopWithin(t, pl, 2*pingTimeout)
}

// A statement cut by its deadline (command_timeout here) on a server that
// stopped answering: pgconn's cancel request to that server and its drain
// of the connection would each keep the connection 15 s; Stop ends both at
// once (twice ping_timeout: nothing waits on the server).
func TestStopDuringAHangEndsCancelRequests(t *testing.T) {
	t.Parallel()
	const pingTimeout = 500 * time.Millisecond
	pl := New()
	b := setup(t, setupOpts{proxy: true, plugin: pl, toml: "ping_timeout = \"500ms\"\ncommand_timeout = \"200ms\""})
	b.warm(t, 1)
	mustExec(t, b.db, "SELECT 1") // used a moment ago: no ping before the next
	_ = b.proxy.Hold()
	if _, err := b.db.Exec(context.Background(), "SELECT 1"); !isDBDependencyError(err) {
		t.Fatalf("a statement on a held server: %v; want a db dependency error", err)
	}
	stopWithin(t, pl, 2*pingTimeout)
}

// min_idle connections are opened in the background on a context nothing
// cancels, bounded by connect_timeout: against a server that accepts and
// never answers, Stop closes them at once instead of waiting it out.
func TestStopEndsMinIdleConnects(t *testing.T) {
	t.Parallel()
	const pingTimeout = 500 * time.Millisecond
	addr, arrived, _ := jfasttest.WatchedSilentServer(t)
	pl := New()
	setup(t, setupOpts{plugin: pl, url: fmt.Sprintf("postgres://u@%s/db?sslmode=disable", addr),
		toml: "min_idle = 2\nping_timeout = \"500ms\"\nconnect_timeout = \"20s\""})
	for range 2 {
		select {
		case <-arrived:
		case <-time.After(10 * time.Second):
			t.Fatal("the min_idle connections never reached the server")
		}
	}
	stopWithin(t, pl, 2*pingTimeout)
}

// A Stop while a statement with no deadline (context.Background(), no
// command_timeout) runs on a connection taken through the plugin, the
// server paused for real (a private cluster): pgxpool's Close waits for
// that connection, and the watchdog, which keeps watching until the pool
// has closed, cuts the statement (the breaker's 503 naming db) within its
// bound, so Stop returns nil. Before, Stop stopped the watchdog first: the
// statement waited for the server until the resume, and Stop for
// plugin_stop_timeout. The watchdog runs on the test clock: the test
// advances it only once the Stop has begun.
func TestStopDuringAHangWaitsForTheWatchdog(t *testing.T) {
	t.Parallel()
	target := privateCluster(t)
	pl := New()
	b := setup(t, setupOpts{url: target.url, plugin: pl, toml: `ping_timeout = "500ms"`})
	t.Cleanup(target.resume) // before the App stops (cleanups run in reverse)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := b.db.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Exec(ctx, "SELECT 1"); err != nil {
		t.Fatal(err)
	}
	target.pause()
	statement := make(chan error, 1)
	go func() {
		_, err := c.Exec(context.Background(), "SELECT 1")
		c.Release()
		statement <- err
	}()
	stopped := make(chan error, 1)
	go func() { stopped <- pl.Stop(ctx) }()
	<-b.db.gate.stopCtx.Done() // the Stop has begun
	if err := watchUntilEnds(t, b, statement); !isDBDependencyError(err) || !errors.Is(err, resilience.ErrOpen) {
		t.Fatalf("the statement in flight during Stop: %v; want the breaker's error naming db", err)
	}
	if n := b.db.gate.watch.trips.Load(); n != 1 {
		t.Fatalf("%d watchdog trips; want 1", n)
	}
	if err := <-stopped; err != nil {
		t.Fatalf("Stop: %v; want nil once the watchdog cut the statement", err)
	}
}

// watchUntilEnds advances the test clock a watchdog tick at a time, each
// once the watchdog waits on the clock again, until it tripped; then it
// waits for the statement to end and returns its error. Either may come
// first: a Stop stops the watchdog once the cut statement's connection is
// back, so after the trip it may never wait on the clock again.
func watchUntilEnds(t *testing.T, b *bundle, ended <-chan error) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for n := 0; b.db.gate.watch.trips.Load() == 0; n++ {
		if n > 10*watchSuspectTicks {
			t.Fatalf("%d watchdog ticks and no trip", n)
		}
		waiting := make(chan error, 1)
		go func() { waiting <- b.clock.BlockUntilContext(ctx, 1) }()
		select {
		case err := <-ended:
			return err
		case err := <-waiting:
			if err != nil {
				t.Fatalf("the watchdog did not wait on the clock again: %v", err)
			}
			b.clock.Advance(b.db.gate.watchTick())
		}
	}
	select {
	case err := <-ended:
		return err
	case <-ctx.Done():
		t.Fatal("the watchdog tripped and the statement did not end")
		return nil
	}
}
