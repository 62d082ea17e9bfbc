package channels

import (
	"context"
	"strings"

	"github.com/redis/go-redis/v9"
)

// A durable stream is trimmed to about max_len entries as it is written
// (XADD MAXLEN ~), so a reader more than max_len entries behind loses the
// oldest entries it had not read: the SSE stream reader of a process outrun
// by a burst, a catch-up from a Last-Event-ID older than what the stream
// keeps. Neither may skip them silently (a browser would show a wrong
// picture and never know): every read says whether entries after the reader's
// last one were deleted before it read them, and the stream sends a gap
// event before what follows.

// gapEvent is the SSE event name of a gap; SSE refuses it as SSEOpts.Event.
const gapEvent = "gap"

// The reasons of jfast_channels_sse_gaps_total.
const (
	gapBehind  = "reader_behind" // the process's reader of the channel was outrun
	gapCatchUp = "catch_up"      // a catch-up from a Last-Event-ID
)

// cursor is where a reader of a durable stream is: after, the last entry
// it read, and n, that entry's number among all the entries the stream ever
// took (XINFO's entries-added when it was the newest), or -1 when the reader
// does not know it (a catch-up from a browser's Last-Event-ID, until it
// reaches the newest entry).
type cursor struct {
	after string
	n     int64
}

// readAfter reads up to count entries of the stream at key after cur, and in
// the same transaction (MULTI/EXEC, so nothing is trimmed in between) the
// stream's XINFO, and moves cur past them (cursor.advance). resumeAt is ""
// when no entry after cur was trimmed before this read; otherwise the reader
// missed entries, all older than resumeAt, the oldest entry kept.
func readAfter(ctx context.Context, client redis.UniversalClient, key string, cur *cursor, count int64) (msgs []redis.XMessage, resumeAt string, err error) {
	var rng *redis.XMessageSliceCmd
	var info *redis.XInfoStreamCmd
	_, _ = client.TxPipelined(ctx, func(pipe redis.Pipeliner) error {
		rng = pipe.XRangeN(ctx, key, "("+cur.after, "+", count)
		info = pipe.XInfoStream(ctx, key)
		return nil
	})
	if msgs, err = rng.Result(); err != nil {
		return nil, "", err
	}
	is, err := info.Result()
	if err != nil {
		if !isNoSuchKey(err) {
			return nil, "", err
		}
		is = &redis.XInfoStream{} // no stream: nothing was trimmed from it
	}
	return msgs, cur.advance(msgs, is), nil
}

// newestCursor is a cursor at the newest entry the stream at key ever took:
// a reader from there gets what comes next.
func newestCursor(ctx context.Context, client redis.UniversalClient, key string) (cursor, error) {
	is, err := client.XInfoStream(ctx, key).Result()
	if err != nil {
		if isNoSuchKey(err) {
			return cursor{after: "0-0"}, nil
		}
		return cursor{}, err
	}
	return cursor{after: is.LastGeneratedID, n: is.EntriesAdded}, nil
}

func isNoSuchKey(err error) bool { return strings.Contains(err.Error(), "no such key") }

// advance moves the cursor past msgs, read together with is (the stream's
// XINFO at that instant), and returns resumeAt: "" when no entry after the
// cursor was trimmed before the read, else the oldest entry kept, which
// every missed entry is older than (a stream that sent it, or later, missed
// none of them).
//
// MAXLEN trims the oldest entries first, so entries after the cursor were
// trimmed only if the cursor is older than the oldest entry kept (first).
// Then Redis 7's counts say whether any was: entries-added less length is
// how many entries the stream deleted, all older than first; more than the
// cursor's number, and some of them came after it. A cursor whose number is
// not known counts as 0: a Last-Event-ID older than every entry kept, on a
// stream that was ever trimmed, is a gap (Redis does not say which entries
// were trimmed, so one naming the very last entry trimmed is told of a gap
// that was none). An entry deleted with XDEL counts as trimmed, in the same
// direction: a gap reported that was none, never one missed. Redis 6 has no
// counts: a cursor older than first is a gap, except from "0-0" (an empty
// stream).
func (c *cursor) advance(msgs []redis.XMessage, is *redis.XInfoStream) string {
	first := is.FirstEntry.ID
	behind := first != "" && compareIDs(first, c.after) > 0
	redis7 := is.MaxDeletedEntryID != "" // a field Redis 7 added with the counts
	if redis7 && c.n > is.EntriesAdded {
		c.n = -1 // the stream began again (deleted, or Redis restarted empty)
	}
	resumeAt := ""
	switch {
	case !behind:
		if c.n >= 0 {
			c.n += int64(len(msgs))
		}
	case redis7:
		deleted := is.EntriesAdded - is.Length
		if deleted > max(c.n, 0) {
			resumeAt = first
		}
		c.n = deleted + int64(len(msgs)) // msgs begin at first
	default:
		if c.after != "0-0" {
			resumeAt = first
		}
		c.n = -1
	}
	if len(msgs) > 0 {
		c.after = msgs[len(msgs)-1].ID
	}
	if redis7 && c.after == is.LastGeneratedID {
		c.n = is.EntriesAdded // at the newest entry, its number is known
	}
	return resumeAt
}

// missed reports whether a stream that sent entries up to last (none yet:
// "") missed some of a gap: entries trimmed, all older than resumeAt.
func missed(resumeAt, last string) bool {
	return last == "" || compareIDs(resumeAt, last) > 0
}

// appendGap appends the gap event of a stream whose last sent entry is after
// (or none: ""). It has no id: line, so the browser's Last-Event-ID stays on
// the last entry it got, and a reconnect before the next entry is sent this
// gap again, as it should be.
func appendGap(b []byte, after string) []byte {
	b = append(b, "event: "+gapEvent+"\ndata: {\"after\":\""...)
	b = append(b, after...) // an entry ID: digits and one '-'
	return append(b, "\"}\n\n"...)
}
