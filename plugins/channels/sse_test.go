package channels

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"
)

// gotEvent is one event as a client parses it.
type gotEvent struct {
	id, event, data string
}

// sseClient reads a text/event-stream response.
type sseClient struct {
	resp   *http.Response
	events chan gotEvent
	lines  chan string // every line, comments included
	done   chan struct{}
}

// openSSE opens path with the given headers (name, value pairs).
func openSSE(t testing.TB, url string, headers ...string) *sseClient {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		resp.Body.Close()
		t.Fatalf("GET %s = %d %s", url, resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	c := &sseClient{resp: resp, events: make(chan gotEvent, 1024), lines: make(chan string, 4096), done: make(chan struct{})}
	go func() {
		defer close(c.done)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
		var ev gotEvent
		var data []string
		for sc.Scan() {
			line := sc.Text()
			select {
			case c.lines <- line:
			default:
			}
			switch {
			case line == "":
				if data != nil {
					ev.data = strings.Join(data, "\n")
					c.events <- ev
				}
				ev, data = gotEvent{}, nil
			case strings.HasPrefix(line, "id: "):
				ev.id = line[4:]
			case strings.HasPrefix(line, "event: "):
				ev.event = line[7:]
			case strings.HasPrefix(line, "data: "):
				data = append(data, line[6:])
			}
		}
	}()
	t.Cleanup(c.close)
	return c
}

func (c *sseClient) close() {
	c.resp.Body.Close()
	<-c.done
}

// next returns the next event.
func (c *sseClient) next(t testing.TB, within time.Duration) gotEvent {
	t.Helper()
	select {
	case ev := <-c.events:
		return ev
	case <-c.done:
		t.Fatal("the stream ended")
	case <-time.After(within):
		t.Fatalf("no event within %s", within)
	}
	return gotEvent{}
}

// ended reports whether the server ended the stream within d.
func (c *sseClient) ended(d time.Duration) bool {
	select {
	case <-c.done:
		return true
	case <-time.After(d):
		return false
	}
}

func sseRoutes(opts SSEOpts, channels ...string) func(ch *Plugin, r chi.Router) error {
	return func(ch *Plugin, r chi.Router) error {
		publishRoute(ch, r)
		for _, name := range channels {
			h, err := ch.SSE(name, opts)
			if err != nil {
				return err
			}
			r.Method(http.MethodGet, "/events/"+name, h)
		}
		return nil
	}
}

// A browser connected to one replica gets what another replica publishes, on
// a broadcast and on a durable channel; the stream starts with the retry
// delay, durable events carry their stream ID, multi-line payloads become
// several data lines, and the stream outlives request_timeout.
func TestSSEAcrossReplicas(t *testing.T) {
	t.Parallel()
	cl := newCluster(t, "", "broadcast = [\"news\"]\ndurable = [\"orders\"]\nsse_retry = \"1500ms\"")
	cl.appTOML = "request_timeout = \"500ms\""
	a := cl.start(sseRoutes(SSEOpts{}, "news", "orders"))
	b := cl.start(sseRoutes(SSEOpts{Event: "order"}, "news", "orders"))
	news := openSSE(t, a.svc.URL+"/events/news")
	orders := openSSE(t, a.svc.URL+"/events/orders")
	named := openSSE(t, b.svc.URL+"/events/orders")
	if l := <-news.lines; l != "retry: 1500" {
		t.Fatalf("first line = %q, want the retry delay", l)
	}
	subscribed(t, a.ch)
	subscribed(t, b.ch)
	time.Sleep(700 * time.Millisecond) // past request_timeout
	if r := b.svc.Do(t, http.MethodPost, "/publish/news", "line one\nline two"); r.Status != 204 {
		t.Fatalf("publish: %d %s", r.Status, r)
	}
	if ev := news.next(t, 5*time.Second); ev.data != "line one\nline two" || ev.id != "" || ev.event != "" {
		t.Fatalf("broadcast event = %+v", ev)
	}
	if r := b.svc.Do(t, http.MethodPost, "/publish/orders", `{"id":42}`); r.Status != 204 {
		t.Fatalf("publish: %d %s", r.Status, r)
	}
	ev := orders.next(t, 5*time.Second)
	if ev.data != `{"id":42}` || !validID(ev.id) {
		t.Fatalf("durable event = %+v", ev)
	}
	if ev2 := named.next(t, 5*time.Second); ev2.event != "order" || ev2.id != ev.id {
		t.Fatalf("named durable event = %+v, want event order with id %s", ev2, ev.id)
	}
}

// A browser that reconnects with Last-Event-ID gets what was published on a
// durable channel while it was away, then what comes next, each once.
func TestSSELastEventID(t *testing.T) {
	t.Parallel()
	cl := newCluster(t, "", "durable = [\"orders\"]")
	rep := cl.start(sseRoutes(SSEOpts{}, "orders"))
	first := openSSE(t, rep.svc.URL+"/events/orders")
	subscribed(t, rep.ch)
	ctx := context.Background()
	for i := range 3 {
		if err := rep.ch.Publish(ctx, "orders", []byte(strconv.Itoa(i))); err != nil {
			t.Fatal(err)
		}
	}
	var last string
	for i := range 3 {
		ev := first.next(t, 5*time.Second)
		if ev.data != strconv.Itoa(i) {
			t.Fatalf("event %d = %+v", i, ev)
		}
		last = ev.id
		if i == 0 {
			// The browser goes away after the first event.
			first.close()
			break
		}
	}
	for i := 1; i < 250; i++ { // more than one catch-up page
		if i >= 3 {
			if err := rep.ch.Publish(ctx, "orders", []byte(strconv.Itoa(i))); err != nil {
				t.Fatal(err)
			}
		}
	}
	again := openSSE(t, rep.svc.URL+"/events/orders", "Last-Event-ID", last)
	for i := 1; i < 250; i++ {
		if ev := again.next(t, 5*time.Second); ev.data != strconv.Itoa(i) {
			t.Fatalf("after Last-Event-ID, event %d = %+v", i, ev)
		}
	}
	if err := rep.ch.Publish(ctx, "orders", []byte("live")); err != nil {
		t.Fatal(err)
	}
	if ev := again.next(t, 5*time.Second); ev.data != "live" {
		t.Fatalf("after the catch-up = %+v", ev)
	}
	r := rep.svc.Get(t, "/events/orders", "Last-Event-ID", "yesterday")
	if r.Status != 400 {
		t.Fatalf("a malformed Last-Event-ID = %d %s", r.Status, r)
	}
}

// Heartbeats keep an idle stream talking; the stream ends cleanly when the
// App stops, and the drain does not wait for it.
func TestSSEHeartbeatAndShutdown(t *testing.T) {
	t.Parallel()
	cl := newCluster(t, "", "broadcast = [\"news\"]\nsse_heartbeat = \"100ms\"")
	rep := cl.start(sseRoutes(SSEOpts{}, "news"))
	c := openSSE(t, rep.svc.URL+"/events/news")
	deadline := time.After(5 * time.Second)
	for pings := 0; pings < 2; {
		select {
		case l := <-c.lines:
			if l == ": ping" {
				pings++
			}
		case <-deadline:
			t.Fatal("no heartbeats")
		}
	}
	var stopErr error
	d := elapsed(func() { stopErr = rep.svc.Stop(context.Background()) })
	if stopErr != nil || d > 3*time.Second {
		t.Fatalf("stop with a stream open: %v after %s", stopErr, d)
	}
	if !c.ended(time.Second) {
		t.Fatal("the stream did not end when the App stopped")
	}
}

// stalledClient opens a stream over a raw connection with a small receive
// buffer and, once the stream has started, never reads it: a browser tab
// frozen, a client behind a stuck network. It returns when it has read the
// stream's opening retry: line, which the server writes after the stream is
// registered, so the stream is counted when it returns (an event, not a
// wait: the test's own timeout is the only bound). headers are sent with
// the request (name, value pairs).
func stalledClient(t *testing.T, url, path string, headers ...string) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	_ = conn.(*net.TCPConn).SetReadBuffer(4096)
	var extra strings.Builder
	for i := 0; i+1 < len(headers); i += 2 {
		fmt.Fprintf(&extra, "%s: %s\r\n", headers[i], headers[i+1])
	}
	if _, err := fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: x\r\nAccept: text/event-stream\r\n%s\r\n", path, extra.String()); err != nil {
		t.Fatal(err)
	}
	var head []byte
	buf := make([]byte, 512)
	for !bytes.Contains(head, []byte("\nretry: ")) {
		n, err := conn.Read(buf)
		head = append(head, buf[:n]...)
		if err != nil {
			t.Fatalf("stalled client, before the stream started: %v after %q", err, head)
		}
	}
	return conn
}

