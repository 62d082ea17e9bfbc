package channels

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/jfastframework/jfast/framework/resilience"
)

// broadcaster is the process's one pub/sub connection, subscribed to every
// broadcast channel that has a handler or an SSE stream here. Pub/sub does
// not go through the cache plugin's command hook (its reads wait as long as
// there is nothing to say), so the broadcaster checks the connection itself:
// after health_check_interval of silence it sends PING, and a connection that
// does not answer within command_timeout is closed and made again, with
// backoff, subscribing to every channel again.
type broadcaster struct {
	p     *Plugin
	state *loop

	mu     sync.Mutex
	chans  map[string]*channel // by Redis channel name
	ps     *redis.PubSub       // the current connection; nil between connections
	closed bool
}

func newBroadcaster(p *Plugin) *broadcaster {
	return &broadcaster{p: p, state: newLoop("broadcast", p.clock), chans: map[string]*channel{}}
}

// add subscribes the connection to c (now, when it is up; otherwise the next
// connection does).
func (b *broadcaster) add(c *channel) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.chans[c.key]; ok {
		return
	}
	b.chans[c.key] = c
	if b.ps != nil {
		ctx, cancel := context.WithTimeout(b.p.ctx, b.p.cmdTimeout)
		// A failure means the connection broke: the read loop notices
		// and the next connection subscribes to every channel.
		_ = b.ps.Subscribe(ctx, c.key)
		cancel()
	}
}

// close ends the current connection; run returns once its context is done.
func (b *broadcaster) close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closed = true
	if b.ps != nil {
		_ = b.ps.Close()
	}
}

// run connects, reads and reconnects until the plugin stops.
func (b *broadcaster) run() {
	ctx := b.p.ctx
	backoff := resilience.Backoff{Base: 100 * time.Millisecond, Max: 2 * time.Second}
	attempt := 0
	for ctx.Err() == nil {
		err := b.session(ctx, func() { attempt = 0 })
		if ctx.Err() != nil {
			return
		}
		if b.state.setDown(err) {
			b.p.log.Warn("channels: broadcast subscription lost; reconnecting", slog.String("error", b.state.errText()))
		}
		attempt++
		sleep(ctx, backoff.Delay(attempt))
	}
}

// session makes one connection and reads from it until it fails; connected is
// called once it is subscribed.
func (b *broadcaster) session(ctx context.Context, connected func()) error {
	p := b.p
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return context.Canceled
	}
	ps := p.client.Subscribe(ctx)
	keys := make([]string, 0, len(b.chans))
	for k := range b.chans {
		keys = append(keys, k)
	}
	b.ps = ps
	b.mu.Unlock()
	defer func() {
		b.mu.Lock()
		if b.ps == ps {
			b.ps = nil
		}
		b.mu.Unlock()
		_ = ps.Close()
	}()

	sctx, cancel := context.WithTimeout(ctx, p.cmdTimeout)
	err := ps.Subscribe(sctx, keys...)
	cancel()
	if err != nil {
		return fmt.Errorf("subscribe: %w", err)
	}
	// The first confirmation says the connection works.
	if _, err := ps.ReceiveTimeout(ctx, p.cmdTimeout); err != nil {
		return fmt.Errorf("no subscription confirmation within %s: %w", p.cmdTimeout, err)
	}
	if b.state.setUp() {
		connected()
		if b.state.reconnects() > 0 {
			p.log.Info("channels: broadcast subscription resumed", slog.Int("channels", len(keys)))
		}
	}
	pinged := false
	for {
		wait := p.cfg.HealthCheckInterval
		if pinged {
			wait = p.cmdTimeout
		}
		msg, err := ps.ReceiveTimeout(ctx, wait)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if !isTimeout(err) {
				return err
			}
			if pinged {
				return fmt.Errorf("no answer to PING within %s", p.cmdTimeout)
			}
			pctx, cancel := context.WithTimeout(ctx, p.cmdTimeout)
			err := ps.Ping(pctx)
			cancel()
			if err != nil {
				return fmt.Errorf("ping: %w", err)
			}
			pinged = true
			continue
		}
		pinged = false
		if m, ok := msg.(*redis.Message); ok {
			b.dispatch(m)
		}
	}
}

// dispatch hands one pub/sub message to the channel's handler (through its
// bounded queue) and to its SSE streams.
func (b *broadcaster) dispatch(rm *redis.Message) {
	b.mu.Lock()
	c := b.chans[rm.Channel]
	b.mu.Unlock()
	if c == nil {
		return
	}
	m := parseFrame(c.name, rm.Payload)
	c.mu.Lock()
	q, h := c.queue, c.hub
	c.mu.Unlock()
	if q != nil {
		select {
		case q <- m:
		default:
			b.p.metrics.handled(c, "dropped", 0)
			b.p.log.Warn("channels: broadcast message dropped: the handler is broadcast_buffer messages behind",
				slog.String("channel", c.name), slog.Int("broadcast_buffer", cap(q)))
		}
	}
	if h != nil {
		h.publish(&m)
	}
}

// broadcastWorker runs c's handler over its queue, one message at a time, in
// the order they arrived.
func (p *Plugin) broadcastWorker(c *channel, q <-chan Message, h Handler) {
	for {
		select {
		case <-p.ctx.Done():
			return
		case m := <-q:
			_ = p.run(c, h, &m)
		}
	}
}

// isTimeout reports whether err is a read that found nothing in its time.
func isTimeout(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	var t interface{ Timeout() bool }
	return errors.As(err, &t) && t.Timeout()
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
