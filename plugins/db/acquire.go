package db

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/puddle/v2"

	"github.com/jfastframework/jfast/framework/resilience"
	"github.com/jfastframework/jfast/problem"
)

// dependencyName names the plugin's dependency in problems, breakers and logs.
const dependencyName = "db"

// pingSQL is the bounded ping. Sent with the simple protocol (no prepared
// statement), so it works behind PgBouncer in transaction mode.
const pingSQL = "SELECT 1"

// attemptKey carries an *attempt in the acquisition's context, so the pool
// hooks (which run inside pgxpool.Acquire and its connect goroutine) can
// record what happened to it.
type attemptKey struct{}

// attempt records one connection attempt: a pgxpool.Acquire that may ping
// idle connections and may open a new one. It is also the context the
// attempt runs under, or the one its own is made from: the caller's, with
// itself as the value of attemptKey.
//
// A caller whose context cannot end (its Done is nil: Background,
// WithoutCancel; jobs, migrations, most of the plugin's own callers) needs no
// context of the attempt's own: the attempt is that context, ending with the
// gate's epoch (which the breaker's opening ends), and it is recycled once
// its acquisition succeeded. A caller whose context can end gets a cancel
// context made from the attempt, tracked in gate.inflight.
type attempt struct {
	context.Context // the caller's

	// epoch is the gate's epoch when the caller's context cannot end: the
	// attempt's Done and Err are the epoch's. Nil otherwise.
	epoch  context.Context
	cancel context.CancelCauseFunc // of the attempt's context, when it has one
	slot   int                     // its place in gate.inflight; -1: none

	mu           sync.Mutex
	fresh        *pgx.Conn // opened for this attempt: no ping needed
	ping         *pgx.Conn // idle past pingIdle (or the pool is suspect): ping before handing it out
	connecting   bool      // a new connection was started for it
	pinged       bool      // an idle connection was pinged for it
	pingTimedOut bool      // a ping did not answer within ping_timeout
	own          time.Time // the earliest deadline the plugin put on it; zero: none yet
	connect      *connSlot // the slot of the connection started for it
}

// attempts recycles the attempts of callers whose context cannot end.
var attempts = sync.Pool{New: func() any { return new(attempt) }}

// newAttempt returns an attempt for a caller's ctx: a recycled one when ctx
// cannot end (then under the epoch ep), else a new one.
func newAttempt(ctx context.Context, ep *epoch) *attempt {
	if ctx.Done() != nil {
		return &attempt{Context: ctx}
	}
	a := attempts.Get().(*attempt)
	a.Context, a.epoch = ctx, ep.ctx
	return a
}

// recycle gives back an attempt that ran under the epoch once nothing can
// see it any more: its pgxpool.Acquire returned a connection, so every hook
// that read it (ShouldPing, PrepareConn, and the connect's BeforeConnect and
// AfterConnect, which pgxpool's connect runs before the Acquire it serves
// returns) has returned, and no context was made from it.
func (a *attempt) recycle() {
	*a = attempt{}
	attempts.Put(a)
}

// limit records a deadline the plugin puts on the attempt (its bound, a
// connect's connect_timeout, a ping's ping_timeout), keeping the earliest:
// whose deadline ended the attempt is decided against it.
func (a *attempt) limit(d time.Duration) {
	at := time.Now().Add(d)
	a.mu.Lock()
	if a.own.IsZero() || at.Before(a.own) {
		a.own = at
	}
	a.mu.Unlock()
}

// Done implements context.Context: the epoch's, or the caller's.
func (a *attempt) Done() <-chan struct{} {
	if a.epoch != nil {
		return a.epoch.Done()
	}
	return a.Context.Done()
}

// Err implements context.Context: the epoch's, or the caller's.
func (a *attempt) Err() error {
	if a.epoch != nil {
		return a.epoch.Err()
	}
	return a.Context.Err()
}

