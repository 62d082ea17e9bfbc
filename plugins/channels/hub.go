package channels

import (
	"context"
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
// channel one stream tail), and each stream has its own bounded buffer.
type hub struct {
	p *Plugin
	c *channel
	// tail is the durable channel's stream reader's state; nil for broadcast.
	tail *loop

	mu     sync.Mutex
	conns  atomic.Pointer[[]*sseConn] // copied on write; publish reads it without the lock
	closed chan struct{}
	once   sync.Once
}

// sseConn is one stream's end of the hub.
type sseConn struct {
	ch       chan *Message
	overflow chan struct{} // closed when the buffer was full
	once     sync.Once
	// cut ends a write in progress at once (its connection's write deadline
	// set in the past), so an overflowed stream blocked on a full socket
	// ends now rather than at sse_write_timeout.
	cut func()

	// A durable stream catching up (Last-Event-ID) reads the channel's
	// Redis stream, which holds every message the hub hands it meanwhile:
	// while it does, a full buffer loses nothing and is no overflow. The
	// hub drops the message and says so (dropped), and the catch-up reads
	// the stream again before it ends (caughtUp).
	mu                  sync.Mutex
	catchingUp, dropped bool
}

// dropDuringCatchUp reports whether sc is catching up, so that a message its
// full buffer has no room for may be dropped: the catch-up reads it from the
// stream.
func (sc *sseConn) dropDuringCatchUp() bool {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	if sc.catchingUp {
		sc.dropped = true
	}
	return sc.catchingUp
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
	h := &hub{p: p, c: c, closed: make(chan struct{})}
	h.conns.Store(&[]*sseConn{})
	if c.mode == modeDurable {
		h.tail = newLoop("sse tail " + c.name)
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
	old := *h.conns.Load()
	next := make([]*sseConn, len(old), len(old)+1)
	copy(next, old)
	next = append(next, sc)
	h.conns.Store(&next)
	return true
}

func (h *hub) unregister(sc *sseConn) {
	h.mu.Lock()
	defer h.mu.Unlock()
	old := *h.conns.Load()
	next := make([]*sseConn, 0, len(old))
	for _, c := range old {
		if c != sc {
			next = append(next, c)
		}
	}
	h.conns.Store(&next)
}

func (h *hub) clients() int { return len(*h.conns.Load()) }

// publish hands m to every stream without waiting: a stream whose buffer is
// full is marked overflowed, and ends (the slow-client policy), unless it is
// catching up from the durable stream, which holds m.
func (h *hub) publish(m *Message) {
	for _, sc := range *h.conns.Load() {
		select {
		case sc.ch <- m:
		default:
			if sc.dropDuringCatchUp() {
				continue
			}
			sc.once.Do(func() {
				close(sc.overflow)
				if sc.cut != nil {
					sc.cut()
				}
			})
		}
	}
}

func (h *hub) close() { h.once.Do(func() { close(h.closed) }) }

// runTail reads a durable channel's stream for the hub (XREAD, no group: every
// process sees every entry), from the entry that was last when it started,
// and after a failure from the last entry it read, so a stream open through
// an outage misses nothing.
func (h *hub) runTail() {
	p := h.p
	ctx := p.ctx
	backoff := resilience.Backoff{Base: 100 * time.Millisecond, Max: 2 * time.Second}
	attempt := 0
	last := ""
	fail := func(err error) {
		if ctx.Err() != nil {
			return
		}
		if h.tail.setDown(err) {
			p.log.Warn("channels: SSE stream reader lost; retrying", slog.String("channel", h.c.name), slog.String("error", h.tail.errText()))
		}
		attempt++
		sleep(ctx, backoff.Delay(attempt))
	}
	for ctx.Err() == nil {
		if last == "" {
			id, err := lastID(ctx, p.client, h.c.key)
			if err != nil {
				fail(err)
				continue
			}
			last = id
		}
		streams, err := p.client.XRead(ctx, &redis.XReadArgs{
			Streams: []string{h.c.key, last},
			Count:   100,
			Block:   p.cfg.HealthCheckInterval,
		}).Result()
		if err != nil && !errors.Is(err, redis.Nil) {
			fail(err)
			continue
		}
		attempt = 0
		if h.tail.setUp() && h.tail.reconnects() > 0 {
			p.log.Info("channels: SSE stream reader resumed", slog.String("channel", h.c.name))
		}
		for _, s := range streams {
			for _, xm := range s.Messages {
				m := entryMessage(h.c.name, xm.ID, xm.Values)
				h.publish(&m)
				last = xm.ID
			}
		}
	}
}

// lastID returns the ID of the newest entry of the stream at key, or "0-0"
// when it is empty or does not exist.
func lastID(ctx context.Context, client redis.UniversalClient, key string) (string, error) {
	msgs, err := client.XRevRangeN(ctx, key, "+", "-", 1).Result()
	if err != nil {
		return "", err
	}
	if len(msgs) == 0 {
		return "0-0", nil
	}
	return msgs[0].ID, nil
}
