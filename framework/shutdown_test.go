package framework_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/jfasttest"
	"github.com/jfastframework/jfast/requestid"
)

// flusher is a plugin whose Stop needs time of its own (as the telemetry
// plugin's flush or the queue's drain do) and reports what it was given.
type flusher struct {
	name string
	work time.Duration
	got  chan stopReport
}

type stopReport struct {
	errAtStart error
	budget     time.Duration // the deadline left when Stop began
	finished   bool          // the work was done before the context ended
}

func (f *flusher) Name() string { return f.name }

func (f *flusher) Stop(ctx context.Context) error {
	rep := stopReport{errAtStart: ctx.Err()}
	if d, ok := ctx.Deadline(); ok {
		rep.budget = time.Until(d)
	}
	select {
	case <-time.After(f.work):
		rep.finished = true
	case <-ctx.Done():
	}
	f.got <- rep
	return ctx.Err()
}

// A request that never finishes is cut when the drain runs out, logged with
// its request ID, and every plugin's Stop still gets its own time: neither the
// stuck request nor a plugin before it that used all of its own.
func TestPluginStopGetsItsTimeAfterARequestThatNeverFinishes(t *testing.T) {
	t.Parallel()
	entered := make(chan struct{})
	release := make(chan struct{})
	handlerCtx := make(chan context.Context, 1)
	// stuck stops first (it started last) and uses all its time; flush stops
	// after it and must still get its own.
	flush := &flusher{name: "flush", work: 200 * time.Millisecond, got: make(chan stopReport, 1)}
	stuck := &flusher{name: "stuck", work: time.Hour, got: make(chan stopReport, 1)}
	logs := &jfasttest.Logs{}
	app, err := framework.New(framework.Options{
		ConfigText: `[app]
listen = "127.0.0.1:0"
shutdown_timeout = "300ms"
plugin_stop_timeout = "1s"
[plugins]
enabled = ["flush", "stuck"]`,
		Environ:   []string{},
		LogOutput: logs,
		Plugins:   []framework.Plugin{flush, stuck},
		Routes: func(_ *framework.App, r chi.Router) error {
			r.Get("/never", func(w http.ResponseWriter, r *http.Request) {
				handlerCtx <- r.Context()
				close(entered)
				<-release // ignores its context: it never finishes on its own
			})
			return nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := app.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { close(release) })

	const id = "stuck-request-1"
	clientDone := make(chan struct{})
	go func() {
		defer close(clientDone)
		req, _ := http.NewRequest(http.MethodGet, "http://"+app.Addr()+"/never", nil)
		req.Header.Set(requestid.Header, id)
		if resp, err := http.DefaultTransport.RoundTrip(req); err == nil {
			resp.Body.Close()
		}
	}()
	<-entered

	start := time.Now()
	err = app.Stop(context.Background())
	took := time.Since(start)
	if err == nil || !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "drain requests") {
		t.Errorf("Stop = %v, want the drain's deadline among its errors", err)
	}
	<-clientDone // the cut request's connection was closed

	s, f := <-stuck.got, <-flush.got
	if s.errAtStart != nil || s.finished {
		t.Errorf("stuck plugin: %+v", s)
	}
	if f.errAtStart != nil || !f.finished || f.budget < 800*time.Millisecond {
		t.Errorf("the plugin after a stuck request and a stuck plugin got %+v, want an unexpired context of about 1s and its 200ms of work done", f)
	}
	t.Logf("Stop took %v; flush had %v left when it began", took, f.budget)

	ctx := <-handlerCtx
	if ctx.Err() == nil || !strings.Contains(context.Cause(ctx).Error(), "shut down before the request finished") {
		t.Errorf("the cut request's context: err %v, cause %v", ctx.Err(), context.Cause(ctx))
	}
	out := logs.String()
	if !strings.Contains(out, "shutdown cut a request still running") || !strings.Contains(out, "path=/never") ||
		!strings.Contains(out, "request_id="+id) || !strings.Contains(out, "count=1") {
		t.Errorf("the cut request is not logged:\n%s", out)
	}
}

func TestPluginStopTimeoutIsADeadline(t *testing.T) {
	t.Parallel()
	errs := configErrors(t, jfasttest.Options{TOML: "[app]\nplugin_stop_timeout = \"0s\""})
	if _, ok := errs["app.plugin_stop_timeout"]; !ok {
		t.Fatalf("errors = %v", errs)
	}
}

// With app.drain_delay a stopping App keeps serving its routes for the delay,
// on the App's clock, while /ready answers 503: whoever chooses instances by
// readiness stops sending work before the listener closes. Then the drain
// goes on as without it.
func TestDrainDelayReadyFirst(t *testing.T) {
	t.Parallel()
	clock := jfasttest.NewClock()
	svc := jfasttest.Start(t, jfasttest.Options{
		TOML:  "[app]\ndrain_delay = \"3s\"",
		Clock: clock,
		Routes: func(_ *framework.App, r chi.Router) error {
			r.Get("/ok", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
			return nil
		},
	})
	if r := svc.Get(t, "/ready"); r.Status != http.StatusOK {
		t.Fatalf("/ready before the stop = %d %s", r.Status, r.Body)
	}
	waiters := clock.Waiters()
	stopped := make(chan error, 1)
	go func() { stopped <- svc.Stop(context.Background()) }()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := clock.BlockUntilContext(ctx, waiters+1); err != nil {
		t.Fatalf("the stop did not wait out drain_delay on the App's clock: %v", err)
	}
	// New connections, as a caller's next request may open.
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	for path, want := range map[string]int{"/ready": http.StatusServiceUnavailable, "/ok": http.StatusOK} {
		resp, err := client.Get(svc.URL + path)
		if err != nil {
			t.Fatalf("GET %s during drain_delay: %v", path, err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("GET %s during drain_delay = %d, want %d", path, resp.StatusCode, want)
		}
		if cc := resp.Header.Get("Cache-Control"); path == "/ready" && cc != "no-store" {
			t.Errorf("GET /ready during drain_delay: Cache-Control %q, want no-store", cc)
		}
	}
	select {
	case err := <-stopped:
		t.Fatalf("Stop returned before drain_delay passed: %v", err)
	default:
	}
	clock.Advance(3 * time.Second)
	if err := <-stopped; err != nil {
		t.Fatal(err)
	}
	if resp, err := client.Get(svc.URL + "/ok"); err == nil {
		_ = resp.Body.Close()
		t.Fatalf("GET /ok after the stop = %d, want the listener closed", resp.StatusCode)
	}
}

func TestDrainDelayNotNegative(t *testing.T) {
	t.Parallel()
	errs := configErrors(t, jfasttest.Options{TOML: "[app]\ndrain_delay = \"-1s\""})
	if _, ok := errs["app.drain_delay"]; !ok {
		t.Fatalf("errors = %v", errs)
	}
}
