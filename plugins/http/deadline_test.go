package http_test

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/framework/resilience"
	"github.com/jfastframework/jfast/jfasttest"
	jhttp "github.com/jfastframework/jfast/plugins/http"
)

// downstream is a jfast service whose /work handler records the deadline it
// was given and waits until its context ends.
type downstream struct {
	*jfasttest.Service
	runs    atomic.Int64
	header  atomic.Value // the framework.TimeoutHeader value it got
	left    atomic.Int64 // time to its deadline at entry, in ns
	stopped atomic.Int64 // from entry to its context's end, in ns
	cut     atomic.Bool  // its context ended it, not the 10 s fallback
	served  atomic.Value // the deadline /deadline was served with (time.Time)
	done    chan struct{}
}

func startDownstream(t *testing.T) *downstream {
	t.Helper()
	d := &downstream{done: make(chan struct{}, 10)}
	d.Service = jfasttest.Start(t, jfasttest.Options{
		TOML: "[app]\nrequest_timeout = \"30s\"\n",
		Routes: func(_ *framework.App, r chi.Router) error {
			r.Get("/work", func(w http.ResponseWriter, r *http.Request) {
				entry := time.Now()
				d.runs.Add(1)
				d.header.Store(r.Header.Get(framework.TimeoutHeader))
				deadline, _ := r.Context().Deadline()
				d.left.Store(int64(deadline.Sub(entry)))
				select {
				case <-r.Context().Done():
					d.cut.Store(true)
				case <-time.After(10 * time.Second):
				}
				d.stopped.Store(int64(time.Since(entry)))
				d.done <- struct{}{}
				if d.cut.Load() {
					// Work cut by its deadline gives no answer: the
					// connection is dropped, so the edge's answer is the
					// upstream's 503 whichever ends its call first, its own
					// deadline (a millisecond later: the header is in
					// whole milliseconds, rounded down) or the dropped
					// connection. An answer here would race the edge's
					// deadline, and a starved machine let it win.
					panic(http.ErrAbortHandler)
				}
			})
			r.Get("/deadline", func(w http.ResponseWriter, r *http.Request) {
				d.runs.Add(1)
				deadline, _ := r.Context().Deadline()
				d.served.Store(deadline)
			})
			return nil
		},
	})
	return d
}

// Two real services: a 2 s budget at the edge; the edge spends 100 ms,
// then calls the second service, whose handler sees at most the 1.9 s left
// and stops when they run out, as the edge answers 503.
func TestDeadlineTravelsDownstream(t *testing.T) {
	t.Parallel()
	// The edge's budget is far above its own 100 ms of work, so that a
	// starved machine still leaves the second service some of it to run
	// its handler with (a budget spent in transit is answered without it).
	const budget = 2 * time.Second
	down := startDownstream(t)
	var spent atomic.Int64
	var deadlineSent atomic.Int64
	edge := jfasttest.Start(t, jfasttest.Options{
		TOML: `[app]
request_timeout = "` + budget.String() + `"
[plugins]
enabled = ["http"]
[plugin.http.upstreams.work]
base_url = "` + down.URL + `"
attempts = 1
`,
		Plugins: []framework.Plugin{jhttp.New()},
		Routes: func(app *framework.App, r chi.Router) error {
			work, err := jhttp.Client(app, "work")
			if err != nil {
				return err
			}
			r.Method(http.MethodGet, "/edge", framework.Handler(func(w http.ResponseWriter, r *http.Request) error {
				deadline, _ := r.Context().Deadline()
				deadlineSent.Store(deadline.UnixNano())
				time.Sleep(100 * time.Millisecond) // the edge's own work
				spent.Store(int64(budget - time.Until(deadline)))
				_, err := work.Get(r.Context(), "/work")
				return err
			}))
			return nil
		},
	})
	resp := edge.Get(t, "/edge")
	if resp.Status != 503 || !strings.Contains(resp.String(), `"upstream":"work"`) {
		t.Fatalf("edge: %d %s, want the upstream's 503", resp.Status, resp)
	}
	if down.runs.Load() == 0 {
		t.Fatalf("the second service never ran its handler: the edge's %s were spent before it (header %v)", budget, down.header.Load())
	}
	<-down.done
	left, stopped, before := time.Duration(down.left.Load()), time.Duration(down.stopped.Load()), time.Duration(spent.Load())
	if before < 100*time.Millisecond {
		t.Fatalf("the edge spent %s before calling, want at least 100ms", before)
	}
	// A bound the code keeps on any machine: the header carries what the
	// edge has left when it sends (rounded down), and the second service
	// counts it from when it reads the header, so at its handler's entry at
	// most the budget less what the edge spent is left (not its own 30s). No lower
	// bound: a starved machine may spend any part of it in transit.
	if left > budget-before {
		t.Errorf("the second service's deadline was %s away at entry, want at most %s - %s spent at the edge", left, budget, before)
	}
	if ms, err := strconv.Atoi(down.header.Load().(string)); err != nil || time.Duration(ms)*time.Millisecond > budget-before {
		t.Errorf("%s = %q, want at most %s", framework.TimeoutHeader, down.header.Load(), budget-before)
	}
	// Its context, not the 10 s fallback, ended the handler.
	if !down.cut.Load() {
		t.Errorf("the second service's handler ran %s, to its 10s fallback: its context never ended (deadline %s away at entry)", stopped, left)
	}
}

