package channels

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Past sse_max_streams_per_client a client's stream gets 503 problem+json,
// while another client still gets one; past sse_max_streams every client
// does; a stream that ends makes room again. Each refusal is counted.
func TestSSEStreamLimits(t *testing.T) {
	t.Parallel()
	cl := newCluster(t, "", "broadcast = [\"news\"]\nsse_max_streams = 3\nsse_max_streams_per_client = 2")
	byHeader := SSEOpts{ClientKey: func(r *http.Request) string { return r.Header.Get("Client") }}
	rep := cl.start(sseRoutes(byHeader, "news"))
	url := rep.svc.URL + "/events/news"
	a1 := openSSE(t, url, "Client", "a")
	openSSE(t, url, "Client", "a")
	refused := func(client, reason, detail string) {
		t.Helper()
		r := rep.svc.Get(t, "/events/news", "Client", client)
		if r.Status != 503 || r.Header.Get("Content-Type") != "application/problem+json" || r.Header.Get("Retry-After") != "2" {
			t.Fatalf("client %s past the limit = %d %s %q: %s", client, r.Status, r.Header.Get("Content-Type"), r.Header.Get("Retry-After"), r)
		}
		var p struct{ Detail, Dependency string }
		if err := json.Unmarshal(r.Body, &p); err != nil || !strings.Contains(p.Detail, detail) || p.Dependency != "channels" {
			t.Fatalf("the problem = %s", r)
		}
		if v := metricValue(t, rep, `jfast_channels_sse_refused_total{channel="news",reason="`+reason+`"}`); v != "1" {
			t.Fatalf("refusals counted as %s: %q, want 1", reason, v)
		}
	}
	refused("a", refusedClient, "sse_max_streams_per_client")
	openSSE(t, url, "Client", "b")
	refused("c", refusedProcess, "sse_max_streams")
	a1.close()
	waitFor(t, 5*time.Second, "the closed stream released", func() bool { return rep.ch.metrics.sseClientsNow() == 2 })
	waitFor(t, 5*time.Second, "the limit released", func() bool { return rep.ch.streams.openNow() == 2 })
	openSSE(t, url, "Client", "c")
}

// The per-client default is the address that connected, not a header.
func TestSSEStreamLimitByAddress(t *testing.T) {
	t.Parallel()
	cl := newCluster(t, "", "broadcast = [\"news\"]\nsse_max_streams_per_client = 1")
	rep := cl.start(sseRoutes(SSEOpts{}, "news"))
	openSSE(t, rep.svc.URL+"/events/news", "X-Forwarded-For", "192.0.2.1")
	if r := rep.svc.Get(t, "/events/news", "X-Forwarded-For", "192.0.2.2"); r.Status != 503 {
		t.Fatalf("a second stream from the same address = %d", r.Status)
	}
}

// A Last-Event-ID that is not an entry ID is refused with 400; one past the
// stream's newest entry (the largest ID there is, or one just past the
// newest) resumes from the newest: the stream sends what comes next, and the
// catch-up does not keep asking Redis.
func TestSSELastEventIDPastTheStream(t *testing.T) {
	t.Parallel()
	cl := newCluster(t, "", "durable = [\"orders\"]")
	rep := cl.start(sseRoutes(SSEOpts{}, "orders"))
	ctx := context.Background()
	if err := rep.ch.Publish(ctx, "orders", []byte("before")); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"18446744073709551616-0", "1-18446744073709551616", "-1-0", "1-", "1-2-3", "abc"} {
		if r := rep.svc.Get(t, "/events/orders", "Last-Event-ID", bad); r.Status != 400 || r.Header.Get("Content-Type") != "application/problem+json" {
			t.Fatalf("Last-Event-ID %q = %d %s", bad, r.Status, r)
		}
	}
	for i, past := range []bool{false, true} {
		id := maxID
		if past { // just past the newest entry
			newest, err := lastID(ctx, rep.ch.client, rep.ch.chans["orders"].key)
			if err != nil {
				t.Fatal(err)
			}
			ms, seq, _ := strings.Cut(newest, "-")
			n, _ := strconv.ParseUint(seq, 10, 64)
			id = ms + "-" + strconv.FormatUint(n+1, 10)
		}
		s := openSSE(t, rep.svc.URL+"/events/orders", "Last-Event-ID", id)
		waitFor(t, 5*time.Second, "the stream caught up", func() bool {
			for sc := range snapshotConns(rep.ch.chans["orders"].hub) {
				sc.mu.Lock()
				up := sc.catchingUp
				sc.mu.Unlock()
				if up {
					return false
				}
			}
			return true
		})
		want := fmt.Sprintf("after %d", i)
		if err := rep.ch.Publish(ctx, "orders", []byte(want)); err != nil {
			t.Fatal(err)
		}
		if ev := s.next(t, 5*time.Second); ev.data != want {
			t.Fatalf("Last-Event-ID %s: first event %+v, want %q", id, ev, want)
		}
		s.close()
	}
}

func snapshotConns(h *hub) map[*sseConn]struct{} {
	h.mu.RLock()
	defer h.mu.RUnlock()
	out := make(map[*sseConn]struct{}, len(h.conns))
	for sc := range h.conns {
		out[sc] = struct{}{}
	}
	return out
}

// stalledClients opens n streams that never read (stalledClient).
func stalledClients(t *testing.T, rep *replica, path string, n int) {
	t.Helper()
	for range n {
		stalledClient(t, rep.svc.URL, path)
	}
}

// settled reports whether every stream of h has taken what was queued for
// it (its goroutine is writing it, or wrote it).
func settled(h *hub) bool {
	for sc := range snapshotConns(h) {
		sc.mu.Lock()
		q := len(sc.queue)
		sc.mu.Unlock()
		if q > 0 {
			return false
		}
	}
	return true
}