// metricValue returns the value of one series in /metrics ("" when absent).
func metricValue(t testing.TB, rep *replica, series string) string {
	for _, line := range strings.Split(rep.svc.Get(t, "/metrics").String(), "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			return v
		}
	}
	return ""
}

// The slow-client policy: a client that does not keep up falls
// sse_max_pending_bytes behind and is disconnected at once (not at sse_write_timeout, even
// with its socket full); a client that keeps up on the same channel gets
// every event.
func TestSSESlowClientDisconnected(t *testing.T) {
	t.Parallel()
	cl := newCluster(t, "", "broadcast = [\"news\"]\nsse_max_pending_bytes = 2097152\nsse_write_timeout = \"60s\"\nmax_payload_bytes = 262144")
	rep := cl.start(sseRoutes(SSEOpts{}, "news"))
	fast := openSSE(t, rep.svc.URL+"/events/news")
	stalledClient(t, rep.svc.URL, "/events/news")
	subscribed(t, rep.ch)
	waitFor(t, 5*time.Second, "two streams open", func() bool { return rep.ch.metrics.sseClientsNow() == 2 })
	payload := []byte(strings.Repeat("x", 64<<10))
	const n = 300 // 19 MB: more than the sockets hold
	start := time.Now()
	go func() {
		for range n {
			if err := rep.ch.Publish(context.Background(), "news", payload); err != nil {
				t.Error(err)
				return
			}
			time.Sleep(2 * time.Millisecond) // a pace the fast client keeps
		}
	}()
	for i := range n {
		if ev := fast.next(t, 10*time.Second); len(ev.data) != len(payload) {
			t.Fatalf("fast client, event %d: %d bytes", i, len(ev.data))
		}
	}
	waitFor(t, 5*time.Second, "the stalled client disconnected as slow", func() bool {
		return metricValue(t, rep, `jfast_channels_sse_closed_total{channel="news",reason="slow_client"}`) == "1"
	})
	if d := time.Since(start); d > 30*time.Second {
		t.Errorf("the slow client was disconnected after %s; want well before sse_write_timeout (60s)", d)
	}
	if n := rep.ch.metrics.sseClientsNow(); n != 1 {
		t.Fatalf("%d streams open, want the fast one", n)
	}
}

