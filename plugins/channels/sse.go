package channels

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/framework/resilience"
	"github.com/jfastframework/jfast/problem"
)

// SSEOpts are the options of one server-sent events route.
type SSEOpts struct {
	// Event is the event name sent with every event ("event: <Event>"), for
	// the browser's addEventListener. Defaults to none: the browser's
	// onmessage gets every event.
	Event string
	// Filter, when set, is asked for every message and every stream: only
	// messages it returns true for are sent (a user's own orders). It runs
	// on the stream's goroutine; it must be quick and must not block.
	Filter func(r *http.Request, m Message) bool
}

// The reasons a stream ends, for the metric.
const (
	closeClient   = "client_gone"
	closeSlow     = "slow_client"
	closeWrite    = "write_failed"
	closeShutdown = "shutdown"
)

// SSE returns a handler that streams channel to a browser as server-sent
// events (text/event-stream). Call it at boot, in Routes; it fails when the
// channel is not declared.
//
//   - Every process reads the channel once for all its streams; each stream
//     has a buffer of sse_buffer events. A client that falls that far behind
//     is disconnected (the slow-client policy): the browser reconnects after
//     sse_retry and, on a durable channel, resumes from its Last-Event-ID.
//   - Durable channels send each entry's stream ID as the event id, and a
//     reconnecting browser's Last-Event-ID resumes right after it (up to
//     max_len entries back), with nothing missed or repeated.
//   - Broadcast channels send no ids: what was published while a browser was
//     away is gone, as for a replica.
//   - A comment line every sse_heartbeat keeps proxies from closing an idle
//     stream and finds clients that went away.
//   - Every write has sse_write_timeout: a stalled client is disconnected
//     rather than holding a goroutine.
//   - The stream ends cleanly (the response completes) when the App begins
//     to stop, so the drain does not wait for it and the browser reconnects
//     to another replica. The request deadline (request_timeout) does not
//     apply: a stream lasts as long as the client stays.
//   - When Redis is down the stream stays open: events resume when the
//     subscription does (a durable stream catches up on what it missed). A
//     503 would make a browser's EventSource give up for good.
func (p *Plugin) SSE(channelName string, opts SSEOpts) (http.Handler, error) {
	p.mu.Lock()
	started, stopped := p.started, p.stopped
	p.mu.Unlock()
	if !started || stopped {
		return nil, fmt.Errorf("channels: SSE(%q) is called in Routes, while the plugin runs", channelName)
	}
	c, ok := p.chans[channelName]
	if !ok {
		return nil, &UndeclaredError{Channel: channelName}
	}
	if opts.Event != "" && !headerSafe(opts.Event) {
		return nil, fmt.Errorf("channels: SSE(%q): the event name must be one line", channelName)
	}
	return &sseHandler{p: p, c: c, h: p.hubOf(c), opts: opts}, nil
}

// hubOf returns c's hub, starting what feeds it on first use.
func (p *Plugin) hubOf(c *channel) *hub {
	c.mu.Lock()
	if c.hub != nil {
		h := c.hub
		c.mu.Unlock()
		return h
	}
	h := newHub(p, c)
	c.hub = h
	c.mu.Unlock()
	if c.mode == modeBroadcast {
		p.broadcast(c)
	} else {
		p.goLoop(h.runTail)
	}
	return h
}

type sseHandler struct {
	p    *Plugin
	c    *channel
	h    *hub
	opts SSEOpts
}

func (s *sseHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p := s.p
	last := r.Header.Get("Last-Event-ID")
	if s.c.mode != modeDurable {
		last = "" // broadcast events have no ids to resume from
	} else if last != "" && !validID(last) {
		problem.Write(w, r, problem.BadRequest("Last-Event-ID must be an event id this stream sent, such as 1733000000000-0"))
		return
	}
	rc := http.NewResponseController(w)
	sc := &sseConn{ch: make(chan *Message, p.cfg.SSEBuffer), overflow: make(chan struct{}),
		cut: func() { _ = rc.SetWriteDeadline(time.Unix(1, 0)) }, catchingUp: last != ""}
	if !s.h.register(sc) {
		problem.Write(w, r, problem.ServiceUnavailable(pluginName, "the service is stopping", 0))
		return
	}
	defer s.h.unregister(sc)
	p.metrics.sseOpened(s.c)

	st := &sseStream{w: w, rc: rc, timeout: p.cfg.SSEWriteTimeout, overflow: sc.overflow}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no") // nginx: do not buffer the stream
	w.WriteHeader(http.StatusOK)
	st.buf = append(st.buf, "retry: "...)
	st.buf = strconv.AppendInt(st.buf, p.cfg.SSERetry.Milliseconds(), 10)
	st.buf = append(st.buf, "\n\n"...)
	reason := s.stream(framework.StreamContext(r), r, sc, st, last)
	select {
	case <-sc.overflow:
		reason = closeSlow // the write that failed was cut by the overflow
	default:
	}
	// The last bytes (the end of the chunked body) get a write deadline of
	// their own, so the response completes cleanly.
	_ = st.rc.SetWriteDeadline(time.Now().Add(p.cfg.SSEWriteTimeout))
	p.metrics.sseClosed(s.c, reason)
}