// Value implements context.Context: the attempt under attemptKey; under the
// epoch, what the caller's context does not hold comes from the epoch (so
// that context.Cause finds errBreakerOpened, and a context made from the
// attempt ends with the epoch without a goroutine).
func (a *attempt) Value(key any) any {
	if key == (attemptKey{}) {
		return a
	}
	v := a.Context.Value(key)
	if v == nil && a.epoch != nil {
		v = a.epoch.Value(key)
	}
	return v
}

// epoch is what the attempts of callers whose context cannot end wait under
// (see attempt): a context the breaker's opening ends with errBreakerOpened,
// replaced by a new one at once (see gate.cancelInflight). One context for
// them all, instead of a cancel context and a tracking slot each.
type epoch struct {
	ctx    context.Context
	cancel context.CancelCauseFunc
}

func newEpoch() *epoch {
	ctx, cancel := context.WithCancelCause(context.Background())
	return &epoch{ctx: ctx, cancel: cancel}
}

func attemptFrom(ctx context.Context) *attempt {
	a, _ := ctx.Value(attemptKey{}).(*attempt)
	return a
}

// pingTimeoutError is the cause of an attempt whose ping did not answer.
type pingTimeoutError struct{ timeout time.Duration }

func (e *pingTimeoutError) Error() string {
	return fmt.Sprintf("db: ping (SELECT 1) did not answer within ping_timeout %s; the connection was terminated", e.timeout)
}

// Timeout reports true, like net.Error.
func (e *pingTimeoutError) Timeout() bool { return true }

// pingIdle is how long a connection must have been idle to be pinged before
// it is handed out: pgxpool's own rule (one second). A connection used less
// than a second ago answered then; pinging it again would cost a round trip
// per statement (3× a bare pool on SELECT 1) for no evidence a statement
// would not give. A statement that gets no answer within its deadline marks
// the pool stale instead, and every connection is pinged until one answers
// (see gate.stale).
const pingIdle = time.Second

// errBreakerOpened cancels the attempts in flight when the breaker opens:
// the evidence is in, they need not wait out their own deadlines.
var errBreakerOpened = fmt.Errorf("db: breaker opened while waiting for a connection: %w", resilience.ErrOpen)

// errPoolClosed is the cause of an acquisition from a closed pool: the plugin
// stopped, or a tenant's pool was evicted (a tenant's DB then follows the
// tenant to its pool of the moment; see DB.Acquire).
var errPoolClosed = errors.New("db: the pool is closed (the plugin stopped, or this tenant pool was evicted)")

// errAttemptBound is the cause of an attempt cut short because the previous
// attempt failed (see gate.acquire).
var errAttemptBound = errors.New("db: no connection within the bound of an attempt made right after a failed one")

