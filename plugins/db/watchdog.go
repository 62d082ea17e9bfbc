package db

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/jfastframework/jfast/framework/resilience"
	"github.com/jfastframework/jfast/problem"
)

// The watchdog finds a server that stopped answering while statements run.
//
// A statement on a connection used less than pingIdle ago is sent without a
// ping (a ping per statement would cost a round trip each), so nothing but
// its own deadline would bound it: a request's 30 s. Instead, one goroutine
// per pool reads, every ping_timeout / 4, the slots of the connections in
// use (when each was asked for, or a token that changes at each acquisition;
// see connSlot). When one has been in use for
// ping_timeout / 2 or more, the server is suspect, and the watchdog asks it
// whether it is alive: SELECT 1 on a connection of its own, outside the
// pool (opened if needed), the whole check bounded by ping_timeout. One
// check serves every statement in flight at that moment. Time in use is
// counted in the watchdog's own ticks (a slot holding the same acquisition
// at two ticks in a row has been in use for at least a tick), so the
// watchdog runs on the App's clock and a test drives it with a test clock.
//
//   - An answer (or an error the server sent, or a refused dial: something
//     answered): the statements are merely slow and are left alone. The next
//     check comes no sooner than ping_timeout / 2 later, so a long report
//     costs one SELECT 1 a second on that connection, and the connection is
//     closed at the first tick that finds nothing in use for that long.
//   - Silence: the server hangs. The breaker opens (resilience.Breaker.Trip),
//     every connection of the pool in use has its socket closed, so its
//     statement ends now with the breaker's 503 naming db, acquisitions in
//     progress end the same way, and the pool is reset (its idle connections
//     are closed, those in use when they come back).
//
// So a statement that meets a hung server ends within ping_timeout / 2 + a
// tick + ping_timeout of when its connection was asked for: 1.75 ×
// ping_timeout, 3.5 s with the defaults. The happy path pays nothing more
// than the slot the acquisition timer already writes: no timer or goroutine
// per statement.

// How often the watchdog looks (a fraction of ping_timeout), and how many
// of its ticks a connection may be in use before the server is asked
// whether it is alive: 2 ticks, ping_timeout / 2.
const (
	watchTickDivisor  = 4
	watchSuspectTicks = 2
)

// errStatementHung is the cause of a statement the watchdog cut.
var errStatementHung = fmt.Errorf("db: the statement was cut: the server answered no liveness check (SELECT 1) within ping_timeout while it ran, and the breaker opened: %w", resilience.ErrOpen)

// watchdog is the gate's part that watches statements in flight.
type watchdog struct {
	clock resilience.Clock

	slotsMu sync.Mutex
	slots   map[*connSlot]struct{}

	pool     atomic.Pointer[pgxpool.Pool]
	config   *pgconn.Config // of the liveness connection
	stop     chan struct{}
	done     chan struct{}
	stopOnce sync.Once
	started  bool

	// Owned by the watchdog goroutine.
	live  *pgconn.PgConn // the liveness connection; nil when closed
	quiet int            // ticks to wait after an answered check before the next

	checks, trips atomic.Uint64
}

func (w *watchdog) init(clock resilience.Clock) {
	if clock == nil {
		clock = resilience.RealClock()
	}
	w.clock = clock
	w.slots = make(map[*connSlot]struct{})
	w.stop = make(chan struct{})
	w.done = make(chan struct{})
}

// addSlot gives a new connection its slot and registers it with the
// watchdog (the pool's AfterConnect).
func (g *gate) addSlot(c *pgx.Conn) {
	s := heldSlot(c) // made by BeforeConnect (see sockets.go)
	if s == nil {
		s = new(connSlot)
		c.PgConn().CustomData()[heldKey] = s
	}
	s.conn = c.PgConn().Conn()
	g.watch.slotsMu.Lock()
	g.watch.slots[s] = struct{}{}
	g.watch.slotsMu.Unlock()
	g.open.Add(1)
}

// removeSlot forgets a connection the pool destroys (its BeforeClose).
func (g *gate) removeSlot(c *pgx.Conn) {
	if s := heldSlot(c); s != nil {
		g.watch.slotsMu.Lock()
		delete(g.watch.slots, s)
		g.watch.slotsMu.Unlock()
		g.open.Add(-1)
	}
}

// startWatching starts the watchdog of pool. cfg is the pool's connection
// configuration, which the liveness connection uses.
func (g *gate) startWatching(pool *pgxpool.Pool, cfg *pgconn.Config) {
	g.watch.pool.Store(pool)
	g.watch.config = cfg
	g.watch.started = true
	go g.watchLoop()
}

// stopWatching stops the watchdog and waits for it (a check in progress
// ends within ping_timeout, and at once when the stop cancels it).
func (g *gate) stopWatching() {
	g.watch.stopOnce.Do(func() { close(g.watch.stop) })
	if g.watch.started {
		<-g.watch.done
	}
}

