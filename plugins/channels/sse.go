package channels

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/jfastframework/jfast/framework"
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
	// ClientKey returns what sse_max_streams_per_client counts a request
	// under. Defaults to the address that connected. Behind a proxy, every
	// stream comes from the proxy's address: pass the caller's identity
	// (the token's subject) or the address your proxy forwards.
	ClientKey func(r *http.Request) string
}

// The reasons a stream ends, for the metric.
const (
	closeClient   = "client_gone"
	closeSlow     = "slow_client"
	closeWrite    = "write_failed"
	closeShutdown = "shutdown"
	closeCatchUp  = "catch_up_failed"
	closePanic    = "panic" // the handler panicked (an SSEOpts.Filter): the response is aborted
)

// SSE returns a handler that streams channel to a browser as server-sent
// events (text/event-stream). Call it at boot, in Routes; it fails when the
// channel is not declared.
//
//   - Every process reads the channel once for all its streams and encodes
//     each event once; every stream queues the same bytes. A stream whose
//     queued bytes would pass sse_max_pending_bytes is disconnected (the
//     slow-client policy): the browser reconnects after sse_retry and, on a
//     durable channel, resumes from its Last-Event-ID.
//   - At most sse_max_streams streams per process and
//     sse_max_streams_per_client per client (SSEOpts.ClientKey) are open;
//     past either a request gets 503 with Retry-After sse_retry.
//   - Durable channels send each entry's stream ID as the event id, and a
//     reconnecting browser's Last-Event-ID resumes right after it (up to
//     max_len entries back), with nothing missed or repeated. One that is
//     not an entry ID is refused with 400; one past the stream's newest
//     entry resumes from the newest. The catch-up reads pages of at most
//     1 MiB, and a channel's catch-ups hold at most sse_max_pending_bytes of
//     pages at once: a stream waits its turn (catchup.go).
//   - A durable stream never skips entries silently: when entries it had
//     not sent were trimmed (max_len) before they were read — a
//     Last-Event-ID older than the stream keeps, or the process's reader
//     outrun by more than max_len entries — it sends an event named "gap"
//     (data {"after":"<the last id it sent>"}, no id) before what follows.
//   - Broadcast channels send no ids: what was published while a browser was
//     away is gone, as for a replica.
//   - A comment line every sse_heartbeat, from the start and through a
//     catch-up's waits, keeps proxies from closing an idle stream and finds
//     clients that went away.
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
	if opts.Event == gapEvent {
		return nil, fmt.Errorf("channels: SSE(%q): the event name %q is the plugin's own (entries were trimmed before the stream sent them); choose another", channelName, gapEvent)
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
	client := s.clientKey(r)
	release, refused := p.streams.admit(client)
	if refused != "" {
		p.metrics.sseRefused(s.c, refused)
		problem.Write(w, r, problem.ServiceUnavailable(pluginName, p.streams.detail(refused), p.cfg.SSERetry))
		return
	}
	defer release()
	rc := http.NewResponseController(w)
	sc := newSSEConn(p.cfg.SSEMaxPendingBytes, func() { _ = rc.SetWriteDeadline(time.Unix(1, 0)) }, last != "")
	if !s.h.register(sc) {
		problem.Write(w, r, problem.ServiceUnavailable(pluginName, "the service is stopping", 0))
		return
	}
	defer s.h.unregister(sc)
	p.metrics.sseOpened(s.c)
	reason := closePanic // unless the stream returns
	defer func() { p.metrics.sseClosed(s.c, reason) }()

	st := &sseStream{w: w, rc: rc, timeout: p.cfg.SSEWriteTimeout, overflow: sc.overflow}
	if s.opts.Event != "" {
		st.eventLine = []byte("event: " + s.opts.Event + "\n")
	}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no") // nginx: do not buffer the stream
	w.WriteHeader(http.StatusOK)
	reason = s.stream(framework.StreamContext(r), r, sc, st, last)
	select {
	case <-sc.overflow:
		reason = closeSlow // the write that failed was cut by the overflow
	default:
	}
	// The last bytes (the end of the chunked body) get a write deadline of
	// their own, so the response completes cleanly.
	_ = st.rc.SetWriteDeadline(time.Now().Add(p.cfg.SSEWriteTimeout))
}

// clientKey is what the per-client stream limit counts r under.
func (s *sseHandler) clientKey(r *http.Request) string {
	if s.opts.ClientKey != nil {
		return s.opts.ClientKey(r)
	}
	return peerAddr(r)
}