// A client that takes no bytes is disconnected after sse_write_timeout, even
// while its buffer has room: its goroutine does not wait forever.
func TestSSEStalledClientWriteDeadline(t *testing.T) {
	t.Parallel()
	cl := newCluster(t, "", "broadcast = [\"news\"]\nsse_max_pending_bytes = 67108864\nsse_write_timeout = \"300ms\"\nmax_payload_bytes = 262144")
	rep := cl.start(sseRoutes(SSEOpts{}, "news"))
	stalledClient(t, rep.svc.URL, "/events/news")
	subscribed(t, rep.ch)
	waitFor(t, 5*time.Second, "the stream open", func() bool { return rep.ch.metrics.sseClientsNow() == 1 })
	payload := []byte(strings.Repeat("x", 64<<10))
	for range 150 { // 9.6 MB, within sse_max_pending_bytes
		if err := rep.ch.Publish(context.Background(), "news", payload); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, 10*time.Second, "the stalled client disconnected by the write deadline", func() bool {
		return metricValue(t, rep, `jfast_channels_sse_closed_total{channel="news",reason="write_failed"}`) == "1"
	})
	if n := rep.ch.metrics.sseClientsNow(); n != 0 {
		t.Fatalf("%d streams open after the write deadline", n)
	}
}

// A stream catching up from the durable stream is not overflowed by what the
// hub hands it meanwhile (the catch-up reads it from Redis): the hub drops
// it, and the catch-up reads once more before it ends. After the catch-up a
// queue past its bytes is the slow-client policy again.
func TestHubDuringCatchUp(t *testing.T) {
	h := &hub{conns: map[*sseConn]struct{}{}, closed: make(chan struct{})}
	cut := 0
	ev := func(id string) *Message { return &Message{ID: id, Payload: []byte("0123456789")} }
	limit := len(newSSEEvent(ev("1-0")).data) // room for one event
	sc := newSSEConn(limit, func() { cut++ }, true)
	if !h.register(sc) {
		t.Fatal("register refused")
	}
	for i := range 3 {
		h.publish(ev(fmt.Sprintf("1-%d", i)))
	}
	select {
	case <-sc.overflow:
		t.Fatal("a stream catching up overflowed")
	default:
	}
	if sc.caughtUp() {
		t.Fatal("the catch-up ended though the hub dropped messages during it")
	}
	if !sc.caughtUp() {
		t.Fatal("the catch-up did not end after reading again with nothing dropped")
	}
	h.publish(ev("1-3")) // the queue still holds 1-0
	select {
	case <-sc.overflow:
	default:
		t.Fatal("a full queue after the catch-up is no overflow")
	}
	if cut != 1 {
		t.Fatalf("the overflowed stream's write was cut %d times, want 1", cut)
	}
}