func (g *gate) watchTick() time.Duration {
	return max(g.pingTimeout/watchTickDivisor, time.Millisecond)
}

func (g *gate) watchLoop() {
	defer close(g.watch.done)
	defer g.closeLive()
	clock := g.watch.clock
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-g.watch.stop
		cancel()
	}()
	for {
		t := clock.NewTimer(g.watchTick())
		select {
		case <-g.watch.stop:
			t.Stop()
			return
		case <-t.C():
		}
		g.inspect(ctx)
	}
}

// inspect is one tick of the watchdog.
func (g *gate) inspect(ctx context.Context) {
	suspicious := false
	g.watch.slotsMu.Lock()
	for s := range g.watch.slots {
		asked := s.asked.Load()
		if asked == 0 || asked != s.seen || s.cut.Load() {
			// In the pool, taken again since the last tick, or cut
			// already (on its way back to the pool, to be destroyed).
			s.seen, s.ticks = asked, 0
			continue
		}
		s.ticks++
		suspicious = suspicious || s.ticks >= watchSuspectTicks
	}
	g.watch.slotsMu.Unlock()
	if !suspicious {
		g.watch.quiet = 0
		g.closeLive()
		return
	}
	if g.watch.quiet > 0 {
		g.watch.quiet-- // the server answered a moment ago
		return
	}
	g.watch.checks.Add(1)
	g.suspect.Store(true) // a new connection meanwhile waits at most ping_timeout
	switch g.alive(ctx) {
	case checkAnswered:
		g.watch.quiet = watchSuspectTicks - 1
		g.suspect.Store(false)
	case checkSilent:
		g.trip()
	}
}

type checkResult uint8

const (
	checkAnswered checkResult = iota
	checkSilent
	checkStopped // the plugin stopped during the check
)

// alive asks the server whether it answers: SELECT 1 on the liveness
// connection, opened first if there is none; all of it within ping_timeout.
// Anything the server (or its host) says is an answer, an error included;
// only silence until ping_timeout is not.
func (g *gate) alive(ctx context.Context) checkResult {
	cctx, cancel := context.WithTimeout(ctx, g.pingTimeout)
	defer cancel()
	result := func(err error) checkResult {
		switch {
		case ctx.Err() != nil:
			return checkStopped
		case cctx.Err() != nil:
			return checkSilent
		}
		return checkAnswered // err is nil, or something answered it
	}
	for range 2 { // a liveness connection found broken is replaced once
		if g.watch.live == nil {
			pc, err := pgconn.ConnectConfig(cctx, g.watch.config)
			if err != nil {
				return result(err)
			}
			g.watch.live = pc
			return checkAnswered // its startup was the answer
		}
		_, err := g.watch.live.Exec(cctx, pingSQL).ReadAll()
		if err == nil {
			return checkAnswered
		}
		broken := g.watch.live.IsClosed()
		if !broken || cctx.Err() != nil {
			if broken {
				g.closeLive()
			}
			return result(err)
		}
		g.closeLive() // reset or closed by the server: open another
	}
	return checkAnswered
}

// closeLive closes the liveness connection, if any, without waiting on the
// server.
func (g *gate) closeLive() {
	if g.watch.live != nil {
		_ = g.watch.live.Conn().Close()
		g.watch.live = nil
	}
}

// trip acts on a server that answered no liveness check: the breaker
// opens (which ends the acquisitions in progress, see newGate), every
// connection in use has its socket closed so its statement ends now, and
// the pool is reset.
func (g *gate) trip() {
	g.watch.trips.Add(1)
	g.stale.Store(true)
	g.closeLive()
	g.breaker.Trip()
	g.watch.slotsMu.Lock()
	for s := range g.watch.slots {
		if s.asked.Load() != 0 {
			s.cut.Store(true)
			s.cutCancel()
			_ = s.conn.Close()
		}
	}
	g.watch.slotsMu.Unlock()
	if pool := g.watch.pool.Load(); pool != nil {
		pool.Reset()
	}
}

// hungErr is the error of a statement the watchdog cut: the breaker's 503
// naming db, with the cool-down left.
func (g *gate) hungErr(err error) error {
	return &problem.DependencyError{
		Dependency: dependencyName,
		Err:        fmt.Errorf("%w (%w)", errStatementHung, scrub(err)),
		RetryAfter: g.breaker.Snapshot().RetryAfter,
	}
}

// connEnd is what a statement left of its connection, read before the
// connection goes back to the pool.
type connEnd struct {
	broken bool // the connection is closed
	cut    bool // the watchdog closed it
}

func endOf(c *pgx.Conn) connEnd {
	e := connEnd{broken: c.IsClosed()}
	if s := heldSlot(c); s != nil && e.broken {
		e.cut = s.cut.Load()
	}
	return e
}