// stream writes events until the stream ends, and returns why.
func (s *sseHandler) stream(ctx context.Context, r *http.Request, sc *sseConn, st *sseStream, last string) string {
	p := s.p
	if err := st.flush(); err != nil {
		return closeWrite
	}
	if last != "" {
		var reason string
		last, reason = s.catchUp(ctx, r, sc, st, last)
		if reason != "" {
			return reason
		}
	}
	heartbeat := time.NewTicker(p.cfg.SSEHeartbeat)
	defer heartbeat.Stop()
	for {
		select {
		case <-ctx.Done():
			return closeClient
		case <-p.draining:
			return closeShutdown
		case <-s.h.closed:
			return closeShutdown
		case <-sc.overflow:
			return closeSlow
		case <-heartbeat.C:
			st.buf = append(st.buf, ": ping\n\n"...)
		case m := <-sc.ch:
			last = s.add(r, st, m, last)
			// Write what else is waiting in the same flush.
		more:
			for range cap(sc.ch) {
				select {
				case m := <-sc.ch:
					last = s.add(r, st, m, last)
				default:
					break more
				}
			}
		}
		if len(st.buf) > 0 {
			if err := st.flush(); err != nil {
				return closeWrite
			}
		}
	}
}

// add appends m to the stream's pending bytes unless the filter refuses it or
// the stream sent it already (during a catch-up); it returns the last id.
func (s *sseHandler) add(r *http.Request, st *sseStream, m *Message, last string) string {
	if m.ID != "" && last != "" && compareIDs(m.ID, last) <= 0 {
		return last
	}
	if s.opts.Filter == nil || s.opts.Filter(r, *m) {
		st.buf = appendEvent(st.buf, s.opts.Event, m)
	}
	if m.ID != "" {
		return m.ID
	}
	return last
}

var errOverflow = errors.New("channels: the stream's buffer overflowed")

// catchUpPage is how many entries one catch-up read returns.
const catchUpPage = 100

// catchUp sends the durable entries after last, page by page (XRANGE), until
// it has read to the stream's end. What the hub hands the stream meanwhile
// is in the Redis stream before it is in the buffer, so each page first
// empties the buffer (the read that follows gets those entries), and a full
// buffer is no overflow while it runs (sseConn.dropDuringCatchUp). Redis
// being down is waited out with backoff, within the stream's life. It returns
// the last id sent, or why the stream ended.
func (s *sseHandler) catchUp(ctx context.Context, r *http.Request, sc *sseConn, st *sseStream, last string) (string, string) {
	p := s.p
	backoff := resilience.Backoff{Base: 100 * time.Millisecond, Max: 2 * time.Second}
	attempt := 0
	for {
	drained:
		for {
			select {
			case <-sc.ch:
			default:
				break drained
			}
		}
		msgs, err := p.client.XRangeN(ctx, s.c.key, "("+last, "+", catchUpPage).Result()
		if err != nil {
			attempt++
			t := time.NewTimer(backoff.Delay(attempt))
			select {
			case <-ctx.Done():
				t.Stop()
				return last, closeClient
			case <-p.draining:
				t.Stop()
				return last, closeShutdown
			case <-sc.overflow:
				t.Stop()
				return last, closeSlow
			case <-t.C:
			}
			continue
		}
		attempt = 0
		for i := range msgs {
			m := entryMessage(s.c.name, msgs[i].ID, msgs[i].Values)
			last = s.add(r, st, &m, last)
		}
		if len(st.buf) > 0 {
			if err := st.flush(); err != nil {
				return last, closeWrite
			}
		}
		if len(msgs) < catchUpPage && sc.caughtUp() {
			return last, ""
		}
	}
}

// sseStream is the writing end of one stream: bytes gather in buf and go out
// in one write and flush, each under the write deadline.
type sseStream struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration
	buf     []byte
	// overflow is the stream's overflow signal: once it is closed, no
	// write deadline is set again (the hub cut the connection's).
	overflow <-chan struct{}
}

func (st *sseStream) flush() error {
	select {
	case <-st.overflow:
		return errOverflow
	default:
	}
	if err := st.rc.SetWriteDeadline(time.Now().Add(st.timeout)); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return err
	}
	_, err := st.w.Write(st.buf)
	if err == nil {
		err = st.rc.Flush()
	}
	st.buf = st.buf[:0]
	return err
}
