package channels

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/jfastframework/jfast/framework/resilience"
)

// A browser reconnecting with Last-Event-ID on a durable channel is caught
// up from the channel's Redis stream, page by page, on the cache plugin's
// client and under its command_timeout. Many browsers may do so at once (a
// replica stopped, and its browsers moved here), and each page is the
// stream's own (its entries, encoded for it alone), so two bounds keep the
// catch-ups from taking Redis's deadline or the process's memory:
//
//   - a page is bounded by bytes as well as entries: catchUpPageBytes of the
//     largest entries the plugin writes (max_payload_bytes plus
//     entryOverhead), counting the first and last entries XINFO returns in
//     the same reply, so one read stays far inside command_timeout;
//   - the pages a channel's catch-ups hold at once (read, and being written
//     to their clients) take at most sse_max_pending_bytes: the channel's
//     hub lends that many pages (catchUpBudget), and a stream takes one
//     before each read and gives it back once the page is written. It waits
//     for one, with heartbeats, for as long as the stream lives; a client
//     that does not read holds one for at most sse_write_timeout.

// catchUpPage is the most entries one catch-up read returns.
const catchUpPage = 100

// catchUpPageBytes bounds the reply of one catch-up read: at 1 MiB a read
// takes milliseconds on a loopback or LAN, however many pages are read one
// after the other, far from the cache's command_timeout (1 s).
const catchUpPageBytes = 1 << 20

// entryOverhead is about the most a stream entry the plugin wrote takes
// besides its payload: its ID, the field names, a request ID, a traceparent
// and a tracestate (at most 512 bytes: trimTraceState).
const entryOverhead = 1 << 10

// catchUpBudget returns how many entries a page of a channel's stream reads
// (a catch-up's, and the hub's tail's: at least one, at most catchUpPage),
// and how many pages a channel's catch-ups may
// hold at once (at least one). With the defaults (64 KiB payloads, 8 MiB of
// sse_max_pending_bytes): 13 entries of 65 KiB and 2 more in XINFO's part
// of the reply, 975 KiB; 9 pages of 845 KiB, 7.4 MiB.
func catchUpBudget(maxPayloadBytes, maxPendingBytes int) (entries, pages int) {
	entry := maxPayloadBytes + entryOverhead
	entries = min(max(catchUpPageBytes/entry-2, 1), catchUpPage)
	pages = max(maxPendingBytes/(entries*entry), 1)
	return entries, pages
}

// maxID is the largest stream entry ID: nothing can follow it.
const maxID = "18446744073709551615-18446744073709551615"

// catchUpState is where a catch-up is: the last id it sent, its cursor, and
// whether it checked the Last-Event-ID against the stream's newest entry.
type catchUpState struct {
	last    string
	cur     cursor
	checked bool
}

// catchUp sends the durable entries after last, page by page (readAfter),
// until it has read to the stream's end; when entries after last were
// trimmed before a page was read (a Last-Event-ID older than the stream
// keeps, or a catch-up outrun by a burst), a gap event goes before the page.
// What the hub hands the stream meanwhile is in the Redis stream before it
// is in the queue, so each page first empties the queue (the read that
// follows gets those entries), and a full queue is no overflow while it runs
// (sseConn.push). Each page is read and written holding one of the
// channel's catch-up pages (the hub's catchUps). A Last-Event-ID past the
// stream's newest entry (a stream that was deleted and began again, an id
// made up) resumes from that newest entry: the client gets what comes next.
// catchUpTurn reads and writes one page with one of the channel's catch-up
// places, which goes back once the page is written or dropped, or when
// writing it panics (an SSEOpts.Filter that panics): a place lost would
// leave the channel's later catch-ups waiting for good.
func (s *sseHandler) catchUpTurn(ctx context.Context, r *http.Request, st *sseStream, cu *catchUpState) (int, string, error) {
	defer func() { s.h.catchUps <- struct{}{} }()
	return s.catchUpPage(ctx, r, st, cu)
}

// Redis being down is waited out with backoff, within the stream's life; an
// error Redis answers (not a lost connection) ends the stream. Heartbeats
// go out through every wait. It returns the last id sent, or why the stream
// ended.
func (s *sseHandler) catchUp(ctx context.Context, r *http.Request, sc *sseConn, st *sseStream, heartbeat <-chan time.Time, last string) (string, string) {
	backoff := resilience.Backoff{Base: 100 * time.Millisecond, Max: 2 * time.Second}
	attempt := 0
	cu := catchUpState{last: last, cur: cursor{after: last, n: -1}}
	if last == "0-0" {
		cu.cur.n = 0 // before every entry the stream ever took
	}
	for {
		if reason := awaitStream(ctx, s, sc, st, heartbeat, s.h.catchUps); reason != "" {
			return cu.last, reason
		}
		sc.discard()
		n, reason, err := s.catchUpTurn(ctx, r, st, &cu)
		if reason != "" {
			return cu.last, reason
		}
		if err != nil {
			var reply redis.Error
			if errors.As(err, &reply) && ctx.Err() == nil {
				s.p.log.WarnContext(ctx, "channels: SSE catch-up refused by Redis; the stream ends", slog.String("channel", s.c.name),
					slog.String("last_event_id", cu.last), slog.String("error", err.Error()))
				return cu.last, closeCatchUp
			}
			cu.cur.n = -1 // Redis may come back empty (runTail)
			attempt++
			t := time.NewTimer(backoff.Delay(attempt))
			reason := awaitStream(ctx, s, sc, st, heartbeat, t.C)
			t.Stop()
			if reason != "" {
				return cu.last, reason
			}
			continue
		}
		attempt = 0
		if n < s.h.pageEntries && sc.caughtUp() {
			return cu.last, ""
		}
	}
}

// catchUpPage reads the page after cu and writes it: a gap event first when
// entries after cu were trimmed before the read. It returns how many
// entries it read, why the stream ended (a write failed), or Redis's error.
func (s *sseHandler) catchUpPage(ctx context.Context, r *http.Request, st *sseStream, cu *catchUpState) (int, string, error) {
	p := s.p
	if !cu.checked {
		newest, err := newestCursor(ctx, p.client, s.c.key)
		if err != nil {
			return 0, "", err
		}
		cu.checked = true
		if compareIDs(cu.last, newest.after) > 0 {
			cu.last, cu.cur = newest.after, newest
		}
	}
	if cu.last == maxID {
		return 0, "", nil
	}
	msgs, resumeAt, err := readAfter(ctx, p.client, s.c.key, &cu.cur, int64(s.h.pageEntries))
	if err != nil {
		return 0, "", err
	}
	if resumeAt != "" {
		p.log.InfoContext(ctx, "channels: SSE catch-up: entries after the stream's last id were trimmed (max_len) before it read them; the client is sent a gap event",
			slog.String("channel", s.c.name), slog.String("after", cu.last), slog.String("resumes_at", resumeAt), slog.Int("max_len", p.cfg.MaxLen))
		if err := s.sendGap(st, cu.last, gapCatchUp); err != nil {
			return 0, closeWrite, nil
		}
	}
	for i := range msgs {
		m := entryMessage(s.c.name, msgs[i].ID, msgs[i].Values)
		if cu.last, err = s.writeEvents(r, st, []*sseEvent{newSSEEvent(&m)}, cu.last); err != nil {
			return 0, closeWrite, nil
		}
	}
	if st.unflushed {
		if err := st.flush(); err != nil {
			return 0, closeWrite, nil
		}
	}
	return len(msgs), "", nil
}