// peerAddr is the address that connected (not a forwarded-for header, which
// a client can write).
func peerAddr(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// stream writes events until the stream ends, and returns why. Heartbeats
// go out from the start, through a catch-up's waits too.
func (s *sseHandler) stream(ctx context.Context, r *http.Request, sc *sseConn, st *sseStream, last string) string {
	p := s.p
	retry := strconv.AppendInt([]byte("retry: "), p.cfg.SSERetry.Milliseconds(), 10)
	if err := st.write(append(retry, "\n\n"...)); err != nil {
		return closeWrite
	}
	if err := st.flush(); err != nil {
		return closeWrite
	}
	heartbeat := time.NewTicker(p.cfg.SSEHeartbeat)
	defer heartbeat.Stop()
	if last != "" {
		var reason string
		last, reason = s.catchUp(ctx, r, sc, st, heartbeat.C, last)
		if reason != "" {
			return reason
		}
	}
	for {
		if reason := awaitStream(ctx, s, sc, st, heartbeat.C, sc.wake); reason != "" {
			return reason
		}
		batch, n := sc.take()
		var err error
		last, err = s.writeEvents(r, st, batch, last)
		sc.written(n)
		if err != nil {
			return closeWrite
		}
		if st.unflushed {
			if err := st.flush(); err != nil {
				return closeWrite
			}
		}
	}
}

// awaitStream waits for ready while the stream lives, and sends a heartbeat
// each time heartbeat ticks meanwhile: a stream waiting for its next event,
// and a catch-up waiting out a Redis outage or its turn to read, keep
// talking, so a proxy's idle timeout does not cut them. It returns "" once
// ready delivers, or why the stream ended.
func awaitStream[T any](ctx context.Context, s *sseHandler, sc *sseConn, st *sseStream, heartbeat <-chan time.Time, ready <-chan T) string {
	for {
		select {
		case <-ready:
			return ""
		case <-ctx.Done():
			return closeClient
		case <-s.p.draining:
			return closeShutdown
		case <-s.h.closed:
			return closeShutdown
		case <-sc.overflow:
			return closeSlow
		case <-heartbeat:
			if err := st.write(ping); err != nil {
				return closeWrite
			}
			if err := st.flush(); err != nil {
				return closeWrite
			}
		}
	}
}

var ping = []byte(": ping\n\n")

// writeEvents writes the events the filter lets through and the stream has
// not sent already (during a catch-up), and a gap event for a gap the
// stream had not sent past; it returns the last id.
func (s *sseHandler) writeEvents(r *http.Request, st *sseStream, evs []*sseEvent, last string) (string, error) {
	for _, ev := range evs {
		if ev.m == nil {
			if missed(ev.gap, last) {
				if err := s.sendGap(st, last, gapBehind); err != nil {
					return last, err
				}
			}
			continue
		}
		m := ev.m
		if m.ID != "" && last != "" && compareIDs(m.ID, last) <= 0 {
			continue
		}
		if m.ID != "" {
			last = m.ID
		}
		if s.opts.Filter != nil && !s.opts.Filter(r, *m) {
			continue
		}
		if err := st.event(ev.data); err != nil {
			return last, err
		}
	}
	return last, nil
}

// sendGap writes a gap event (whatever the filter: the entries lost are not
// known) and counts it.
func (s *sseHandler) sendGap(st *sseStream, last, reason string) error {
	s.p.metrics.sseGap(s.c, reason)
	return st.write(appendGap(nil, last))
}

var errOverflow = errors.New("channels: the stream's pending bytes went past sse_max_pending_bytes")

// sseStream is the writing end of one stream. Events go to the response
// writer as they are (the shared bytes; net/http copies nothing large into
// buffers of its own) and one flush sends them, under the write deadline
// set at the first write after a flush.
type sseStream struct {
	w         http.ResponseWriter
	rc        *http.ResponseController
	timeout   time.Duration
	eventLine []byte // "event: <name>\n", or nil
	unflushed bool
	// overflow is the stream's overflow signal: once it is closed, no
	// write deadline is set again (the hub cut the connection's).
	overflow <-chan struct{}
}

// write writes b, setting the write deadline when it is the first write
// since the last flush.
func (st *sseStream) write(b []byte) error {
	if !st.unflushed {
		select {
		case <-st.overflow:
			return errOverflow
		default:
		}
		if err := st.rc.SetWriteDeadline(time.Now().Add(st.timeout)); err != nil && !errors.Is(err, http.ErrNotSupported) {
			return err
		}
		st.unflushed = true
	}
	_, err := st.w.Write(b)
	return err
}

// event writes one encoded event, with the route's event name.
func (st *sseStream) event(data []byte) error {
	if st.eventLine != nil {
		if err := st.write(st.eventLine); err != nil {
			return err
		}
	}
	return st.write(data)
}

func (st *sseStream) flush() error {
	st.unflushed = false
	return st.rc.Flush()
}
