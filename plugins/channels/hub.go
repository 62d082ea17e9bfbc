package channels

import (
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/jfastframework/jfast/framework/resilience"
)

// hub fans one channel's messages out to the server-sent events streams of
// this process: however many browsers are connected, the process reads the
// channel once (the broadcaster's pub/sub connection, or for a durable
// channel one stream tail), encodes each message once, and hands every
// stream the same bytes. Each stream queues references to them, bounded by
// sse_max_pending_bytes.
type hub struct {
	p *Plugin
	c *channel
	// tail is the durable channel's stream reader's state; nil for broadcast.
	tail *loop
	// beforeRead, when set (by tests), runs before each read of the tail:
	// a test holds the reader there while it publishes.
	beforeRead atomic.Pointer[func()]

	// mu guards conns: register and unregister take it to write, publish to
	// read, so a stream joining or leaving costs one map operation whatever
	// the number of streams.
	mu     sync.RWMutex
	conns  map[*sseConn]struct{}
	closed chan struct{}
	once   sync.Once

	// catchUps holds the catch-up pages the channel's streams may hold at
	// once (catchUpBudget), one token each: a stream takes one before it
	// reads a page and gives it back once the page is written.
	catchUps chan struct{}
	// pageEntries is how many entries one read of the channel's stream
	// returns, the tail's and a catch-up's alike: a page bounded by bytes of
	// the largest entries the plugin writes (catchUpBudget), so a burst of
	// large events is read a few at a time, each read far inside
	// command_timeout.
	pageEntries int
}

// sseEvent is one message encoded once as a server-sent event, shared by
// every stream it is queued for: its id line and data lines (the event name,
// which each SSE route chooses, is written before it by each stream). A gap
// has no message: the reader missed trimmed entries, all older than gap (the
// oldest entry kept), and each stream that had not sent them writes a gap
// event of its own.
type sseEvent struct {
	m    *Message
	data []byte
	gap  string
}

func newSSEEvent(m *Message) *sseEvent {
	return &sseEvent{m: m, data: appendEvent(make([]byte, 0, eventSize(m)), "", m)}
}

// sseConn is one stream's end of the hub: a queue of shared events whose
// bytes are bounded by limit (sse_max_pending_bytes).
type sseConn struct {
	limit int
	// wake has room for one signal: the stream's goroutine takes the whole
	// queue at each.
	wake     chan struct{}
	overflow chan struct{} // closed when the queue went past limit
	once     sync.Once
	// cut ends a write in progress at once (its connection's write deadline
	// set in the past), so an overflowed stream blocked on a full socket
	// ends now rather than at sse_write_timeout.
	cut func()

	mu sync.Mutex
	// queue is what waits for the stream's goroutine; it is taken whole
	// (and a new one grows from nothing), so no stream keeps a queue the
	// size of its largest burst.
	queue []*sseEvent
	// pending is the bytes of queue plus those of the batch being written:
	// what the stream holds on to.
	pending int
	over    bool
	// A durable stream catching up (Last-Event-ID) reads the channel's
	// Redis stream, which holds every message the hub hands it meanwhile:
	// while it does, a full queue loses nothing and is no overflow. The
	// hub drops the message and says so (dropped), and the catch-up reads
	// the stream again before it ends (caughtUp).
	catchingUp, dropped bool
}

func newSSEConn(limit int, cut func(), catchingUp bool) *sseConn {
	return &sseConn{limit: limit, wake: make(chan struct{}, 1), overflow: make(chan struct{}), cut: cut, catchingUp: catchingUp}
}

// push queues ev unless that would take the stream's pending bytes past its
// limit: then the stream has fallen behind and is cut (the slow-client
// policy), unless it is catching up, when ev is dropped (the catch-up reads
// it from the stream). An event alone is always taken, however large.
func (sc *sseConn) push(ev *sseEvent) {
	sc.mu.Lock()
	if sc.over {
		sc.mu.Unlock()
		return
	}
	if sc.pending > 0 && sc.pending+len(ev.data) > sc.limit {
		if sc.catchingUp {
			sc.dropped = true
			sc.mu.Unlock()
			return
		}
		sc.over = true
		sc.queue = nil
		sc.mu.Unlock()
		sc.once.Do(func() {
			close(sc.overflow)
			if sc.cut != nil {
				sc.cut()
			}
		})
		return
	}
	sc.queue = append(sc.queue, ev)
	sc.pending += len(ev.data)
	sc.mu.Unlock()
	select {
	case sc.wake <- struct{}{}:
	default:
	}
}

// take returns everything queued and its bytes, which stay pending until
// the stream calls written with them.
func (sc *sseConn) take() ([]*sseEvent, int) {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	q := sc.queue
	sc.queue = nil
	n := 0
	for _, ev := range q {
		n += len(ev.data)
	}
	return q, n
}

// written releases bytes taken with take.
func (sc *sseConn) written(n int) {
	sc.mu.Lock()
	sc.pending -= n
	sc.mu.Unlock()
}

// discard empties the queue (a catch-up reads those entries from Redis).
func (sc *sseConn) discard() {
	q, n := sc.take()
	_ = q
	sc.written(n)
}