// gate is what every acquisition of a DB goes through: the breaker, the
// bounded ping (installed as the pool's PrepareConn hook) and the bound on
// attempts that follow a failure.
type gate struct {
	breaker        *resilience.Breaker
	pingTimeout    time.Duration
	connectTimeout time.Duration // set by install from the pool's ConnConfig
	// onConnectEnd, when set (by tests, before the first connect), hears
	// the outcome of every connect that concluded an adopted ticket (and of
	// every adopted ticket its attempt's bound concluded first).
	onConnectEnd func(resilience.Outcome)
	// timed is set when the pool observes how long connections are held
	// (the main pool's jfast_db_acquisition_duration_seconds): slots then
	// get the time they were asked for, else a token (see acquire).
	timed bool

	// suspect is set by a failed attempt and cleared by a successful one:
	// while set, an attempt waits at most pingTimeout (see acquire).
	suspect atomic.Bool
	// stale is set when a statement got no answer within its deadline (the
	// caller's, or command_timeout) and cleared by the next ping that
	// answers (or new connection that opens): while set, every connection is pinged before it is handed
	// out, whatever its idle time, so a server that stopped answering is
	// found by a bounded ping (a breaker hang) rather than by more
	// statements waiting out their callers' deadlines.
	stale atomic.Bool

	// open counts the pool's connections, from AfterConnect to BeforeClose.
	// With none open and the server not suspect, its liveness is unknown:
	// see coldTurn.
	open atomic.Int64
	// cold, while an acquisition opens a connection to a pool with none
	// open, is closed when that acquisition is over (coldTurn).
	coldMu sync.Mutex
	cold   chan struct{}

	// The breaker's opening ends the attempts in progress at once
	// (cancelInflight). Those of callers whose context cannot end wait
	// under epoch, which it ends (nothing per attempt); the others are held
	// in inflight: a fixed array of atomic slots, two atomic operations per
	// attempt rather than one more context.
	epoch        atomic.Pointer[epoch]
	inflight     [inflightSlots]atomic.Pointer[attempt]
	inflightNext atomic.Uint32
	overflowMu   sync.Mutex
	overflow     map[*attempt]struct{} // attempts beyond the slots

	pingTerminations atomic.Uint64
	// calls counts the connections asked for through the gate (refused
	// ones too); attempts the attempts the breaker let through (the first,
	// and the one replacing a connection whose ping got no answer).
	calls, attempts atomic.Uint64
	serverVersion   atomic.Pointer[string]

	// broken holds the connections destroyed closed whose cleanup is still
	// running: pgx drains a broken connection for up to 15 s before closing
	// its socket, which on a server that stopped answering is the whole 15 s,
	// and pgxpool's Close waits for it. close ends their sockets at once.
	brokenMu sync.Mutex
	broken   map[*pgconn.PgConn]struct{}

	// stopCtx ends, when the gate closes, the connects in progress and the
	// cancel requests in flight (see sockets.go).
	stopCtx context.Context
	stopAll context.CancelFunc

	watch watchdog
}

func newGate(br *resilience.BreakerOpts, pingTimeout time.Duration) *gate {
	g := &gate{pingTimeout: pingTimeout}
	g.stopCtx, g.stopAll = context.WithCancel(context.Background())
	g.epoch.Store(newEpoch())
	g.watch.init(br.Clock)
	hook := br.OnStateChange
	br.OnStateChange = func(c resilience.StateChange) {
		if c.To == resilience.StateOpen {
			g.cancelInflight()
		}
		if hook != nil {
			hook(c)
		}
	}
	g.breaker = resilience.NewBreaker(*br)
	return g
}

// inflightSlots is how many attempts in progress gate.inflight holds; more
// at once (pool_size is 10 by default) go to a map under a mutex.
const inflightSlots = 64

// track registers a for cancelInflight.
func (g *gate) track(a *attempt) {
	start := g.inflightNext.Add(1)
	for i := range uint32(inflightSlots) {
		n := int((start + i) % inflightSlots)
		if g.inflight[n].CompareAndSwap(nil, a) {
			a.slot = n
			return
		}
	}
	a.slot = -1
	g.overflowMu.Lock()
	if g.overflow == nil {
		g.overflow = make(map[*attempt]struct{})
	}
	g.overflow[a] = struct{}{}
	g.overflowMu.Unlock()
}

// untrack forgets a, once its attempt is over.
func (g *gate) untrack(a *attempt) {
	if a.slot >= 0 {
		g.inflight[a.slot].CompareAndSwap(a, nil)
		return
	}
	g.overflowMu.Lock()
	delete(g.overflow, a)
	g.overflowMu.Unlock()
}

// cancelInflight ends every attempt in progress with errBreakerOpened: the
// evidence is in, they need not wait out their own deadlines. Those under
// the epoch end with it; the attempts that begin from now on get a new one.
func (g *gate) cancelInflight() {
	g.epoch.Swap(newEpoch()).cancel(errBreakerOpened)
	for i := range g.inflight {
		if a := g.inflight[i].Load(); a != nil {
			a.cancel(errBreakerOpened)
		}
	}
	g.overflowMu.Lock()
	for a := range g.overflow {
		a.cancel(errBreakerOpened)
	}
	g.overflowMu.Unlock()
}

