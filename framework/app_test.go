package framework_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/jfasttest"
	"github.com/jfastframework/jfast/problem"
	"github.com/jfastframework/jfast/readiness"
	"github.com/jfastframework/jfast/requestid"
)

func TestPluginsStartInDependencyOrderAndStopInReverse(t *testing.T) {
	t.Parallel()
	rec := &recorder{}
	a, b, c := newFake("a", rec), newFake("b", rec), newFake("c", rec)
	a.deps = []framework.Dependency{{Name: "c"}}
	b.deps = []framework.Dependency{{Name: "missing", Optional: true}}
	app, err := jfasttest.New(t, jfasttest.Options{
		TOML:    "[plugins]\nenabled = [\"a\", \"b\", \"c\"]",
		Plugins: []framework.Plugin{a, b, c},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := app.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := app.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	want := []string{"start c", "start a", "start b", "stop b", "stop a", "stop c"}
	if got := rec.list(); !slices.Equal(got, want) {
		t.Fatalf("events = %v, want %v", got, want)
	}
}

func TestFailedStartStopsWhatStartedInReverse(t *testing.T) {
	t.Parallel()
	rec := &recorder{}
	a, b, c := newFake("a", rec), newFake("b", rec), newFake("c", rec)
	b.startErr = errors.New("bad key material")
	app, err := jfasttest.New(t, jfasttest.Options{
		TOML:    "[plugins]\nenabled = [\"a\", \"c\", \"b\"]",
		Plugins: []framework.Plugin{a, b, c},
	})
	if err != nil {
		t.Fatal(err)
	}
	err = app.Start(context.Background())
	if err == nil || !strings.Contains(err.Error(), "start plugin b: bad key material") {
		t.Fatalf("err = %v", err)
	}
	want := []string{"start a", "start c", "start b", "stop c", "stop a"}
	if got := rec.list(); !slices.Equal(got, want) {
		t.Fatalf("events = %v, want %v", got, want)
	}
	if app.Addr() != "" {
		t.Fatal("a failed start must not listen")
	}
}

func TestUnreachableDependencyDoesNotFailTheBoot(t *testing.T) {
	t.Parallel()
	addr := jfasttest.RefusedAddr(t) // a port nothing listens on

	svc := jfasttest.Start(t, jfasttest.Options{
		TOML:    fmt.Sprintf("[plugins]\nenabled = [\"observability\", \"fake\"]\n[plugin.fake]\naddress = %q", addr),
		Plugins: []framework.Plugin{newFake("fake", nil)},
	})
	if r := svc.Get(t, "/live"); r.Status != http.StatusOK {
		t.Fatalf("/live = %d", r.Status)
	}
	r := svc.Get(t, "/ready")
	var res readiness.Result
	if err := json.Unmarshal(r.Body, &res); err != nil {
		t.Fatal(err)
	}
	if r.Status != http.StatusOK || res.Status != readiness.Degraded {
		t.Fatalf("/ready = %d %s", r.Status, r.Body)
	}
	if c := res.Checks["fake"]; c.Healthy || c.Status != readiness.Fail || !strings.Contains(c.Detail, "unreachable") {
		t.Fatalf("fake check = %+v", c)
	}
}

func TestRoutesAskingForMissingThingsFailTheBoot(t *testing.T) {
	t.Parallel()
	app, err := jfasttest.New(t, jfasttest.Options{
		Routes: func(app *framework.App, r chi.Router) error {
			_, err := framework.Get[*fakePlugin](app, "fake")
			return err
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	err = app.Start(context.Background())
	if err == nil || !strings.Contains(err.Error(), `plugin "fake" is not enabled`) {
		t.Fatalf("err = %v", err)
	}
}

// Get typed by a contract names the plugin to enable when it is absent, and
// the contract when the enabled plugin does not offer it.
func TestGetByContractNamesTheFix(t *testing.T) {
	t.Parallel()
	var errs []string
	startWithFake(t, func(app *framework.App, r chi.Router) error {
		for _, name := range []string{"db", "fake"} {
			if _, err := framework.Get[framework.DBPool](app, name); err != nil {
				errs = append(errs, err.Error())
			}
		}
		return nil
	})
	want := []string{
		`plugin "db" is not enabled; add "db" to [plugins] enabled`,
		`plugin "fake" is a *framework_test.fakePlugin, which is not a framework.DBPool`,
	}
	if !slices.Equal(errs, want) {
		t.Fatalf("errors = %q, want %q", errs, want)
	}
}

// GetNamed asks the enabled plugin's accessor for the key; with the plugin
// absent it returns Get's error and never calls the accessor.
func TestGetNamedAsksThePluginsAccessor(t *testing.T) {
	t.Parallel()
	var got []string
	calls := 0
	entry := func(p *fakePlugin, key string) (string, error) {
		calls++
		return p.Name() + "." + key, nil
	}
	startWithFake(t, func(app *framework.App, r chi.Router) error {
		v, err := framework.GetNamed(app, "fake", entry, "billing")
		got = append(got, v, fmt.Sprint(err))
		v, err = framework.GetNamed(app, "db", entry, "billing")
		got = append(got, v, fmt.Sprint(err))
		return nil
	})
	want := []string{"fake.billing", "<nil>", "", `plugin "db" is not enabled; add "db" to [plugins] enabled`}
	if !slices.Equal(got, want) || calls != 1 {
		t.Fatalf("got %q (accessor called %d times), want %q (once)", got, calls, want)
	}
}

// startWithFake starts an App with the fake plugin enabled and routes as
// its Routes, stopped when the test ends.
func startWithFake(t *testing.T, routes func(*framework.App, chi.Router) error) {
	t.Helper()
	app, err := jfasttest.New(t, jfasttest.Options{
		TOML:    "[plugins]\nenabled = [\"fake\"]",
		Plugins: []framework.Plugin{newFake("fake", nil)},
		Routes:  routes,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := app.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = app.Stop(context.Background()) })
}

func TestReadyRunsChecksInParallel(t *testing.T) {
	t.Parallel()
	// Each check waits until both have started: run one after the other,
	// the first would wait for the second until readiness_timeout ended it
	// (impaired), so /ready says ok only when they run at once. No clock
	// decides it, so a starved machine cannot fail it.
	var started sync.WaitGroup
	started.Add(2)
	both := make(chan struct{})
	go func() { started.Wait(); close(both) }()
	waitForOther := func(ctx context.Context) readiness.Report {
		started.Done()
		select {
		case <-both:
			return readiness.Passed("ran beside the other", nil)
		case <-ctx.Done():
			return readiness.Impaired("the other check never started beside this one", nil)
		}
	}
	a, b := newFake("a", nil), newFake("b", nil)
	a.check, b.check = waitForOther, waitForOther
	svc := jfasttest.Start(t, jfasttest.Options{
		TOML:    "[app]\nreadiness_timeout = \"10s\"\n[plugins]\nenabled = [\"a\", \"b\"]",
		Plugins: []framework.Plugin{a, b},
	})
	r := svc.Get(t, "/ready")
	if r.Status != http.StatusOK || !strings.Contains(r.String(), `"status":"ok"`) {
		t.Fatalf("/ready = %d %s: the checks did not run in parallel", r.Status, r.Body)
	}
}

func TestReadyRules(t *testing.T) {
	t.Parallel()
	hang := func(ctx context.Context) readiness.Report { <-ctx.Done(); return readiness.Report{} }
	fail := func(critical bool) func(context.Context) readiness.Report {
		return func(context.Context) readiness.Report {
			if critical {
				return readiness.Unreachable("said no", nil)
			}
			return readiness.Impaired("said no", nil)
		}
	}
	boom := func(context.Context) readiness.Report { panic("check bug") }
	cases := []struct {
		name       string
		critical   bool // declared in config
		check      func(context.Context) readiness.Report
		wantCode   int
		wantStatus readiness.Status
		wantAll    readiness.Overall
	}{
		{"fail non-critical plugin", false, fail(true), 200, readiness.Fail, readiness.Degraded},
		{"fail critical plugin, critical report", true, fail(true), 503, readiness.Fail, readiness.Unavailable},
		{"fail critical plugin, non-critical report", true, fail(false), 200, readiness.Fail, readiness.Degraded},
		{"timeout non-critical", false, hang, 200, readiness.Timeout, readiness.Degraded},
		{"timeout critical", true, hang, 503, readiness.Timeout, readiness.Unavailable},
		{"panic non-critical", false, boom, 200, readiness.Fail, readiness.Degraded},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := newFake("dep", nil)
			p.check = tc.check
			svc := jfasttest.Start(t, jfasttest.Options{
				TOML:    fmt.Sprintf("[app]\nreadiness_timeout = \"300ms\"\n[plugins]\nenabled = [\"dep\"]\n[plugin.dep]\ncritical = %v", tc.critical),
				Plugins: []framework.Plugin{p},
			})
			start := time.Now()
			r := svc.Get(t, "/ready")
			if elapsed := time.Since(start); elapsed > 300*time.Millisecond+100*time.Millisecond {
				t.Errorf("/ready took %v, more than readiness_timeout + 100ms", elapsed)
			}
			var res readiness.Result
			if err := json.Unmarshal(r.Body, &res); err != nil {
				t.Fatalf("%v: %s", err, r.Body)
			}
			c := res.Checks["dep"]
			if r.Status != tc.wantCode || res.Status != tc.wantAll || c.Status != tc.wantStatus || c.Healthy {
				t.Fatalf("/ready = %d %s", r.Status, r.Body)
			}
			if strings.Contains(r.String(), "goroutine") {
				t.Fatalf("a stack leaked into /ready: %s", r.Body)
			}
		})
	}
}

func TestPanicIsA500ProblemWithoutStack(t *testing.T) {
	t.Parallel()
	svc := jfasttest.Start(t, jfasttest.Options{Routes: func(_ *framework.App, r chi.Router) error {
		r.Get("/boom", func(http.ResponseWriter, *http.Request) { panic("secret internals") })
		return nil
	}})
	r := svc.Get(t, "/boom", requestid.Header, "trace-me-1")
	if r.Status != http.StatusInternalServerError || r.Header.Get("Content-Type") != problem.ContentType {
		t.Fatalf("status %d, type %q", r.Status, r.Header.Get("Content-Type"))
	}
	var p map[string]any
	if err := json.Unmarshal(r.Body, &p); err != nil {
		t.Fatal(err)
	}
	if p["request_id"] != "trace-me-1" || strings.Contains(r.String(), "secret") || strings.Contains(r.String(), "goroutine") {
		t.Fatalf("body = %s", r.Body)
	}
	logs := svc.Logs()
	if !strings.Contains(logs, "panic serving request") || !strings.Contains(logs, "secret internals") ||
		!strings.Contains(logs, "request_id=trace-me-1") || !strings.Contains(logs, "goroutine") {
		t.Fatalf("the panic and its stack are not in the log with the request ID:\n%s", logs)
	}
}

// TestPanicAfterTheResponseStartedAbortsIt: a handler that panics half-way
// through a chunked body cannot be answered with a problem any more; the
// connection is cut, so the client reads an error instead of a complete-looking
// 200, the panic is logged, and the access log line keeps the status that
// went out, marked aborted. A handler's own panic(http.ErrAbortHandler) is
// aborted the same way and is not logged as a panic.
func TestPanicAfterTheResponseStartedAbortsIt(t *testing.T) {
	t.Parallel()
	svc := jfasttest.Start(t, jfasttest.Options{Routes: func(_ *framework.App, r chi.Router) error {
		half := func(w http.ResponseWriter) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusOK)
			_, _ = io.WriteString(w, `[{"id":1},`)
			_ = http.NewResponseController(w).Flush()
		}
		r.Get("/export", func(w http.ResponseWriter, _ *http.Request) {
			half(w)
			var m map[string]int
			//lint:ignore SA5000 the test needs a real runtime panic half-way through the body
			m["boom"] = 1
		})
		r.Get("/proxy", func(w http.ResponseWriter, _ *http.Request) {
			half(w)
			panic(http.ErrAbortHandler)
		})
		return nil
	}})
	for _, path := range []string{"/export", "/proxy"} {
		res, err := http.Get(svc.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(res.Body)
		_ = res.Body.Close()
		if err == nil {
			t.Errorf("%s: the client read a complete %d response %q; want the connection cut", path, res.StatusCode, body)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second) // a bound on a failure only
	defer cancel()
	if err := svc.WaitLogs(ctx, func(logs string) bool {
		return strings.Count(logs, "status=200") == 2 && strings.Count(logs, "aborted=true") == 2
	}); err != nil {
		t.Fatalf("want both access log lines with status=200 aborted=true:\n%s", svc.Logs())
	}
	logs := svc.Logs()
	if n := strings.Count(logs, "panic serving request"); n != 1 || !strings.Contains(logs, "assignment to entry in nil map") {
		t.Errorf("want the handler's panic logged once (and the deliberate abort not at all), got %d:\n%s", n, logs)
	}
}

// A status net/http refuses (over 999) panics before anything is sent: the
// recovery answers a 500 problem, as for any panic before the response
// started, instead of cutting the connection of a response the recorder
// took for started.
func TestInvalidStatusIsAnsweredAsAPanic(t *testing.T) {
	t.Parallel()
	svc := jfasttest.Start(t, jfasttest.Options{Routes: func(_ *framework.App, r chi.Router) error {
		r.Get("/bad", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(1000) })
		return nil
	}})
	res, err := http.Get(svc.URL + "/bad")
	if err != nil {
		t.Fatalf("GET /bad: %v; want a 500 problem", err)
	}
	_ = res.Body.Close()
	if res.StatusCode != http.StatusInternalServerError || res.Header.Get("Content-Type") != "application/problem+json" {
		t.Fatalf("GET /bad: %d %s; want a 500 problem", res.StatusCode, res.Header.Get("Content-Type"))
	}
}

// unwrapping is what any response-wrapping middleware looks like (chi's
// middleware.WrapResponseWriter, a compressor): it unwraps to the writer it
// was given.
type unwrapping struct{ http.ResponseWriter }

func (w unwrapping) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// TestErrorAfterTheResponseStartedThroughAWrappedWriter: a handler that
// fails after it started its response, behind middleware that wraps the
// writer, has its error logged, not a problem document appended to the body
// it already sent: WriteError finds the framework's recorder through Unwrap.
// The response is aborted: the client never reads what was written as a
// whole response.
func TestErrorAfterTheResponseStartedThroughAWrappedWriter(t *testing.T) {
	t.Parallel()
	svc := jfasttest.Start(t, jfasttest.Options{Routes: func(_ *framework.App, r chi.Router) error {
		wrap := func(next http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				next.ServeHTTP(unwrapping{w}, r)
			})
		}
		r.With(wrap).Method(http.MethodGet, "/export", framework.Handler(func(w http.ResponseWriter, _ *http.Request) error {
			w.Header().Set("Content-Type", "text/csv")
			w.WriteHeader(http.StatusOK)
			_, _ = io.WriteString(w, "id,name\n1,a\n")
			return errors.New("the database went away half-way")
		}))
		return nil
	}})
	resp, err := http.Get(svc.URL + "/export")
	if err == nil {
		body, rerr := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if rerr == nil {
			t.Errorf("got %d %q read whole; want the response aborted", resp.StatusCode, body)
		}
		if strings.Contains(string(body), "Internal Server Error") {
			t.Errorf("a problem was appended to the body: %q", body)
		}
	}
	if logs := svc.Logs(); !strings.Contains(logs, "error after the response started") || !strings.Contains(logs, "the database went away half-way") || !strings.Contains(logs, "aborted=true") {
		t.Errorf("the error is not logged as one after the response started:\n%s", logs)
	}
}