// caughtUp ends the catch-up, unless the hub dropped a message during it:
// then it reports false, and the catch-up reads the stream again (the
// dropped message may be later than its last read).
func (sc *sseConn) caughtUp() bool {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	if sc.dropped {
		sc.dropped = false
		return false
	}
	sc.catchingUp = false
	return true
}

func newHub(p *Plugin, c *channel) *hub {
	h := &hub{p: p, c: c, conns: make(map[*sseConn]struct{}), closed: make(chan struct{})}
	if c.mode == modeDurable {
		h.tail = newLoop("sse tail "+c.name, p.clock)
		var pages int
		h.pageEntries, pages = catchUpBudget(p.cfg.MaxPayloadBytes, p.cfg.SSEMaxPendingBytes)
		h.catchUps = make(chan struct{}, pages)
		for range pages {
			h.catchUps <- struct{}{}
		}
	}
	return h
}

// register adds a stream; false when the hub is closed (the plugin stops).
func (h *hub) register(sc *sseConn) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	select {
	case <-h.closed:
		return false
	default:
	}
	h.conns[sc] = struct{}{}
	return true
}

func (h *hub) unregister(sc *sseConn) {
	h.mu.Lock()
	delete(h.conns, sc)
	h.mu.Unlock()
}

func (h *hub) clients() int {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return len(h.conns)
}

// publish encodes m once and queues it for every stream without waiting.
func (h *hub) publish(m *Message) {
	h.mu.RLock()
	defer h.mu.RUnlock()
	if len(h.conns) == 0 {
		return
	}
	ev := newSSEEvent(m)
	for sc := range h.conns {
		sc.push(ev)
	}
}

// gap queues for every stream the news that the reader missed trimmed
// entries, all older than resumeAt (readAfter), before the entries it read
// next.
func (h *hub) gap(resumeAt string) {
	h.mu.RLock()
	defer h.mu.RUnlock()
	ev := &sseEvent{gap: resumeAt}
	for sc := range h.conns {
		sc.push(ev)
	}
}

func (h *hub) close() { h.once.Do(func() { close(h.closed) }) }

// runTail reads a durable channel's stream for the hub (no group: every
// process sees every entry), in pages of pageEntries, the catch-up's
// (bounded by bytes), from the entry that was last when it started,
// and after a failure from the last entry it read, so a stream open through
// an outage misses nothing that the stream still keeps. Entries are read with
// readAfter, which says whether entries were trimmed before the tail read
// them (it fell more than max_len entries behind): then every stream gets a
// gap event before what follows. Once a read finds the end of the stream the
// tail waits for the next entry with XREAD BLOCK (one entry, not delivered:
// the next readAfter reads it with the rest), so every entry it delivers was
// read together with the stream's trimming state.
func (h *hub) runTail() {
	p := h.p
	ctx := p.ctx
	backoff := resilience.Backoff{Base: 100 * time.Millisecond, Max: 2 * time.Second}
	attempt := 0
	var cur cursor // cur.after "" until the tail knows where to start
	idle := false
	fail := func(err error) {
		if ctx.Err() != nil {
			return
		}
		// Redis may come back empty: the stream's count starts over, and
		// the cursor's number no longer says where it is.
		cur.n = -1
		if h.tail.setDown(err) {
			p.log.Warn("channels: SSE stream reader lost; retrying", slog.String("channel", h.c.name), slog.String("error", h.tail.errText()))
		}
		attempt++
		sleep(ctx, backoff.Delay(attempt))
	}
	up := func() {
		attempt = 0
		if h.tail.setUp() && h.tail.reconnects() > 0 {
			p.log.Info("channels: SSE stream reader resumed", slog.String("channel", h.c.name))
		}
	}
	for ctx.Err() == nil {
		if cur.after == "" {
			c, err := newestCursor(ctx, p.client, h.c.key)
			if err != nil {
				fail(err)
				continue
			}
			cur = c
		}
		if idle {
			err := p.client.XRead(ctx, &redis.XReadArgs{
				Streams: []string{h.c.key, cur.after},
				Count:   1,
				Block:   p.cfg.HealthCheckInterval,
			}).Err()
			if err != nil && !errors.Is(err, redis.Nil) {
				fail(err)
				continue
			}
			up()
			if err != nil {
				continue // nothing within health_check_interval
			}
			idle = false
		}
		if hook := h.beforeRead.Load(); hook != nil {
			(*hook)()
		}
		after := cur.after
		msgs, resumeAt, err := readAfter(ctx, p.client, h.c.key, &cur, int64(h.pageEntries))
		if err != nil {
			fail(err)
			continue
		}
		up()
		if resumeAt != "" {
			p.log.Warn("channels: the SSE stream reader fell more than max_len entries behind; entries it had not read were trimmed, and its streams are sent a gap event",
				slog.String("channel", h.c.name), slog.String("after", after), slog.String("resumes_at", resumeAt), slog.Int("max_len", p.cfg.MaxLen))
			h.gap(resumeAt)
		}
		for _, xm := range msgs {
			m := entryMessage(h.c.name, xm.ID, xm.Values)
			h.publish(&m)
		}
		idle = len(msgs) < h.pageEntries
	}
}
