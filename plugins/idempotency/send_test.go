package idempotency

import (
	"context"
	"net/http"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/jfastframework/jfast/drills"
	"github.com/jfastframework/jfast/jfasttest"
)

// The first response reaches the client whole before the store's write of it
// returns, and a 5xx before the release of its key returns: a slow or failing
// store delays the record, not the answer. The handler pauses a private Redis
// (SIGSTOP) once it has written, so the store's call cannot return until the
// test resumes it, which it does only once it has read the response through
// (store_timeout and the cache's command_timeout are far longer than the
// test waits). Before, net/http sent a response this small only when the
// middleware returned, after the store's call.
func TestTheAnswerDoesNotWaitForTheStore(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	srv, err := drills.StartRedis(ctx)
	if err != nil {
		t.Fatalf("private redis-server: %v (apt-get install redis-server)", err)
	}
	t.Cleanup(func() { _ = srv.Stop() })

	cases := []struct {
		name, method string
		status       int
		length       string // the handler's own Content-Length, if any
		body         string
		wantLength   string // the Content-Length the client gets
		stored       bool
	}{
		{name: "201 with a body", method: http.MethodPost, status: http.StatusCreated, body: "0123456789", wantLength: "10", stored: true},
		{name: "201 with the handler's length", method: http.MethodPost, status: http.StatusCreated, length: "10", body: "0123456789", wantLength: "10", stored: true},
		{name: "204", method: http.MethodPost, status: http.StatusNoContent, stored: true},
		{name: "HEAD", method: http.MethodHead, status: http.StatusOK, body: "0123456789", wantLength: "10", stored: true},
		{name: "503 releases the key", method: http.MethodPost, status: http.StatusServiceUnavailable, body: "try again", wantLength: "9"},
	}
	runs := make([]atomic.Int64, len(cases))
	b := setup(t, setupOpts{store: StoreRedis, redis: srv,
		toml: `store_timeout = "5m"`, cacheTOML: `command_timeout = "5m"`,
		guarded: func(g chi.Router) {
			g.HandleFunc("/answer/{i}", func(w http.ResponseWriter, r *http.Request) {
				i, _ := strconv.Atoi(chi.URLParam(r, "i"))
				c := cases[i]
				w.Header().Set("Content-Type", "text/plain")
				if c.length != "" {
					w.Header().Set("Content-Length", c.length)
				}
				w.WriteHeader(c.status)
				_, _ = w.Write([]byte(c.body))
				if runs[i].Add(1) == 1 {
					if err := srv.Pause(); err != nil {
						t.Errorf("pause redis-server: %v", err)
					}
				}
			})
		}})
	t.Cleanup(func() { _ = srv.Resume() }) // before the App stops

	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path, key := "/answer/"+strconv.Itoa(i), "answer-"+strconv.Itoa(i)
			send := func() jfasttest.Response {
				return b.svc.Do(t, c.method, path, "", HeaderKey, key, "Authorization", "Bearer "+testCaller)
			}
			answered := make(chan jfasttest.Response, 1)
			go func() { answered <- send() }()
			var r jfasttest.Response
			select {
			case r = <-answered:
			case <-time.After(20 * time.Second):
				_ = srv.Resume()
				t.Fatalf("no answer in 20 s: the client waits for the store's call on the paused Redis")
			}
			if b.idem.settling.of(callerKey(key)) == nil {
				t.Errorf("the store's call returned before Redis was resumed")
			}
			if err := srv.Resume(); err != nil {
				t.Fatal(err)
			}
			wantBody := c.body
			if c.method == http.MethodHead {
				wantBody = ""
			}
			if r.Status != c.status || string(r.Body) != wantBody || r.Header.Get("Content-Length") != c.wantLength {
				t.Fatalf("answer %d %q Content-Length %q, want %d %q %q", r.Status, r.Body, r.Header.Get("Content-Length"), c.status, wantBody, c.wantLength)
			}

			// The call went on once Redis was back: a repeat gets the
			// stored response, or runs again after the release.
			again := send()
			replayed := again.Header.Get(HeaderReplayed) == "true"
			wantRuns := int64(1)
			if !c.stored {
				wantRuns = 2
			}
			if again.Status != c.status || replayed != c.stored || runs[i].Load() != wantRuns {
				t.Fatalf("repeat: %d replayed=%v after %d runs, want %d replayed=%v after %d", again.Status, replayed, runs[i].Load(), c.status, c.stored, wantRuns)
			}
		})
	}
}