// TestBodilessAnswerIsNotAborted: an answer that has no body (a 204, a
// 304) is whole once its status went out, so the error of a body write
// net/http refused (http.ErrBodyNotAllowed), returned by the handler, is
// logged and the answer still reaches the client.
func TestBodilessAnswerIsNotAborted(t *testing.T) {
	t.Parallel()
	svc := jfasttest.Start(t, jfasttest.Options{Routes: func(_ *framework.App, r chi.Router) error {
		r.Method(http.MethodDelete, "/orders/1", framework.Handler(func(w http.ResponseWriter, _ *http.Request) error {
			return framework.JSON(w, http.StatusNoContent, map[string]string{})
		}))
		r.Method(http.MethodGet, "/etag", framework.Handler(func(w http.ResponseWriter, _ *http.Request) error {
			w.Header().Set("ETag", `"v1"`)
			return framework.JSON(w, http.StatusNotModified, map[string]string{"v": "1"})
		}))
		return nil
	}})
	for _, c := range []struct {
		method, path string
		status       int
	}{{http.MethodDelete, "/orders/1", http.StatusNoContent}, {http.MethodGet, "/etag", http.StatusNotModified}} {
		if r := svc.Do(t, c.method, c.path, ""); r.Status != c.status {
			t.Errorf("%s %s: %d, want %d", c.method, c.path, r.Status, c.status)
		}
	}
}

