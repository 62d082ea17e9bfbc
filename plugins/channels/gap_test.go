package channels

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// holdTail holds h's stream reader before its next read: held is closed
// once it is held, and release lets it go (also at the test's end).
func holdTail(t *testing.T, h *hub) (held <-chan struct{}, release func()) {
	t.Helper()
	heldc, releasec := make(chan struct{}), make(chan struct{})
	var holdOnce, releaseOnce sync.Once
	hook := func() {
		holdOnce.Do(func() {
			close(heldc)
			<-releasec
		})
	}
	h.beforeRead.Store(&hook)
	release = func() { releaseOnce.Do(func() { close(releasec) }) }
	t.Cleanup(release)
	return heldc, release
}

// oldestKept returns the payload of the oldest entry the stream keeps, as a
// number, and fails the test unless entries after the entry after were
// trimmed (the number of the first entry after it is 1).
func oldestKept(t *testing.T, rep *replica, channel string) int {
	t.Helper()
	kept, err := rep.ch.client.XRangeN(context.Background(), rep.ch.chans[channel].key, "-", "+", 1).Result()
	if err != nil || len(kept) != 1 {
		t.Fatalf("the oldest entry: %v %v", kept, err)
	}
	n, err := strconv.Atoi(kept[0].Values["payload"].(string))
	if err != nil || n <= 1 {
		t.Fatalf("the oldest entry kept is %q: nothing after entry 0 was trimmed", kept[0].Values["payload"])
	}
	return n
}

func publishNumbers(t *testing.T, rep *replica, channel string, from, to int) {
	t.Helper()
	for i := from; i <= to; i++ {
		if err := rep.ch.Publish(context.Background(), channel, []byte(strconv.Itoa(i))); err != nil {
			t.Fatal(err)
		}
	}
}

// expectGapThen reads a gap event after the entry after, then the numbers
// from first to last, each once and in order.
func expectGapThen(t *testing.T, c *sseClient, after string, first, last int) {
	t.Helper()
	if ev := c.next(t, 10*time.Second); ev.event != gapEvent || ev.id != "" || ev.data != `{"after":"`+after+`"}` {
		t.Fatalf("after entry %s, event %+v; want a gap event (event gap, no id, data {\"after\":%q})", after, ev, after)
	}
	for i := first; i <= last; i++ {
		if ev := c.next(t, 10*time.Second); ev.data != strconv.Itoa(i) || ev.event != "" {
			t.Fatalf("after the gap, event %+v; want %d", ev, i)
		}
	}
}

// A live stream whose process's reader is held while more than max_len
// entries are published gets a gap event, counted and logged, then the
// entries the stream still keeps, from the oldest, and stays open; never a
// silent jump.
func TestSSEGapWhenTheReaderFallsBehind(t *testing.T) {
	t.Parallel()
	cl := newCluster(t, "", "durable = [\"d\"]\nmax_len = 10")
	rep := cl.start(sseRoutes(SSEOpts{}, "d"))
	c := openSSE(t, rep.svc.URL+"/events/d")
	subscribed(t, rep.ch)
	publishNumbers(t, rep, "d", 0, 0)
	ev0 := c.next(t, 10*time.Second)
	if ev0.data != "0" {
		t.Fatalf("first event %+v", ev0)
	}

	held, release := holdTail(t, rep.ch.chans["d"].hub)
	publishNumbers(t, rep, "d", 1, 1) // wakes the reader, which is held before it reads
	select {
	case <-held:
	case <-time.After(10 * time.Second):
		t.Fatal("the stream reader did not come to its next read")
	}
	publishNumbers(t, rep, "d", 2, 300) // XADD MAXLEN ~ 10 trims whole nodes of 100 entries
	from := oldestKept(t, rep, "d")
	release()

	expectGapThen(t, c, ev0.id, from, 300)
	if v := metricValue(t, rep, `jfast_channels_sse_gaps_total{channel="d",reason="reader_behind"}`); v != "1" {
		t.Fatalf("jfast_channels_sse_gaps_total{reason=reader_behind} = %q, want 1", v)
	}
	publishNumbers(t, rep, "d", 301, 301)
	if ev := c.next(t, 10*time.Second); ev.data != "301" {
		t.Fatalf("after the gap, the live stream sent %+v", ev)
	}
	if _, err := rep.ch.SSE("d", SSEOpts{Event: gapEvent}); err == nil {
		t.Fatal("SSE took the event name gap")
	}
}