// burstWait bounds how long the tests below wait for a burst to reach a
// reader, and is the cache's command_timeout in them: they measure the heap
// and the fan-out, not Redis's deadline, and a process starved of CPU (1500
// sockets on a loaded machine) can read Redis's answer later than the
// production 1 s. A publish (and the subscription's PING) is given as long
// as the reader is given to receive what it sends.
const burstWait = 30 * time.Second

var burstCacheTOML = fmt.Sprintf("command_timeout = %q\n", burstWait)

// sseHeapBound is the documented bound (docs/channels.md) on what 1500
// streams that do not read, and a burst of 20 events of 16 KiB to each,
// add to the heap, live after the burst and allocated during it.
const sseHeapBound = 64 << 20

// 1500 clients that never read, on real sockets, and a burst of 20 events of
// 16 KiB over the machine's Redis (not parallel: its 1500 connections are not
// put on the other tests): each event is encoded once and shared, so
// the heap grows by the streams' fixed cost and one copy of the burst, not
// by 1500 copies of it (480 MB).
func TestSSEHeapWithStalledClients(t *testing.T) {
	if testing.Short() {
		t.Skip("1500 connections")
	}
	const clients, events, size = 1500, 20, 16 << 10
	cl := newCluster(t, "", "broadcast = [\"news\"]\nsse_max_streams_per_client = 2000\nsse_write_timeout = \"5m\"\nsse_heartbeat = \"5m\"")
	cl.cacheTOML = burstCacheTOML
	rep := cl.start(sseRoutes(SSEOpts{}, "news"))
	subscribed(t, rep.ch)
	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	stalledClients(t, rep, "/events/news", clients)
	reader := openSSE(t, rep.svc.URL+"/events/news")
	h := rep.ch.chans["news"].hub
	if n := h.clients(); n != clients+1 { // each has started (stalledClient, openSSE)
		t.Fatalf("%d streams registered, want %d", n, clients+1)
	}
	var open runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&open)

	payload := []byte(strings.Repeat("x", size))
	for range events {
		if err := rep.ch.Publish(context.Background(), "news", payload); err != nil {
			t.Fatal(err)
		}
	}
	for i := range events {
		if ev := reader.next(t, burstWait); len(ev.data) != size {
			t.Fatalf("reader, event %d: %d bytes", i, len(ev.data))
		}
	}
	waitFor(t, burstWait, "every stream took its events", func() bool { return settled(h) })
	var burst runtime.MemStats
	runtime.ReadMemStats(&burst)
	runtime.GC()
	var live runtime.MemStats
	runtime.ReadMemStats(&live)
	allocated := burst.TotalAlloc - open.TotalAlloc
	t.Logf("heap: %.1f MiB before, %.1f MiB with %d streams open (%.1f KiB each), %.1f MiB live after the burst; %.1f MiB allocated during it",
		mib(before.HeapAlloc), mib(open.HeapAlloc), clients+1, float64(open.HeapAlloc-before.HeapAlloc)/float64(clients+1)/1024,
		mib(live.HeapAlloc), mib(allocated))
	if grew := int64(live.HeapAlloc) - int64(before.HeapAlloc); grew > sseHeapBound {
		t.Errorf("the heap grew by %.1f MiB with %d streams and the burst; the bound is %d MiB", mib(uint64(grew)), clients, sseHeapBound>>20)
	}
	if allocated > sseHeapBound {
		t.Errorf("the burst allocated %.1f MiB; the bound is %d MiB", mib(allocated), sseHeapBound>>20)
	}
	if n := metricValue(t, rep, `jfast_channels_sse_closed_total{channel="news",reason="slow_client"}`); n != "" {
		t.Errorf("%s streams cut as slow by a burst within sse_max_pending_bytes", n)
	}
}

func mib(n uint64) float64 { return float64(n) / (1 << 20) }

// A reader that keeps up gets every event of a burst of 300 × 16 KiB, in
// order and without being cut, while 200 clients on the same replica read
// nothing. Not parallel: its bursts (about 5 MB into 201 sockets) are not
// put on the other tests' publishes.
func TestSSEReaderKeepsUpBesideStalledClients(t *testing.T) {
	const stalled, events, size = 200, 300, 16 << 10
	for _, channel := range []string{"news", "orders"} {
		t.Run(channel, func(t *testing.T) {
			cl := newCluster(t, "", "broadcast = [\"news\"]\ndurable = [\"orders\"]\nsse_max_streams_per_client = 1000")
			cl.cacheTOML = burstCacheTOML
			rep := cl.start(sseRoutes(SSEOpts{}, channel))
			subscribed(t, rep.ch)
			stalledClients(t, rep, "/events/"+channel, stalled)
			reader := openSSE(t, rep.svc.URL+"/events/"+channel)
			h := rep.ch.hubOf(rep.ch.chans[channel])
			if n := h.clients(); n != stalled+1 { // each has started (stalledClient, openSSE)
				t.Fatalf("%d streams registered, want %d", n, stalled+1)
			}
			payload := []byte(strings.Repeat("x", size-8))
			go func() {
				for i := range events {
					if err := rep.ch.Publish(context.Background(), channel, fmt.Appendf(nil, "%08d%s", i, payload)); err != nil {
						t.Error(err)
						return
					}
				}
			}()
			for i := range events {
				ev := reader.next(t, burstWait)
				if len(ev.data) != size || ev.data[:8] != fmt.Sprintf("%08d", i) {
					t.Fatalf("event %d: %d bytes, starting %q", i, len(ev.data), ev.data[:min(8, len(ev.data))])
				}
			}
			if reader.ended(0) {
				t.Fatal("the reader's stream ended")
			}
		})
	}
}
