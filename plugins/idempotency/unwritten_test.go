package idempotency

import (
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"
)

// What a handler did not write through the response is replayed as the
// client got it, or not at all. One that sets headers and writes nothing
// gets net/http's 200 with them, and a repeat gets them too (they were not
// stored: the record was taken at the first write). One that takes the
// connection over (a hijack) leaves no response to replay: a repeat gets a
// 409 saying so and the handler does not run again (it was replayed as the
// status written before, with an empty body).
func TestWhatAHandlerDidNotWriteIsReplayedOrRefused(t *testing.T) {
	forStores(t, func(t *testing.T, store string) {
		var runs atomic.Int64
		b := setup(t, setupOpts{store: store, guarded: func(g chi.Router) {
			g.Post("/implicit", func(w http.ResponseWriter, _ *http.Request) {
				runs.Add(1)
				w.Header().Set("Location", "/things/42")
				w.Header().Set("Content-Type", "application/json")
			})
			g.Post("/hijack", func(w http.ResponseWriter, _ *http.Request) {
				runs.Add(1)
				conn, brw, err := http.NewResponseController(w).Hijack()
				if err != nil {
					return
				}
				defer conn.Close()
				_, _ = brw.WriteString("HTTP/1.1 201 Created\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello")
				_ = brw.Flush()
			})
		}})
		for i, want := range []string{"", "true"} {
			r := b.post(t, "/implicit", "k-implicit", "{}")
			b.settled("k-implicit")
			if r.Status != 200 || r.Header.Get("Location") != "/things/42" || r.Header.Get("Content-Type") != "application/json" || r.Header.Get(HeaderReplayed) != want {
				t.Errorf("/implicit, request %d: %d, Location %q, Content-Type %q, %s %q; want 200 with both headers, replayed %q",
					i+1, r.Status, r.Header.Get("Location"), r.Header.Get("Content-Type"), HeaderReplayed, r.Header.Get(HeaderReplayed), want)
			}
		}
		if first := b.post(t, "/hijack", "k-hijack", "{}"); first.Status != http.StatusCreated || string(first.Body) != "hello" {
			t.Fatalf("/hijack: %d %q, want the handler's 201 hello", first.Status, first.Body)
		}
		// The client had the whole answer while the handler still ran (it
		// wrote it on the connection it took over): wait for the record.
		notKept := b.idem.metrics.requests.WithLabelValues(store, outcomeNotKept)
		for deadline := time.Now().Add(10 * time.Second); counterValue(t, notKept) == 0; time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatal("the hijacked request's record was not written within 10 s")
			}
		}
		again := b.post(t, "/hijack", "k-hijack", "{}")
		if again.Status != http.StatusConflict || !strings.Contains(again.String(), "took the connection over") {
			t.Errorf("/hijack repeated: %d %s; want a 409 saying there is no response to replay", again.Status, again.Body)
		}
		if n := runs.Load(); n != 2 {
			t.Errorf("the handlers ran %d times, want 2 (once per key)", n)
		}
	})
}