// close ends what would wait on the server for the pool's Close (the
// attempts in flight, connects, cancel requests, drains of broken
// connections). The watchdog goes on watching: see DB.close.
func (g *gate) close() {
	g.stopAll()
	g.cancelInflight()
	g.brokenMu.Lock()
	defer g.brokenMu.Unlock()
	for pc := range g.broken {
		_ = pc.Conn().Close() // ends pgx's drain of a connection nobody will use again
	}
	clear(g.broken)
}

// destroyedBroken records a connection destroyed closed (see broken), and
// forgets those whose cleanup has ended, so the set holds only the cleanups
// in progress. One destroyed after the gate closed (its release raced the
// Stop) has its socket closed at once: close has already gone through the
// set, and pgxpool's Close would wait out the cleanup.
func (g *gate) destroyedBroken(pc *pgconn.PgConn) {
	g.brokenMu.Lock()
	defer g.brokenMu.Unlock()
	if g.stopCtx.Err() != nil {
		_ = pc.Conn().Close()
		return
	}
	for old := range g.broken {
		select {
		case <-old.CleanupDone():
			delete(g.broken, old)
		default:
		}
	}
	if g.broken == nil {
		g.broken = make(map[*pgconn.PgConn]struct{})
	}
	g.broken[pc] = struct{}{}
}

// install sets the pool hooks that make the bounded ping.
func (g *gate) install(cfg *pgxpool.Config) {
	// pgxpool's own ping ("-- ping", bounded only by the caller or its
	// PingTimeout, and whose timeout only moves on to the next connection)
	// is replaced by PrepareConn's SELECT 1 bounded by ping_timeout, whose
	// silence the breaker counts as a hang. ShouldPing, which alone sees how
	// long the connection was idle, only marks it for PrepareConn.
	cfg.ShouldPing = func(ctx context.Context, sp pgxpool.ShouldPingParams) bool {
		if sp.IdleDuration > pingIdle || g.stale.Load() {
			if a := attemptFrom(ctx); a != nil {
				a.mu.Lock()
				a.ping = sp.Conn
				a.mu.Unlock()
			}
		}
		return false
	}
	g.connectTimeout = cfg.ConnConfig.ConnectTimeout
	cfg.AfterConnect = func(ctx context.Context, c *pgx.Conn) error {
		if v := c.PgConn().ParameterStatus("server_version"); v != "" {
			g.serverVersion.Store(&v)
		}
		g.addSlot(c) // once per connection
		if a := attemptFrom(ctx); a != nil {
			a.mu.Lock()
			a.fresh = c
			a.mu.Unlock()
		}
		return nil
	}
	cfg.BeforeConnect = func(ctx context.Context, cc *pgx.ConnConfig) error {
		s := g.prepareConnect(cc)
		if a := attemptFrom(ctx); a != nil {
			a.mu.Lock()
			a.connecting = true
			a.connect = s
			a.mu.Unlock()
			if g.connectTimeout > 0 {
				a.limit(g.connectTimeout)
			}
		}
		return nil
	}
	cfg.PrepareConn = g.prepare
	// A connection that broke while in use (a statement cut at its deadline,
	// a reset, a server that ended the session) is destroyed closed: the next
	// acquisitions ping whatever their idle time. This sees the statements of
	// every user of the pool, those on connections taken with Plugin.Acquire
	// or DB.Pool (the queue, idempotency, River) included.
	cfg.BeforeClose = func(c *pgx.Conn) {
		g.removeSlot(c)
		if c.IsClosed() {
			g.stale.Store(true)
			g.destroyedBroken(c.PgConn())
		}
	}
}