func TestRequestDeadlineReachesTheHandler(t *testing.T) {
	t.Parallel()
	svc := jfasttest.Start(t, jfasttest.Options{
		TOML: "[app]\nrequest_timeout = \"7s\"",
		Routes: func(_ *framework.App, r chi.Router) error {
			r.Method(http.MethodGet, "/deadline", framework.Handler(func(w http.ResponseWriter, r *http.Request) error {
				d, ok := r.Context().Deadline()
				if !ok {
					return errors.New("no deadline")
				}
				return framework.JSON(w, 200, map[string]float64{"left": time.Until(d).Seconds()})
			}))
			r.Method(http.MethodGet, "/wait", framework.Handler(func(w http.ResponseWriter, r *http.Request) error {
				<-r.Context().Done()
				return r.Context().Err()
			}))
			return nil
		},
	})
	r := svc.Get(t, "/deadline")
	var body map[string]float64
	if err := json.Unmarshal(r.Body, &body); err != nil {
		t.Fatalf("%v: %s", err, r.Body)
	}
	if left := body["left"]; left <= 6 || left > 7 {
		t.Fatalf("deadline %.2fs away, want about 7s", left)
	}

	short := jfasttest.Start(t, jfasttest.Options{
		TOML: "[app]\nrequest_timeout = \"100ms\"",
		Routes: func(_ *framework.App, r chi.Router) error {
			r.Method(http.MethodGet, "/wait", framework.Handler(func(w http.ResponseWriter, r *http.Request) error {
				<-r.Context().Done()
				return r.Context().Err()
			}))
			return nil
		},
	})
	if r := short.Get(t, "/wait"); r.Status != http.StatusServiceUnavailable || r.Header.Get("Content-Type") != problem.ContentType {
		t.Fatalf("a handler past its deadline answered %d %s", r.Status, r.Body)
	}
}

