package channels

import (
	"context"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// commandCalls returns how many times the private Redis at addr ran
// command since its statistics were last reset (INFO commandstats).
func commandCalls(t *testing.T, addr, command string) int {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	info, err := c.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`cmdstat_` + command + `:calls=(\d+)`).FindStringSubmatch(info)
	if m == nil {
		return 0
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

// publishLargest publishes entries payloads of the largest size on
// channel, the ith starting with "i ".
func publishLargest(t *testing.T, ch *Plugin, channel string, entries int) {
	t.Helper()
	payload := []byte(strings.Repeat("x", DefaultMaxPayloadBytes))
	for i := range entries {
		copy(payload, strconv.Itoa(i)+" ")
		if err := ch.Publish(context.Background(), channel, payload); err != nil {
			t.Fatal(err)
		}
	}
}

// readLargestInPages reads the entries publishLargest published from c, in
// order, and checks that the private Redis at addr ran them in reads
// (XRANGE, since its statistics were last reset) of at most
// catchUpPageBytes each.
func readLargestInPages(t *testing.T, c *sseClient, addr string, entries int) {
	t.Helper()
	for i := range entries {
		if ev := c.next(t, 10*time.Second); !strings.HasPrefix(ev.data, strconv.Itoa(i)+" ") || len(ev.data) != DefaultMaxPayloadBytes {
			t.Fatalf("event %d: %d bytes starting %q", i, len(ev.data), ev.data[:min(8, len(ev.data))])
		}
	}
	reads := commandCalls(t, addr, "xrange")
	if reads*catchUpPageBytes < entries*DefaultMaxPayloadBytes {
		t.Fatalf("%d entries of %d bytes were read in %d XRANGE calls: more than %d bytes a read", entries, DefaultMaxPayloadBytes, reads, catchUpPageBytes)
	}
	t.Logf("%d entries of %d bytes read in %d reads", entries, DefaultMaxPayloadBytes, reads)
}

// resetStats resets the command statistics of the private Redis at addr.
func resetStats(t *testing.T, addr string) {
	t.Helper()
	admin := redis.NewClient(&redis.Options{Addr: addr})
	defer admin.Close()
	if err := admin.ConfigResetStat(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
}

// A catch-up page is bounded by bytes as well as entries: a browser
// resuming from 0-0 over 40 entries of the largest payload (2.5 MiB) gets
// every one of them, read in pages of at most catchUpPageBytes (1 MiB), not
// in one read of all 40 (up to 100 were read at once, 6.5 MB at 64 KiB,
// under the cache's 1 s command_timeout). The entries are published by
// another replica before the one serving the stream starts, so its reader
// of the channel reads none of them and every XRANGE counted is the
// catch-up's.
func TestSSECatchUpPagesBoundedByBytes(t *testing.T) {
	t.Parallel()
	srv := startRedis(t)
	const entries = 40
	cl := newCluster(t, srv.URL(), `durable = ["orders"]`)
	pub := cl.start(nil)
	subscribed(t, pub.ch)
	publishLargest(t, pub.ch, "orders", entries)
	rep := cl.start(sseRoutes(SSEOpts{}, "orders"))
	subscribed(t, rep.ch)
	resetStats(t, srv.Addr())
	c := openSSE(t, rep.svc.URL+"/events/orders", "Last-Event-ID", "0-0")
	readLargestInPages(t, c, srv.Addr(), entries)
}

// The reader of a durable channel's new entries (the hub's tail) reads
// pages of the catch-up's size too: 40 entries of the largest payload
// published while it is held reach a live stream read in pages of at most
// catchUpPageBytes, not in one read of all 40 (it read up to 100 at once).
// The stream does not catch up (no Last-Event-ID), so every XRANGE counted
// is the tail's.
func TestSSETailPagesBoundedByBytes(t *testing.T) {
	t.Parallel()
	srv := startRedis(t)
	const entries = 40
	cl := newCluster(t, srv.URL(), `durable = ["orders"]`)
	rep := cl.start(sseRoutes(SSEOpts{}, "orders"))
	c := openSSE(t, rep.svc.URL+"/events/orders")
	subscribed(t, rep.ch)
	if err := rep.ch.Publish(context.Background(), "orders", []byte("first")); err != nil {
		t.Fatal(err)
	}
	if ev := c.next(t, 10*time.Second); ev.data != "first" {
		t.Fatalf("first event %+v", ev)
	}
	held, release := holdTail(t, rep.ch.chans["orders"].hub)
	publishLargest(t, rep.ch, "orders", 1) // wakes the tail, which is held before it reads
	select {
	case <-held:
	case <-time.After(10 * time.Second):
		t.Fatal("the stream reader did not come to its next read")
	}
	publishLargest(t, rep.ch, "orders", entries) // entry 0 again, then 1 to 39
	resetStats(t, srv.Addr())
	release()
	if ev := c.next(t, 10*time.Second); !strings.HasPrefix(ev.data, "0 ") {
		t.Fatalf("the event that woke the tail: %d bytes starting %q", len(ev.data), ev.data[:min(8, len(ev.data))])
	}
	readLargestInPages(t, c, srv.Addr(), entries)
}

// catchUpHeapBound is the documented bound (docs/channels.md,
// sse_max_pending_bytes) on what a channel's events take in a process,
// however many streams: its live events, and as much again in the pages of
// the streams catching up.
const catchUpHeapBound = 2 * DefaultSSEMaxPendingBytes

// Streams catching up from 0-0 whose clients read nothing hold their pages
// while their writes block: the pages a channel's catch-ups hold at once
// take at most sse_max_pending_bytes (the hub lends that many pages), so 16
// such streams from one address over 100 entries of the largest payload
// hold about 9 pages (7.4 MiB), not a page each (16 × 100 entries, about
// 100 MiB before the bound); the others wait their turn. The streams first
// fill their sockets (the kernel takes a few MiB each), then every page
// holder is blocked until its write deadline (sse_write_timeout) cuts it:
// the live heap is the last measured before that first cut, once nothing
// moves (a measurement while pages are read and encoded counts what is
// allocated during the collection too). Not parallel: it measures the
// process's heap. The cache's command_timeout is burstWait, as in the other
// heap tests: they measure the heap, not Redis's deadline.
func TestSSECatchUpsHeapWithStalledClients(t *testing.T) {
	const clients, entries = 16, 100
	cl := newCluster(t, "", "durable = [\"orders\"]\nsse_write_timeout = \"5s\"")
	cl.cacheTOML = burstCacheTOML
	rep := cl.start(sseRoutes(SSEOpts{}, "orders"))
	subscribed(t, rep.ch)
	payload := []byte(strings.Repeat("x", DefaultMaxPayloadBytes))
	for range entries {
		if err := rep.ch.Publish(context.Background(), "orders", payload); err != nil {
			t.Fatal(err)
		}
	}
	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for range clients {
		stalledClient(t, rep.svc.URL, "/events/orders", "Last-Event-ID", "0-0")
	}
	h := rep.ch.chans["orders"].hub
	var grew int64
	waitFor(t, burstWait, "the first stalled stream cut by its write deadline", func() bool {
		var now runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&now)
		if h.clients() < clients {
			return true // this measurement may be after the cut
		}
		grew = int64(now.HeapAlloc) - int64(before.HeapAlloc)
		return false
	})
	t.Logf("live heap grew by %.1f MiB with %d stalled streams catching up", mib(uint64(max(grew, 0))), clients)
	// The heap holds more than the events: the Redis connections' read
	// buffers (a reply of up to catchUpPageBytes each), the streams' own
	// state and what the runtime has not returned yet, which a busy machine
	// (slower collections) makes larger. Their allowance is as much again as
	// the bound: a page a stream, as before the bound, is over 100 MiB.
	if limit := int64(2 * catchUpHeapBound); grew > limit {
		t.Fatalf("%d stalled streams catching up hold %.1f MiB of live heap; the bound is %d MiB, with the process's own buffers %d MiB", clients, mib(uint64(grew)), catchUpHeapBound>>20, limit>>20)
	}
}

// A browser reconnecting with Last-Event-ID while Redis is paused gets
// heartbeats while its catch-up waits the outage out (a proxy's idle timeout
// would cut a silent stream), stays open, and once Redis is back (and the
// breaker's cool-down passed on the test clock) gets what was published
// after its id.
func TestSSECatchUpHeartbeatsThroughAnOutage(t *testing.T) {
	t.Parallel()
	srv := startRedis(t)
	const heartbeat = 100 * time.Millisecond
	cl := outageCluster(t, srv.URL(), "durable = [\"orders\"]\nsse_heartbeat = \""+heartbeat.String()+"\"")
	rep := cl.start(sseRoutes(SSEOpts{}, "orders"))
	subscribed(t, rep.ch)
	ctx := context.Background()
	if err := rep.ch.Publish(ctx, "orders", []byte("before")); err != nil {
		t.Fatal(err)
	}
	id, err := lastID(ctx, rep.ch.client, rep.ch.chans["orders"].key)
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Pause(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Resume() })
	c := openSSE(t, rep.svc.URL+"/events/orders", "Last-Event-ID", id)
	// The first read waits command_timeout and opens the breaker; then the
	// catch-up waits between refused reads, its backoff growing to 2 s.
	const pings = 5
	deadline := time.After(commandTimeout + 2*time.Second + pings*heartbeat + 5*margin)
	for n := 0; n < pings; {
		select {
		case l := <-c.lines:
			if l == ": ping" {
				n++
			}
		case <-c.done:
			t.Fatal("the stream ended during the outage")
		case <-deadline:
			t.Fatalf("%d heartbeats while the catch-up waited out the outage, want %d (sse_heartbeat %s)", n, pings, heartbeat)
		}
	}
	for sc := range snapshotConns(rep.ch.chans["orders"].hub) {
		sc.mu.Lock()
		up := sc.catchingUp
		sc.mu.Unlock()
		if !up {
			t.Fatal("the catch-up ended while Redis was paused")
		}
	}

	if err := srv.Resume(); err != nil {
		t.Fatal(err)
	}
	cl.clock.Advance(coolDown)
	subscribed(t, rep.ch)
	publishOnceBack(t, cl, rep.ch, "orders", []byte("after"))
	for {
		ev := c.next(t, 10*time.Second)
		if ev.data == "during" || ev.data == "before" {
			t.Fatalf("the catch-up sent %+v, at or before its Last-Event-ID %s", ev, id)
		}
		if ev.data == "after" {
			break
		}
	}
}