// prepare is the pool's PrepareConn hook: before a connection idle for more
// than pingIdle (or any, while the pool is stale) is handed out, SELECT 1
// over the simple protocol, bounded by ping_timeout.
//
//   - The ping answers: the connection is handed out.
//   - The ping fails at once (reset, closed by the server): the connection is
//     destroyed and pgxpool tries the next one, idle or new.
//   - The ping does not answer within ping_timeout: the connection is
//     destroyed and this attempt fails with a *pingTimeoutError; the caller
//     (gate.acquire) counts it against the breaker and tries once more.
//   - The caller's context ends during the ping: the connection is destroyed
//     (its state is unknown) and the acquisition fails with the context's error.
func (g *gate) prepare(ctx context.Context, c *pgx.Conn) (bool, error) {
	a := attemptFrom(ctx)
	if a != nil {
		a.mu.Lock()
		fresh, ping := a.fresh == c, a.ping == c
		a.pinged = a.pinged || (ping && !fresh)
		a.mu.Unlock()
		if fresh || !ping {
			// Just opened (its startup was its ping), or used within
			// pingIdle: the statement itself is the evidence.
			return true, nil
		}
		a.limit(g.pingTimeout)
	}
	pctx, cancel := context.WithTimeout(ctx, g.pingTimeout)
	_, err := c.PgConn().Exec(pctx, pingSQL).ReadAll()
	pingErr := pctx.Err()
	cancel()
	if err == nil {
		g.stale.Store(false)
		return true, nil
	}
	g.pingTerminations.Add(1)
	// pgconn has marked the connection closed and cleans it up in the
	// background, reading until the server closes it for up to 15 s while
	// the pool slot stays taken. The server is not answering: close the
	// socket now, and send no cancel request (see sockets.go), so the slot
	// frees at once.
	if s := heldSlot(c); s != nil {
		s.cutCancel()
	}
	_ = c.PgConn().Conn().Close()
	if ctx.Err() != nil && !errors.Is(context.Cause(ctx), errAttemptBound) {
		return false, context.Cause(ctx)
	}
	if pingErr != nil || ctx.Err() != nil {
		// No answer within ping_timeout, or within the bound of an attempt
		// made after a failure (see gate.acquire): the same evidence.
		if a != nil {
			a.mu.Lock()
			a.pingTimedOut = true
			a.mu.Unlock()
		}
		return false, &pingTimeoutError{timeout: g.pingTimeout}
	}
	return false, nil
}

// acquire returns a connection that answered its ping (or was just opened),
// through the breaker:
//
//  1. One attempt: the breaker must allow it; it takes an idle connection and
//     pings it, or opens a new one (bounded by connect_timeout). While the
//     previous attempt failed, an attempt waits at most ping_timeout: the
//     server is suspect, and a new connection keeps being opened in the
//     background for the next caller.
//  2. If that attempt's ping did not answer, the connection was terminated
//     and one more attempt is made, bounded by ping_timeout / 2.
//
// So a request waits at most 1.5 × ping_timeout (3 s by default) while a
// pooled connection exists, and connect_timeout when it must open the
// first connection to a server that is not known to be in trouble.
//
// Each attempt is one call of the breaker; attempts in flight when it opens
// are cancelled and answer the breaker's error. All of it stays within ctx.
//
// The connection's slot gets the time it was asked for, on the main pool,
// whose release observes jfast_db_acquisition_duration_seconds (see
// heldTracer); on a pool that observes nothing (a tenant's), a token that
// differs at each acquisition, which costs no clock read. The watchdog reads
// either while the connection is in use: all it needs is that the value
// changes when the connection is taken again.
func (g *gate) acquire(ctx context.Context, pool *pgxpool.Pool) (*pgxpool.Conn, *connSlot, error) {
	g.calls.Add(1)
	var asked int64
	if g.timed {
		asked = heldNow()
	}
	var bound time.Duration
	if g.suspect.Load() {
		bound = g.pingTimeout
	} else if g.open.Load() == 0 {
		done, err := g.coldTurn(ctx)
		if err != nil {
			return nil, nil, err
		}
		if done != nil {
			defer done()
		} else if g.suspect.Load() {
			bound = g.pingTimeout
		}
	}
	c, retry, err := g.attempt(ctx, pool, bound)
	if err != nil && retry {
		c, _, err = g.attempt(ctx, pool, g.replaceBound())
	}
	if err != nil {
		return nil, nil, err
	}
	s := heldSlot(c.Conn())
	if s != nil {
		if !g.timed {
			s.uses++
			asked = s.uses<<1 | 1
		}
		s.asked.Store(asked)
	}
	return c, s, nil
}