func TestRequestID(t *testing.T) {
	t.Parallel()
	svc := jfasttest.Start(t, jfasttest.Options{Routes: func(_ *framework.App, r chi.Router) error {
		r.Get("/id", func(w http.ResponseWriter, r *http.Request) {
			w.Write([]byte(requestid.FromContext(r.Context())))
		})
		return nil
	}})
	long := strings.Repeat("a", 128)
	cases := []struct {
		name, inbound string
		keep          bool
	}{
		{"accepted", "req-42", true},
		{"128 characters", long, true},
		{"129 characters", long + "a", false},
		{"space", "has space", false},
		{"non-ASCII", "idé", false},
		{"tab", "a\tb", false},
		{"none", "", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var r jfasttest.Response
			if tc.inbound == "" {
				r = svc.Get(t, "/id")
			} else {
				r = svc.Get(t, "/id", requestid.Header, tc.inbound)
			}
			echoed := r.Header.Get(requestid.Header)
			if echoed != r.String() {
				t.Fatalf("echoed %q but the handler saw %q", echoed, r.Body)
			}
			if tc.keep && echoed != tc.inbound {
				t.Fatalf("inbound %q replaced by %q", tc.inbound, echoed)
			}
			if !tc.keep && (echoed == tc.inbound || !requestid.Valid(echoed)) {
				t.Fatalf("inbound %q not replaced by a fresh ID (got %q)", tc.inbound, echoed)
			}
		})
	}
}