// The queue is bounded by bytes, not events: events that fit are queued
// whatever their number, the one that would pass the bound cuts the stream,
// bytes being written still count, and one event larger than the bound is
// queued on an empty queue. A taken queue is not kept.
func TestSSEConnPendingBytes(t *testing.T) {
	small := newSSEEvent(&Message{Payload: []byte("x")})
	big := newSSEEvent(&Message{Payload: make([]byte, 1000)})
	sc := newSSEConn(100*len(small.data), nil, false)
	for range 100 {
		sc.push(small)
	}
	q, n := sc.take()
	if len(q) != 100 || n != 100*len(small.data) {
		t.Fatalf("took %d events, %d bytes; want 100, %d", len(q), n, 100*len(small.data))
	}
	if sc.queue != nil {
		t.Fatal("the queue is kept after it was taken")
	}
	sc.push(small) // the 100 taken are still being written
	select {
	case <-sc.overflow:
	default:
		t.Fatal("bytes being written do not count against sse_max_pending_bytes")
	}

	sc = newSSEConn(100, nil, false)
	sc.push(big)
	if q, _ := sc.take(); len(q) != 1 {
		t.Fatal("an event larger than the bound is not queued on an empty queue")
	}
	sc.written(len(big.data))
	sc.push(small)
	sc.push(small)
	select {
	case <-sc.overflow:
		t.Fatal("cut with room left")
	default:
	}
}

// docs/channels.md says how many events of the largest max_payload_bytes the
// default sse_max_pending_bytes holds: as many as a stream that took none
// queues before the next one cuts it. An encoded event is its id: and data:
// lines around the payload (65,564 bytes at 64 KiB), so 8 MiB holds 127 of
// them, not 128.
func TestSSEMaxPendingBytesInLargestEvents(t *testing.T) {
	sc := newSSEConn(DefaultSSEMaxPendingBytes, nil, false)
	payload := make([]byte, DefaultMaxPayloadBytes)
	held := 0
	for ; ; held++ {
		sc.push(newSSEEvent(&Message{ID: "1733000000000-" + strconv.Itoa(held), Payload: payload}))
		select {
		case <-sc.overflow:
		default:
			continue
		}
		break
	}
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "channels.md"))
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("8 MiB holds %d events at the largest `max_payload_bytes`", held)
	if !strings.Contains(string(doc), want) {
		t.Fatalf("docs/channels.md does not say %q: the default sse_max_pending_bytes queues %d events of %d bytes, and the next cuts the stream", want, held, DefaultMaxPayloadBytes)
	}
}