// A Last-Event-ID older than what the stream keeps gets a gap event, counted,
// then the entries kept from the oldest; one the stream still follows, or
// 0-0 on a stream never trimmed, gets no gap.
func TestSSEGapOnATrimmedLastEventID(t *testing.T) {
	t.Parallel()
	cl := newCluster(t, "", "durable = [\"d\", \"whole\"]\nmax_len = 10")
	rep := cl.start(sseRoutes(SSEOpts{}, "d", "whole"))
	ctx := context.Background()
	publishNumbers(t, rep, "d", 0, 0)
	id0, err := lastID(ctx, rep.ch.client, rep.ch.chans["d"].key)
	if err != nil {
		t.Fatal(err)
	}
	publishNumbers(t, rep, "d", 1, 300)
	from := oldestKept(t, rep, "d")

	expectGapThen(t, openSSE(t, rep.svc.URL+"/events/d", "Last-Event-ID", id0), id0, from, 300)
	if v := metricValue(t, rep, `jfast_channels_sse_gaps_total{channel="d",reason="catch_up"}`); v != "1" {
		t.Fatalf("jfast_channels_sse_gaps_total{reason=catch_up} = %q, want 1", v)
	}

	kept, err := rep.ch.client.XRangeN(ctx, rep.ch.chans["d"].key, "-", "+", 1).Result()
	if err != nil || len(kept) != 1 {
		t.Fatalf("the oldest entry: %v %v", kept, err)
	}
	c := openSSE(t, rep.svc.URL+"/events/d", "Last-Event-ID", kept[0].ID)
	if ev := c.next(t, 10*time.Second); ev.data != strconv.Itoa(from+1) {
		t.Fatalf("Last-Event-ID of the oldest entry kept: first event %+v, want %d", ev, from+1)
	}
	publishNumbers(t, rep, "whole", 0, 2)
	c = openSSE(t, rep.svc.URL+"/events/whole", "Last-Event-ID", "0-0")
	if ev := c.next(t, 10*time.Second); ev.data != "0" {
		t.Fatalf("Last-Event-ID 0-0 on a stream never trimmed: first event %+v, want 0", ev)
	}
}

