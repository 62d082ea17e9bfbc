package db

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
)

// Acquisition time: how long a connection taken through the gate is held,
// from asking the gate for it to giving it back to the pool (a statement's
// whole time, its rows read; or a transaction's, or that of a connection
// taken with Acquire). It is the db's latency on the status page.
//
// It costs no allocation per acquisition: each connection carries one slot
// (made when it opens) where the gate writes when it was asked for it, and
// the pool's release tracer reads and clears it when it comes back. A
// connection taken from the pool directly (DB.Pool: River, the queue's
// helpers) has a clear slot and is not timed.

// heldKey names the slot in the connection's pgconn CustomData.
const heldKey = "jfast.db.asked"

// heldBase is the origin of the slots' monotonic times.
var heldBase = time.Now()

// heldNow is the time since heldBase, on the monotonic clock; never 0.
func heldNow() int64 { return int64(time.Since(heldBase)) | 1 }

// heldSlot is c's slot, or nil when the pool does not time its connections.
func heldSlot(c *pgx.Conn) *atomic.Int64 {
	s, _ := c.PgConn().CustomData()[heldKey].(*atomic.Int64)
	return s
}

// heldTracer is the main pool's tracer: the release tracer that observes the
// acquisition time, around the query tracer of a plugin that observes
// dependencies (nil: statements pay an interface call that returns at once).
type heldTracer struct {
	inner pgx.QueryTracer
	held  prometheus.Observer
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
	if asked := s.Swap(0); asked != 0 {
		t.held.Observe(float64(heldNow()-asked) / float64(time.Second))
	}
}

func newHeldHistogram() prometheus.Histogram {
	return prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "jfast_db_acquisition_duration_seconds",
		Help:    "Time a connection taken through the db plugin (main pool) was held: from asking for it to giving it back to the pool, so a statement's whole time or a transaction's (waiting for a free connection and the ping included).",
		Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
	})
}

var (
	_ pgx.QueryTracer       = heldTracer{}
	_ pgxpool.ReleaseTracer = heldTracer{}
)
