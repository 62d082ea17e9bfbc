package db

import (
	"context"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/jfastframework/jfast/framework"

	"github.com/jfastframework/jfast/framework/resilience"
)

// Acquisition time: how long a connection taken through the gate is held,
// from asking the gate for it to giving it back to the pool (a statement's
// whole time, its rows read; or a transaction's, or that of a connection
// taken with Acquire). It is the db's latency on the status page, and what
// the watchdog reads to find a statement in flight for too long (see
// watchdog.go).
//
// It costs no allocation per acquisition: each connection carries one slot
// (made when it opens) where the gate writes when it was asked for it (on a
// pool that observes nothing, a tenant's, a token instead: no clock read),
// and the pool's release tracer reads and clears it when it comes back. A
// connection taken from the pool directly (DB.Pool: River, the queue's
// helpers) has a clear slot: it is neither timed nor watched.

// heldKey names the slot in the connection's pgconn CustomData.
const heldKey = "jfast.db.asked"

// heldBase is the origin of the slots' monotonic times.
var heldBase = time.Now()

// heldNow is the time since heldBase, on the monotonic clock; never 0.
func heldNow() int64 { return int64(time.Since(heldBase)) | 1 }

// connSlot is what the plugin keeps on each connection of its pools.
type connSlot struct {
	// asked is when the connection was asked for through the gate
	// (heldNow), or on a pool that is not timed a token that changes at each
	// acquisition (see gate.acquire); 0 while it is in the pool or was taken
	// from the pool directly.
	asked atomic.Int64
	uses  int64 // acquisitions through the gate; owned by the holder
	// cut is set by the watchdog before it closes the socket of a
	// connection in use on a server that answered no liveness ping: the
	// statement's error is then the breaker's (see DB.connErr).
	cut  atomic.Bool
	conn net.Conn // the socket, closed by the watchdog's cut

	// What ends the connection's other sockets (see sockets.go): up once
	// the connection is made (its later dials are cancel requests).
	// connectBy is when its connect must be over (connect_timeout from its
	// start, whatever the number of hosts); owned by the connecting goroutine.
	up         atomic.Bool
	connectBy  time.Time
	cancelMu   sync.Mutex
	noCancel   bool               // the plugin closed the socket: the server did not answer
	stopCancel context.CancelFunc // of the cancel request in flight
	connecting func() bool        // stops the gate's close from closing the socket being connected
	// The breaker's ticket of an attempt whose caller left while the
	// connection was being made (see adoptConnect), and whether the connect
	// has ended; under cancelMu.
	orphan       *resilience.Ticket
	connectEnded bool
	answered     atomic.Bool // the server sent a byte on the socket being connected

	// Owned by the watchdog: asked as it saw it at its last tick, and for
	// how many ticks in a row it has seen that value.
	seen  int64
	ticks int

	// Owned by the holder of the connection: the rows its next statements
	// return (see newRows).
	rows []releasingRows
}

// rowsChunk is how many rows a slot makes at once: a statement's rows are
// one allocation in rowsChunk, as pgxpool does for its own. Rows handed out
// are never reused (a caller may keep them, and call Close or Err again);
// what they hold (pgx's rows, the statement's arguments) stays reachable
// until the chunk's last rows are unreachable too, as with pgxpool's.
const rowsChunk = 64

// newRows returns rows for a statement on s's connection, which the caller
// holds; on a connection the plugin did not open (s nil), new rows.
func (s *connSlot) newRows() *releasingRows {
	if s == nil {
		return new(releasingRows)
	}
	if len(s.rows) == 0 {
		s.rows = make([]releasingRows, rowsChunk)
	}
	r := &s.rows[len(s.rows)-1]
	s.rows = s.rows[:len(s.rows)-1]
	return r
}

// heldSlot is c's slot, or nil for a connection the plugin did not open.
func heldSlot(c *pgx.Conn) *connSlot {
	s, _ := c.PgConn().CustomData()[heldKey].(*connSlot)
	return s
}

// heldTracer is every pool's tracer: the release tracer that clears the
// slot (and, on the main pool, observes the acquisition time), around the
// query tracer of a plugin that observes dependencies (nil: statements pay
// an interface call that returns at once).
type heldTracer struct {
	inner pgx.QueryTracer
	held  prometheus.Observer // nil on tenant pools
}

// TraceQueryStart implements pgx.QueryTracer.
func (t heldTracer) TraceQueryStart(ctx context.Context, c *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	if t.inner == nil {
		return ctx
	}
	return t.inner.TraceQueryStart(ctx, c, data)
}

// TraceQueryEnd implements pgx.QueryTracer.
func (t heldTracer) TraceQueryEnd(ctx context.Context, c *pgx.Conn, data pgx.TraceQueryEndData) {
	if t.inner != nil {
		t.inner.TraceQueryEnd(ctx, c, data)
	}
}

// TraceRelease implements pgxpool.ReleaseTracer: pgxpool calls it from
// Conn.Release, before the connection goes back (or is destroyed).
func (t heldTracer) TraceRelease(_ *pgxpool.Pool, data pgxpool.TraceReleaseData) {
	s := heldSlot(data.Conn)
	if s == nil {
		return
	}
	if asked := s.asked.Swap(0); asked != 0 && t.held != nil {
		t.held.Observe(float64(heldNow()-asked) / float64(time.Second))
	}
}

func newHeldHistogram() prometheus.Histogram {
	return framework.NewHistogram("jfast_db_acquisition_duration_seconds",
		"Time a connection taken through the db plugin (main pool) was held: from asking for it to giving it back to the pool, so a statement's whole time or a transaction's (waiting for a free connection and the ping included).",
		[]float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10})
}

var (
	_ pgx.QueryTracer       = heldTracer{}
	_ pgxpool.ReleaseTracer = heldTracer{}
)