func TestNotFoundAndMethodNotAllowedAreProblems(t *testing.T) {
	t.Parallel()
	svc := jfasttest.Start(t, jfasttest.Options{Routes: func(_ *framework.App, r chi.Router) error {
		r.Get("/orders/{id}", func(w http.ResponseWriter, r *http.Request) {})
		r.Delete("/orders/{id}", func(w http.ResponseWriter, r *http.Request) {})
		return nil
	}})
	r := svc.Get(t, "/nowhere")
	if r.Status != 404 || r.Header.Get("Content-Type") != problem.ContentType || !strings.Contains(r.String(), `"status":404`) {
		t.Fatalf("404: %d %s", r.Status, r.Body)
	}
	// The detail does not reflect the path; the instance is the path as
	// sent, a URI reference.
	r = svc.Get(t, "/%3Cscript%3E%20x")
	if !strings.Contains(r.String(), `"detail":"no route matches this path","instance":"/%3Cscript%3E%20x"`) {
		t.Fatalf("404 body: %s", r.Body)
	}
	r = svc.Do(t, http.MethodPost, "/orders/7", "{}")
	if r.Status != 405 || r.Header.Get("Content-Type") != problem.ContentType {
		t.Fatalf("405: %d %s", r.Status, r.Body)
	}
	if allow := r.Header.Get("Allow"); allow != "GET, HEAD, DELETE" && allow != "GET, DELETE" {
		t.Fatalf("Allow = %q", allow)
	}
}