// coldTurn makes the acquisitions that find no connection open, on a server
// not known to be in trouble, wait for the first one's outcome instead of
// each opening a connection of its own: on a server that hangs, each of those
// would wait the whole connect_timeout, and a service receiving requests
// throughout the first connect would have every one of them pay it (and then
// queue for a pool slot). The first returns a done func, to call once its
// acquisition is over; the others return nil once it is (the pool then has a
// connection, or the server is suspect and the breaker decides: one probe,
// bounded by ping_timeout, the others refused at once), or their context's
// error. When the first ended without evidence (its caller's deadline cut
// it), one of the waiters opens next.
func (g *gate) coldTurn(ctx context.Context) (done func(), _ error) {
	for {
		g.coldMu.Lock()
		ch := g.cold
		if ch == nil {
			ch = make(chan struct{})
			g.cold = ch
			g.coldMu.Unlock()
			return func() { g.endColdTurn(ch) }, nil
		}
		g.coldMu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.Canceled) {
				return nil, ctx.Err()
			}
			return nil, g.unavailable(fmt.Errorf("no connection within the caller's deadline while the first connection to the server was opening: %w", ctx.Err()))
		}
		if g.open.Load() > 0 || g.suspect.Load() {
			return nil, nil
		}
	}
}

// endColdTurn ends the turn coldTurn gave (ch is its channel): the next
// acquire that finds no connection open may open one, and the waiters look
// again.
func (g *gate) endColdTurn(ch chan struct{}) {
	g.coldMu.Lock()
	g.cold = nil
	g.coldMu.Unlock()
	close(ch)
}

// replaceBound is how long the attempt that replaces a connection whose
// ping timed out may take: half of ping_timeout (1 s by default). A new
// connection to a healthy server takes milliseconds on a LAN, and when it
// takes longer it keeps opening in the background (up to connect_timeout)
// and lands in the pool for the next caller; a server that did not answer
// the ping is unlikely to answer this, so the request should not pay twice.
func (g *gate) replaceBound() time.Duration { return g.pingTimeout / 2 }