// A request whose caller has no time left is answered at once with a 503
// problem, without running the handler; the header caps the deadline and
// never raises it, and a value that is not a number is ignored.
func TestCallerDeadlineAtTheServer(t *testing.T) {
	t.Parallel()
	down := startDownstream(t)
	for _, v := range []string{"0", "-40"} {
		resp := down.Get(t, "/work", framework.TimeoutHeader, v)
		if resp.Status != 503 || resp.Header.Get("Content-Type") != "application/problem+json" ||
			!strings.Contains(resp.String(), "the caller's deadline had passed") {
			t.Errorf("%s: %s: %d %s, want a 503 problem saying the caller's deadline had passed", framework.TimeoutHeader, v, resp.Status, resp)
		}
	}
	if n := down.runs.Load(); n != 0 {
		t.Fatalf("the handler ran %d times for expired requests", n)
	}
	// The server counts the timeout from when it takes the request, which
	// is between sending it and getting the answer: so the deadline is the
	// timeout after a moment in that window, however long the machine takes.
	for _, tc := range []struct {
		value   string
		timeout time.Duration
	}{
		{"250", 250 * time.Millisecond},
		{"3600000", 30 * time.Second}, // capped by request_timeout
		{"soon", 30 * time.Second},    // ignored
	} {
		sent := time.Now()
		resp := down.Get(t, "/deadline", framework.TimeoutHeader, tc.value)
		answered := time.Now()
		served, _ := down.served.Load().(time.Time)
		if resp.Status != 200 || served.Before(sent.Add(tc.timeout)) || served.After(answered.Add(tc.timeout)) {
			t.Errorf("%s: %s: %d, deadline %s after sending (answered after %s), want %s after a moment in between",
				framework.TimeoutHeader, tc.value, resp.Status, served.Sub(sent), answered.Sub(sent), tc.timeout)
		}
	}
}

// Every attempt carries the time the call has left: the sooner of
// timeout and the caller's deadline.
func TestTimeoutHeaderOnEveryAttempt(t *testing.T) {
	t.Parallel()
	up := newUpstream(t, func(w http.ResponseWriter, _ *http.Request, n int) {
		if n < 3 {
			w.WriteHeader(503)
		}
	})
	c, _, _ := newClient(t, noBudget(jhttp.Upstream{BaseURL: up.URL, PolicyConfig: resilience.PolicyConfig{Timeout: 5 * time.Second}}))
	if _, err := c.Get(context.Background(), "/x"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, up.URL+"/y", nil)
	req.Header.Set(framework.TimeoutHeader, "999999") // a proxied request's inbound value is replaced
	resp, err := c.HTTPClient().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	for i, want := range []time.Duration{5 * time.Second, 5 * time.Second, 5 * time.Second, time.Second} {
		ms, err := strconv.Atoi(up.request(i).Header.Get(framework.TimeoutHeader))
		if got := time.Duration(ms) * time.Millisecond; err != nil || got > want || got < want-time.Second/2 {
			t.Errorf("attempt %d: %s = %q, want just under %s", i+1, framework.TimeoutHeader, up.request(i).Header.Get(framework.TimeoutHeader), want)
		}
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		t.Fatal("the test took too long to mean anything")
	}
}