func TestHandlerErrorsRenderInOnePlace(t *testing.T) {
	t.Parallel()
	svc := jfasttest.Start(t, jfasttest.Options{Routes: func(_ *framework.App, r chi.Router) error {
		r.Method(http.MethodGet, "/missing", framework.Handler(func(http.ResponseWriter, *http.Request) error {
			return fmt.Errorf("lookup: %w", problem.NotFound("no invoice for this order"))
		}))
		r.Method(http.MethodGet, "/outage", framework.Handler(func(http.ResponseWriter, *http.Request) error {
			return &problem.DependencyError{Dependency: "billing", Err: errors.New("dial tcp: refused"), RetryAfter: 3 * time.Second}
		}))
		r.Method(http.MethodGet, "/bug", framework.Handler(func(http.ResponseWriter, *http.Request) error {
			return errors.New("pq: password=hunter2 rejected")
		}))
		return nil
	}})
	if r := svc.Get(t, "/missing"); r.Status != 404 || !strings.Contains(r.String(), "no invoice for this order") {
		t.Fatalf("/missing: %d %s", r.Status, r.Body)
	}
	r := svc.Get(t, "/outage")
	if r.Status != 503 || r.Header.Get("Retry-After") != "3" || !strings.Contains(r.String(), `"dependency":"billing"`) {
		t.Fatalf("/outage: %d %v %s", r.Status, r.Header, r.Body)
	}
	r = svc.Get(t, "/bug")
	if r.Status != 500 || strings.Contains(r.String(), "hunter2") {
		t.Fatalf("/bug: %d %s", r.Status, r.Body)
	}
}