func (g *gate) attempt(ctx context.Context, pool *pgxpool.Pool, bound time.Duration) (_ *pgxpool.Conn, retry bool, _ error) {
	ticket, err := g.breaker.Allow()
	if err != nil {
		return nil, false, g.unavailable(err)
	}
	g.attempts.Add(1)
	a := newAttempt(ctx, g.epoch.Load())
	var actx context.Context = a
	if a.epoch == nil {
		var cancel context.CancelCauseFunc
		actx, cancel = context.WithCancelCause(a)
		a.cancel = cancel
		defer cancel(nil)
		g.track(a)
		defer g.untrack(a)
	}
	if bound > 0 {
		a.limit(bound)
		var cancelBound context.CancelFunc
		actx, cancelBound = context.WithTimeoutCause(actx, bound, errAttemptBound)
		defer cancelBound()
	}
	started := time.Now()
	c, err := pool.Acquire(actx)
	if err == nil {
		ticket.Done(resilience.Success)
		if g.suspect.Load() {
			g.suspect.Store(false)
		}
		a.mu.Lock()
		fresh := a.fresh != nil
		a.mu.Unlock()
		if fresh && g.stale.Load() {
			g.stale.Store(false) // a new connection's startup answered: the server does
		}
		if a.epoch != nil && bound == 0 {
			a.recycle() // no context was made from it (see recycle)
		}
		return c, false, nil
	}
	cause := context.Cause(actx)
	if actx.Err() == nil {
		cause = err
	}
	a.mu.Lock()
	tried, pingTimeout, own := a.connecting || a.pinged, a.pingTimedOut, a.own
	a.mu.Unlock()
	var pt *pingTimeoutError
	switch {
	case errors.Is(cause, errBreakerOpened):
		ticket.Done(resilience.Ignore)
		e := g.unavailable(cause).(*problem.DependencyError)
		e.RetryAfter = g.breaker.Snapshot().RetryAfter
		return nil, false, e
	case errors.Is(err, puddle.ErrClosedPool):
		ticket.Done(resilience.Ignore)
		return nil, false, g.unavailable(fmt.Errorf("%w: %w", errPoolClosed, err))
	case ctx.Err() != nil && errors.Is(ctx.Err(), context.Canceled):
		ticket.Done(resilience.Ignore) // the caller gave up: no evidence
		return nil, false, ctx.Err()
	case ctx.Err() != nil && !tried:
		// The caller's deadline ran out while waiting for a free connection:
		// the pool is busy, which says nothing about the server.
		ticket.Done(resilience.Ignore)
		return nil, false, g.unavailable(fmt.Errorf("no free connection within the caller's deadline (pool_size busy): %w", ctx.Err()))
	case resilience.CutByCaller(ctx, own):
		g.leftByCaller(a, ticket, bound, started)
		return nil, false, g.unavailable(cause)
	case errors.As(err, &pt) || pingTimeout:
		// The ping got no answer within ping_timeout: a hang, which makes
		// the breaker half-open at once when nothing answered meanwhile (the
		// next acquire probes); the watchdog, not this ping, trips it.
		ticket.Done(resilience.Hang)
		g.suspect.Store(true)
		return nil, ctx.Err() == nil, g.unavailable(cause)
	case errors.Is(cause, errAttemptBound) || resilience.IsTimeout(cause):
		// A connect that got no answer within connect_timeout or the
		// attempt's bound: a hang too.
		ticket.Done(resilience.Hang)
		g.suspect.Store(true)
		return nil, false, g.unavailable(cause)
	default:
		ticket.Done(resilience.Failure) // refused, reset, authentication
		g.suspect.Store(true)
		return nil, false, g.unavailable(cause)
	}
}

// leftByCaller concludes an attempt (begun at started, with bound) whose
// caller's deadline came before the attempt's own (its bound,
// connect_timeout or ping_timeout): no evidence yet, and the caller gets the
// usual 503. A connect in progress goes on in the background and lands in
// the pool; its own outcome is the evidence, and the attempt's ticket waits
// for it (adoptConnect). The attempt's bound (ping_timeout: the probe of a
// suspect server) holds for the connect it left too: no answer by then is
// the hang, though the connect runs on to its own connect_timeout.
func (g *gate) leftByCaller(a *attempt, ticket resilience.Ticket, bound time.Duration, started time.Time) {
	a.mu.Lock()
	s := a.connect
	a.mu.Unlock()
	if s == nil || !s.adoptConnect(ticket) {
		ticket.Done(resilience.Ignore)
		return
	}
	if bound > 0 {
		time.AfterFunc(bound-time.Since(started), func() { g.expireAdopted(s) })
	}
}

// unavailable turns the cause of a failed acquisition into the db
// dependency error: a 503 naming db, with Retry-After while the breaker is
// open, the failure that opened it included (its caller is told the wait
// the requests after it are told). The password is removed from its text.
func (g *gate) unavailable(cause error) error {
	var open *resilience.OpenError
	if errors.As(cause, &open) {
		// The hot path while the breaker is open: its text holds no secret.
		return &problem.DependencyError{Dependency: dependencyName, Err: cause, RetryAfter: open.RetryAfter()}
	}
	e := &problem.DependencyError{Dependency: dependencyName, Err: scrub(cause)}
	var ra resilience.RetryAfterError
	if errors.As(cause, &ra) {
		e.RetryAfter = ra.RetryAfter()
	} else if s := g.breaker.Snapshot(); s.State == resilience.StateOpen {
		e.RetryAfter = s.RetryAfter
	}
	return e
}