// One read and the stream's XINFO at that instant: a cursor older than the
// oldest entry kept, on a stream that deleted more entries than the
// cursor's number, missed entries; nothing else is a gap. The cursor's number
// follows what it reads, is learnt at the newest entry, and is forgotten
// when the stream began again.
func TestCursorAdvance(t *testing.T) {
	t.Parallel()
	msgs := func(ids ...string) []redis.XMessage {
		out := make([]redis.XMessage, len(ids))
		for i, id := range ids {
			out[i] = redis.XMessage{ID: id}
		}
		return out
	}
	// info is XINFO STREAM on Redis 7: the oldest and newest IDs, entries
	// ever added and kept.
	info := func(first, newest string, added, length int64) *redis.XInfoStream {
		return &redis.XInfoStream{FirstEntry: redis.XMessage{ID: first}, LastGeneratedID: newest,
			EntriesAdded: added, Length: length, MaxDeletedEntryID: "0-0"}
	}
	redis6 := func(first, newest string) *redis.XInfoStream {
		return &redis.XInfoStream{FirstEntry: redis.XMessage{ID: first}, LastGeneratedID: newest}
	}
	for _, tc := range []struct {
		name     string
		cur      cursor
		msgs     []redis.XMessage
		is       *redis.XInfoStream
		resumeAt string
		want     cursor
	}{
		{"never trimmed", cursor{"5-0", 5}, msgs("6-0"), info("1-0", "9-0", 9, 9), "", cursor{"6-0", 6}},
		{"trimmed behind the cursor", cursor{"5-0", 5}, msgs("6-0"), info("4-0", "9-0", 9, 6), "", cursor{"6-0", 6}},
		{"the cursor's own entry trimmed, nothing after it", cursor{"5-0", 5}, msgs("6-0"), info("6-0", "9-0", 9, 4), "", cursor{"6-0", 6}},
		{"entries after the cursor trimmed", cursor{"5-0", 5}, msgs("8-0", "9-0"), info("8-0", "9-0", 9, 2), "8-0", cursor{"9-0", 9}},
		{"a Last-Event-ID older than every entry kept, the stream trimmed", cursor{"2-0", -1}, msgs("8-0"), info("8-0", "9-0", 9, 2), "8-0", cursor{"8-0", 8}},
		{"0-0 on a stream never trimmed", cursor{"0-0", 0}, msgs("1-0"), info("1-0", "9-0", 9, 9), "", cursor{"1-0", 1}},
		{"0-0 on a stream trimmed", cursor{"0-0", 0}, msgs("3-0"), info("3-0", "9-0", 9, 7), "3-0", cursor{"3-0", 3}},
		{"a Last-Event-ID the stream keeps: the number stays unknown", cursor{"3-0", -1}, msgs("4-0"), info("2-0", "9-0", 9, 8), "", cursor{"4-0", -1}},
		{"at the newest entry the number is known", cursor{"3-0", -1}, msgs("4-0", "9-0"), info("2-0", "9-0", 12, 8), "", cursor{"9-0", 12}},
		{"the stream began again, nothing trimmed", cursor{"5-0", 5}, msgs("7-0"), info("7-0", "8-0", 2, 2), "", cursor{"7-0", 1}},
		{"the stream began again and was trimmed", cursor{"5-0", 500}, msgs("7-0"), info("7-0", "8-0", 300, 100), "7-0", cursor{"7-0", 201}},
		{"no stream", cursor{"5-0", 5}, nil, &redis.XInfoStream{}, "", cursor{"5-0", 5}},
		{"Redis 6: the oldest kept later than the cursor", cursor{"5-0", -1}, msgs("9-0"), redis6("9-0", "9-0"), "9-0", cursor{"9-0", -1}},
		{"Redis 6: the cursor's entry kept", cursor{"5-0", -1}, msgs("6-0"), redis6("5-0", "6-0"), "", cursor{"6-0", -1}},
		{"Redis 6: from an empty stream", cursor{"0-0", -1}, msgs("9-0"), redis6("9-0", "9-0"), "", cursor{"9-0", -1}},
	} {
		cur := tc.cur
		if got := cur.advance(tc.msgs, tc.is); got != tc.resumeAt || cur != tc.want {
			t.Errorf("%s: advance = %q, cursor %+v; want %q, %+v", tc.name, got, cur, tc.resumeAt, tc.want)
		}
	}
}

// A stream reader whose read of the tail meets the cache's open breaker
// (an XREAD answered, then the breaker opened before the read that
// follows) reports itself down and resumes when the breaker lets a probe
// through, delivering what it had not read: the read's commands carry the
// breaker's refusal, and the reader takes no refused command for an empty
// answer (which crashed the process).
func TestSSEReaderMeetsTheOpenBreaker(t *testing.T) {
	t.Parallel()
	cl := newCluster(t, "", "durable = [\"d\"]")
	rep := cl.start(sseRoutes(SSEOpts{}, "d"))
	c := openSSE(t, rep.svc.URL+"/events/d")
	subscribed(t, rep.ch)
	publishNumbers(t, rep, "d", 0, 0)
	if ev := c.next(t, 10*time.Second); ev.data != "0" {
		t.Fatalf("first event %+v", ev)
	}

	h := rep.ch.chans["d"].hub
	held, release := holdTail(t, h)
	publishNumbers(t, rep, "d", 1, 1) // wakes the reader, which is held before it reads
	select {
	case <-held:
	case <-time.After(10 * time.Second):
		t.Fatal("the stream reader did not come to its next read")
	}
	if !rep.ch.breaker.Trip() {
		t.Fatal("the cache's breaker did not open")
	}
	release()
	waitFor(t, 10*time.Second, "the reader down with the breaker's refusal", func() bool {
		up, _, _, err, _ := h.tail.snapshot()
		return !up && strings.Contains(err, "suspended")
	})
	cl.clock.Advance(coolDown)
	if ev := c.next(t, 10*time.Second); ev.data != "1" {
		t.Fatalf("after the breaker's cool-down, the stream sent %+v; want 1", ev)
	}
}
