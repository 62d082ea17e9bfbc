package idempotency

import (
	"context"
	"io"
	"net/http"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/jfastframework/jfast/framework"
)

// A client that gave up leaves no answer for its key: the handler, stopped
// by the client's going (its context cancelled), returns that error, which
// the framework answers 499 for the access log and nobody; the key is
// released, so the client's retry with it runs the handler. Before, the 499
// was stored, and the retry got it replayed without running.
func TestAClientThatGaveUpLeavesTheKeyFree(t *testing.T) {
	forStores(t, func(t *testing.T, store string) {
		var runs atomic.Int64
		entered := make(chan struct{})
		b := setup(t, setupOpts{store: store, guarded: func(g chi.Router) {
			g.Method(http.MethodPost, "/waits", framework.Handler(func(w http.ResponseWriter, r *http.Request) error {
				if runs.Add(1) == 1 {
					close(entered)
					<-r.Context().Done() // the client gave up
					return r.Context().Err()
				}
				return framework.JSON(w, http.StatusCreated, map[string]int64{"run": runs.Load()})
			}))
		}})

		ctx, cancel := context.WithCancel(context.Background())
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, b.svc.URL+"/waits", strings.NewReader("{}"))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set(HeaderKey, "k-gone")
		req.Header.Set("Authorization", "Bearer "+testCaller)
		sent := make(chan error, 1)
		go func() {
			resp, err := http.DefaultClient.Do(req)
			if err == nil {
				resp.Body.Close()
			}
			sent <- err
		}()
		<-entered
		cancel()
		if err := <-sent; err == nil {
			t.Fatal("the cancelled request got an answer")
		}
		// The access log's line comes once the middleware has returned, its
		// release or write of the key done.
		wait, stop := context.WithTimeout(context.Background(), 10*time.Second)
		defer stop()
		if err := b.svc.WaitLogs(wait, func(logs string) bool { return strings.Contains(logs, "path=/waits status=499") }); err != nil {
			t.Fatalf("no 499 in the access log: %v\n%s", err, b.svc.Logs())
		}

		r := b.post(t, "/waits", "k-gone", "{}")
		if r.Status != http.StatusCreated || r.Header.Get(HeaderReplayed) != "" || runs.Load() != 2 {
			t.Fatalf("retry: %d %q replayed=%q after %d runs; want a fresh 201 from a second run", r.Status, r.Body, r.Header.Get(HeaderReplayed), runs.Load())
		}
	})
}

// A client that went away while its answer was being written leaves no
// answer for its key either: the handler, stopped half-way by the client's
// going, returns that error after writing part of a 201 (held by the
// middleware, or flushed), and the response is aborted, not ended as a
// whole one. Before, the part written was stored as a complete 201 and
// replayed to the client's retry.
func TestAClientThatLeftMidAnswerLeavesTheKeyFree(t *testing.T) {
	for _, flushed := range []bool{false, true} {
		name := map[bool]string{false: "held", true: "flushed"}[flushed]
		t.Run(name, func(t *testing.T) {
			forStores(t, func(t *testing.T, store string) {
				var runs atomic.Int64
				entered := make(chan struct{})
				b := setup(t, setupOpts{store: store, guarded: func(g chi.Router) {
					g.Method(http.MethodPost, "/cut", framework.Handler(func(w http.ResponseWriter, r *http.Request) error {
						if runs.Add(1) > 1 {
							return framework.JSON(w, http.StatusCreated, map[string]int64{"run": runs.Load()})
						}
						w.Header().Set("Content-Type", "application/json")
						w.WriteHeader(http.StatusCreated)
						_, _ = w.Write([]byte(`{"part":`))
						if flushed {
							_ = http.NewResponseController(w).Flush()
						}
						close(entered)
						<-r.Context().Done() // the client went away
						return r.Context().Err()
					}))
				}})
				ctx, cancel := context.WithCancel(context.Background())
				req, err := http.NewRequestWithContext(ctx, http.MethodPost, b.svc.URL+"/cut", strings.NewReader("{}"))
				if err != nil {
					t.Fatal(err)
				}
				req.Header.Set(HeaderKey, "k-cut-"+name)
				req.Header.Set("Authorization", "Bearer "+testCaller)
				sent := make(chan struct{})
				go func() {
					defer close(sent)
					if resp, err := http.DefaultClient.Do(req); err == nil {
						_, _ = io.Copy(io.Discard, resp.Body)
						resp.Body.Close()
					}
				}()
				<-entered
				cancel()
				<-sent
				// The access log's line comes once the middleware has
				// returned, its release or write of the key done.
				wait, stop := context.WithTimeout(context.Background(), 10*time.Second)
				defer stop()
				if err := b.svc.WaitLogs(wait, func(logs string) bool { return strings.Contains(logs, "path=/cut status=201") }); err != nil {
					t.Fatalf("no access log line: %v\n%s", err, b.svc.Logs())
				}
				if logs := b.svc.Logs(); !regexp.MustCompile(`path=/cut status=201 .*aborted=true`).MatchString(logs) {
					t.Errorf("the access log does not say the cut response was aborted:\n%s", logs)
				}
				r := b.post(t, "/cut", "k-cut-"+name, "{}")
				if r.Status != http.StatusCreated || r.Header.Get(HeaderReplayed) != "" || runs.Load() != 2 {
					t.Fatalf("retry: %d %q replayed=%q after %d runs; want a fresh 201 from a second run", r.Status, r.Body, r.Header.Get(HeaderReplayed), runs.Load())
				}
			})
		})
	}
}

// A status net/http refuses (over 999) panics in the handler, as it does
// without the middleware, so the key is released at once and the retry
// runs: held and sent after the handler returned, its panic left the key
// held until its lease ended (409 to every retry).
func TestAnInvalidStatusReleasesTheKey(t *testing.T) {
	forStores(t, func(t *testing.T, store string) {
		var runs atomic.Int64
		b := setup(t, setupOpts{store: store, guarded: func(g chi.Router) {
			g.Method(http.MethodPost, "/bad-status", framework.Handler(func(w http.ResponseWriter, r *http.Request) error {
				if runs.Add(1) == 1 {
					w.WriteHeader(1000)
					return nil
				}
				return framework.JSON(w, http.StatusCreated, map[string]int64{"run": runs.Load()})
			}))
			// A second status, an invalid one too, is dropped as net/http
			// drops it: the first goes out whole.
			g.Method(http.MethodPost, "/two", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(http.StatusCreated)
				w.WriteHeader(1000)
				_, _ = w.Write([]byte("{}"))
			}))
		}})
		if r := b.post(t, "/two", "k-two", "{}"); r.Status != http.StatusCreated || string(r.Body) != "{}" {
			t.Fatalf("a second, invalid status: %d %q; want the first, 201, whole", r.Status, r.Body)
		}
		wantProblem(t, b.post(t, "/bad-status", "k-bad", "{}"), http.StatusInternalServerError)
		r := b.post(t, "/bad-status", "k-bad", "{}")
		if r.Status != http.StatusCreated || r.Header.Get(HeaderReplayed) != "" || runs.Load() != 2 {
			t.Fatalf("retry: %d %q replayed=%q after %d runs; want a fresh 201 from a second run", r.Status, r.Body, r.Header.Get(HeaderReplayed), runs.Load())
		}
	})
}