func TestGracefulShutdownFinishesInFlightRequest(t *testing.T) {
	t.Parallel()
	entered := make(chan struct{})
	release := make(chan struct{})
	var finished atomic.Bool
	app, err := jfasttest.New(t, jfasttest.Options{
		TOML: "[app]\nshutdown_timeout = \"5s\"",
		Routes: func(_ *framework.App, r chi.Router) error {
			r.Get("/slow", func(w http.ResponseWriter, r *http.Request) {
				close(entered)
				<-release
				finished.Store(true)
				w.Write([]byte("done"))
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
	url := "http://" + app.Addr()
	type result struct {
		body string
		err  error
	}
	got := make(chan result, 1)
	go func() {
		resp, err := http.Get(url + "/slow")
		if err != nil {
			got <- result{err: err}
			return
		}
		defer resp.Body.Close()
		b := make([]byte, 16)
		n, _ := resp.Body.Read(b)
		got <- result{body: string(b[:n])}
	}()
	<-entered
	stopped := make(chan error, 1)
	go func() { stopped <- app.Stop(context.Background()) }()
	// Stop waits for the in-flight request. (The test does not probe the
	// closed listener with connections of its own: a connection that sends no
	// request holds net/http's Shutdown for 5 s.)
	select {
	case err := <-stopped:
		t.Fatalf("Stop returned (%v) before the in-flight request finished", err)
	case <-time.After(200 * time.Millisecond):
	}
	close(release)
	r := <-got
	if r.err != nil || r.body != "done" || !finished.Load() {
		t.Fatalf("in-flight request: %+v", r)
	}
	if err := <-stopped; err != nil {
		t.Fatal(err)
	}
}

func TestMetricsUseRouteTemplates(t *testing.T) {
	t.Parallel()
	svc := jfasttest.Start(t, jfasttest.Options{Routes: func(_ *framework.App, r chi.Router) error {
		r.Get("/orders/{id}", func(w http.ResponseWriter, r *http.Request) {})
		return nil
	}})
	for _, id := range []string{"1", "2", "3"} {
		svc.Get(t, "/orders/"+id)
	}
	svc.Get(t, "/nope/123")
	m := svc.Get(t, "/metrics").String()
	want := `http_server_requests_total{method="GET",route="/orders/{id}",status="200"} 3`
	if !strings.Contains(m, want) {
		t.Fatalf("metrics lack %q", want)
	}
	if strings.Contains(m, "/orders/1") || strings.Contains(m, "/nope/123") {
		t.Fatal("a raw path became a label")
	}
	if !strings.Contains(m, `route="unmatched",status="404"`) || !strings.Contains(m, "go_goroutines") {
		t.Fatal("unmatched routes or runtime metrics missing")
	}
}

// TestUnmatchedUnderASubRouterIsUnmatched: a request no route matches
// under a sub-router (r.Route) is counted as route="unmatched", as at the
// top, for a 404 and a 405 alike, not under the mount's "/api/*", and
// framework.RouteTemplate says "" for it; a route that is a catch-all of its
// own ("/files/*", a mounted handler that is not a chi router) keeps its
// template.
func TestUnmatchedUnderASubRouterIsUnmatched(t *testing.T) {
	t.Parallel()
	var templates sync.Map // path → what RouteTemplate said after the handler
	record := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			next.ServeHTTP(unwrapping{w}, r) // a wrapping middleware on the way, too
			templates.Store(r.Method+" "+r.URL.Path, framework.RouteTemplate(w, r))
		})
	}
	svc := jfasttest.Start(t, jfasttest.Options{Routes: func(_ *framework.App, r chi.Router) error {
		r.Group(func(r chi.Router) {
			r.Use(record)
			r.Route("/api", func(r chi.Router) {
				r.Get("/orders/{id}", func(http.ResponseWriter, *http.Request) {})
			})
			r.Get("/files/*", func(http.ResponseWriter, *http.Request) {})
			r.Mount("/legacy", http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
		})
		return nil
	}})
	tests := []struct {
		method, path string
		status       int
		route        string // the metric's label
	}{
		{http.MethodGet, "/api/no/such/12", 404, "unmatched"},
		{http.MethodDelete, "/api/orders/1", 405, "unmatched"},
		{http.MethodGet, "/api/orders/1", 200, "/api/orders/{id}"},
		{http.MethodGet, "/files/a/b.txt", 200, "/files/*"},
		{http.MethodGet, "/legacy/anything", 200, "/legacy/*"},
	}
	for _, tt := range tests {
		if r := svc.Do(t, tt.method, tt.path, ""); r.Status != tt.status {
			t.Fatalf("%s %s = %d, want %d", tt.method, tt.path, r.Status, tt.status)
		}
		code := strconv.Itoa(tt.status)
		if n := jfasttest.Metric(t, svc.App.Metrics(), "http_server_requests_total", "method", tt.method, "route", tt.route, "status", code); n != 1 {
			t.Errorf("%s %s: requests{route=%q,status=%s} = %v, want 1", tt.method, tt.path, tt.route, code, n)
		}
		want := tt.route
		if want == "unmatched" {
			want = ""
		}
		if got, _ := templates.Load(tt.method + " " + tt.path); got != want {
			t.Errorf("%s %s: RouteTemplate = %q, want %q", tt.method, tt.path, got, want)
		}
	}
	if n, ok := jfasttest.Series(t, svc.App.Metrics(), "http_server_requests_total", "route", "/api/*"); ok {
		t.Errorf("requests{route=\"/api/*\"} = %v, want no such series", n)
	}
}

// TestPanickedRequestsAreCounted: a request whose handler panicked is in the
// request metrics with the status it went out with: the recovery's 500, or,
// for a panic after the response started (aborted), the status already sent.
// The panic still reaches the recovery, which logs it once.
func TestPanickedRequestsAreCounted(t *testing.T) {
	t.Parallel()
	svc := jfasttest.Start(t, jfasttest.Options{Routes: func(_ *framework.App, r chi.Router) error {
		r.Get("/boom", func(http.ResponseWriter, *http.Request) { panic("boom") })
		r.Get("/half", func(w http.ResponseWriter, _ *http.Request) {
			w.WriteHeader(http.StatusAccepted)
			_ = http.NewResponseController(w).Flush()
			panic("half-way")
		})
		return nil
	}})
	for range 3 {
		if r := svc.Get(t, "/boom"); r.Status != http.StatusInternalServerError {
			t.Fatalf("/boom = %d", r.Status)
		}
	}
	if res, err := http.Get(svc.URL + "/half"); err == nil {
		_, _ = io.Copy(io.Discard, res.Body)
		_ = res.Body.Close()
	}
	reg := svc.App.Metrics()
	if n := jfasttest.Metric(t, reg, "http_server_requests_total", "route", "/boom", "status", "500"); n != 3 {
		t.Errorf("requests{route=/boom,status=500} = %v, want 3", n)
	}
	if n := jfasttest.Metric(t, reg, "http_server_request_duration_seconds", "route", "/boom", "status", "500"); n != 3 {
		t.Errorf("duration{route=/boom,status=500} count = %v, want 3", n)
	}
	if n := jfasttest.Metric(t, reg, "http_server_requests_total", "route", "/half", "status", "202"); n != 1 {
		t.Errorf("requests{route=/half,status=202} = %v, want 1 (the aborted response, by the status it went out with)", n)
	}
	if n := strings.Count(svc.Logs(), "panic serving request"); n != 4 {
		t.Errorf("%d panics logged, want 4:\n%s", n, svc.Logs())
	}
}

// The framework hands chi its routing context inside the request context (see
// serveRequest): URL parameters must reach handlers, and a service mounted
// under another chi router must route the path that router left it.
func TestRoutingContext(t *testing.T) {
	t.Parallel()
	app := jfasttest.Start(t, jfasttest.Options{Routes: func(_ *framework.App, r chi.Router) error {
		r.Get("/orders/{id}", func(w http.ResponseWriter, r *http.Request) {
			io.WriteString(w, "order "+chi.URLParam(r, "id")+" via "+chi.RouteContext(r.Context()).RoutePattern())
		})
		return nil
	}})

	get := func(h http.Handler, path string) (int, string) {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, path, nil))
		return w.Code, w.Body.String()
	}
	if code, body := get(app.Router(), "/orders/42"); code != 200 || body != "order 42 via /orders/{id}" {
		t.Fatalf("direct: %d %q", code, body)
	}
	outer := chi.NewRouter()
	outer.Mount("/svc", app.Router())
	if code, body := get(outer, "/svc/orders/7"); code != 200 || body != "order 7 via /svc/orders/{id}" {
		t.Fatalf("mounted under /svc: %d %q", code, body)
	}
	if code, _ := get(outer, "/orders/7"); code != http.StatusNotFound {
		t.Fatalf("outer router served an unmounted path: %d", code)
	}
}

func TestProductionLogsAreJSONWithTheRequestID(t *testing.T) {
	t.Parallel()
	svc := jfasttest.Start(t, jfasttest.Options{TOML: "[app]\nname = \"orders\"\nenv = \"production\"\nadmin_listen = \"127.0.0.1:0\""})
	svc.Get(t, "/live", requestid.Header, "json-log-1")
	var found bool
	for _, line := range strings.Split(strings.TrimSpace(svc.Logs()), "\n") {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("a production log line is not JSON: %q", line)
		}
		if rec["msg"] == "request" && rec["request_id"] == "json-log-1" {
			found = rec["service"] == "orders" && rec["path"] == "/live" && rec["status"] == float64(200)
		}
	}
	if !found {
		t.Fatalf("no JSON access-log line for the request:\n%s", svc.Logs())
	}
}

// logSourcePlugin registers a log source, as telemetry does for trace IDs.
type logSourcePlugin struct{}

func (logSourcePlugin) Name() string { return "tracer" }
func (logSourcePlugin) Start(_ context.Context, app *framework.App) error {
	app.AddLogSource(func(ctx context.Context) []slog.Attr {
		return []slog.Attr{slog.String("trace_id", "t-"+requestid.FromContext(ctx))}
	})
	return nil
}

func TestAccessLogCarriesLogSources(t *testing.T) {
	t.Parallel()
	svc := jfasttest.Start(t, jfasttest.Options{
		TOML:    "[plugins]\nenabled = [\"tracer\"]",
		Plugins: []framework.Plugin{logSourcePlugin{}},
	})
	svc.Get(t, "/live", requestid.Header, "src-1")
	want := "msg=request service=jfast method=GET path=/live status=200"
	for _, line := range strings.Split(svc.Logs(), "\n") {
		if strings.Contains(line, want) {
			if !strings.Contains(line, "request_id=src-1") || !strings.Contains(line, "trace_id=t-src-1") {
				t.Fatalf("access log line lacks the request ID or the source's attribute: %s", line)
			}
			return
		}
	}
	t.Fatalf("no access log line:\n%s", svc.Logs())
}
