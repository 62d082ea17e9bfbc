package framework_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/jfasttest"
	"github.com/jfastframework/jfast/problem"
)

// gate is a handler that holds its request until the test opens it.
type gate struct {
	entered chan struct{}
	open    chan struct{}
}

func newGate() *gate { return &gate{entered: make(chan struct{}, 16), open: make(chan struct{})} }

func (g *gate) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	g.entered <- struct{}{}
	select {
	case <-g.open:
	case <-r.Context().Done():
	}
	w.WriteHeader(http.StatusNoContent)
}

// overloadSetup starts a service whose limit is one request, with the given
// queue, a gated GET /slow, a gated POST /pay and whatever routes adds.
func overloadSetup(t *testing.T, queue string, extra string, routes func(r chi.Router)) (*jfasttest.Service, *gate) {
	t.Helper()
	g := newGate()
	svc := jfasttest.Start(t, jfasttest.Options{
		TOML: "[app.overload]\ninitial_limit = 1\nmin_limit = 1\nmax_limit = 1\nqueue = " + queue + "\nqueue_timeout = \"30s\"\n" + extra,
		Routes: func(_ *framework.App, r chi.Router) error {
			r.Method(http.MethodGet, "/slow", g)
			r.Method(http.MethodPost, "/pay", g)
			if routes != nil {
				routes(r)
			}
			return nil
		},
	})
	t.Cleanup(func() {
		select {
		case <-g.open:
		default:
			close(g.open)
		}
	})
	return svc, g
}

// sendAsync sends a request in the background and returns its response's
// status, or 0 when it failed.
func sendAsync(svc *jfasttest.Service, method, path string) <-chan *http.Response {
	out := make(chan *http.Response, 1)
	go func() {
		req, _ := http.NewRequest(method, svc.URL+path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			out <- nil
			return
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		out <- resp
	}()
	return out
}

// waitFor waits until cond holds, failing the test if it does not within
// 10 s (the event it stands for is a request arriving on loopback).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited 10s for %s", what)
		}
		runtime.Gosched()
	}
}

// waitQueued waits until n requests wait in the front door's queue.
func waitQueued(t *testing.T, svc *jfasttest.Service, n int) {
	t.Helper()
	waitFor(t, "the queue", func() bool { return svc.Overload().State().Queued == n })
}

func TestShedIs503ProblemWithRetryAfterAndHealthIsNeverShed(t *testing.T) {
	t.Parallel()
	svc, g := overloadSetup(t, "0", "", func(r chi.Router) {
		r.Method(http.MethodGet, "/tail", framework.WithPriority(framework.PriorityExempt, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {})))
	})
	first := sendAsync(svc, http.MethodGet, "/slow")
	<-g.entered

	r := svc.Get(t, "/slow")
	if r.Status != http.StatusServiceUnavailable || r.Header.Get("Content-Type") != problem.ContentType || r.Header.Get("Retry-After") != "1" {
		t.Fatalf("over the limit: %d %q Retry-After %q, want 503 problem+json with Retry-After 1", r.Status, r.Header.Get("Content-Type"), r.Header.Get("Retry-After"))
	}
	var body map[string]any
	if err := json.Unmarshal(r.Body, &body); err != nil || !strings.Contains(body["detail"].(string), "was not started") || body["request_id"] == nil {
		t.Fatalf("body %s", r.Body)
	}
	for _, path := range []string{"/live", "/ready", "/metrics", "/tail"} {
		if got := svc.Get(t, path).Status; got != http.StatusOK {
			t.Errorf("%s answered %d while the limit is full, want 200", path, got)
		}
	}
	metrics := svc.Get(t, "/metrics").String()
	for _, want := range []string{
		`jfast_overload_shed_total{class="normal",reason="queue_full"} 1`,
		"jfast_overload_limit 1",
		"jfast_overload_inflight 1",
		"jfast_overload_spare_total 0", // max_limit = 1: no slot over it
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	close(g.open)
	if resp := <-first; resp == nil || resp.StatusCode != http.StatusNoContent {
		t.Fatalf("the admitted request: %v", resp)
	}
	// A shed request is logged in aggregate (the first at once), not with
	// an access log line of its own.
	if logs := svc.Logs(); !strings.Contains(logs, `msg="requests shed"`) || !strings.Contains(logs, "count=1 reason=queue_full limit=1 status=503") || strings.Contains(logs, "path=/slow status=503") {
		t.Fatalf("want one \"requests shed\" line with count=1 and no access log line for the shed request:\n%s", logs)
	}
}

func TestCriticalRouteTakesTheQueuedPlace(t *testing.T) {
	t.Parallel()
	svc, g := overloadSetup(t, "1", "critical = [\"POST /pay\"]\n", nil)
	first := sendAsync(svc, http.MethodGet, "/slow")
	<-g.entered
	normal := sendAsync(svc, http.MethodGet, "/slow")
	waitQueued(t, svc, 1)
	crit := sendAsync(svc, http.MethodPost, "/pay")
	if resp := <-normal; resp == nil || resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("the queued normal request: %v, want 503 when a critical one takes its place", resp)
	}
	waitQueued(t, svc, 1)
	close(g.open)
	for _, ch := range []<-chan *http.Response{first, crit} {
		if resp := <-ch; resp == nil || resp.StatusCode != http.StatusNoContent {
			t.Fatalf("got %v, want 204", resp)
		}
	}
	if s := svc.Overload().State().Shed["queue_full"]; s["normal"] != 1 || s["critical"] != 0 {
		t.Fatalf("shed %v", s)
	}
}

func TestStreamContextFreesTheSlot(t *testing.T) {
	t.Parallel()
	streaming := make(chan struct{})
	svc, g := overloadSetup(t, "0", "", func(r chi.Router) {
		r.Method(http.MethodGet, "/stream", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			ctx := framework.StreamContext(r)
			close(streaming)
			<-ctx.Done()
		}))
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, svc.URL+"/stream", nil)
	go func() {
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	<-streaming
	admitted := sendAsync(svc, http.MethodGet, "/slow")
	<-g.entered // admitted while the stream runs: the stream holds no slot
	close(g.open)
	if resp := <-admitted; resp == nil || resp.StatusCode != http.StatusNoContent {
		t.Fatalf("got %v", resp)
	}
}

func TestClientGoneIs499AtInfoNotAnError(t *testing.T) {
	t.Parallel()
	entered := make(chan struct{})
	svc := jfasttest.Start(t, jfasttest.Options{
		Routes: func(_ *framework.App, r chi.Router) error {
			r.Method(http.MethodGet, "/wait", framework.Handler(func(_ http.ResponseWriter, r *http.Request) error {
				close(entered)
				<-r.Context().Done()
				return r.Context().Err() // what a handler whose calls failed with its context returns
			}))
			return nil
		},
	})
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, svc.URL+"/wait", nil)
	done := make(chan error, 1)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		done <- err
	}()
	<-entered
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("client: %v", err)
	}
	waitFor(t, "the access log line", func() bool { return strings.Contains(svc.Logs(), "path=/wait status=499") })
	logs := svc.Logs()
	if strings.Contains(logs, "level=ERROR") || strings.Contains(logs, "status=500") {
		t.Fatalf("a client that went away was logged as an error:\n%s", logs)
	}
	if m := svc.Get(t, "/metrics").String(); !strings.Contains(m, `http_server_requests_total{method="GET",route="/wait",status="499"} 1`) {
		t.Fatalf("the 499 is not counted:\n%s", m)
	}
}

func TestOverloadConfigErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ toml, key string }{
		{"min_limit = 0", "app.overload.min_limit"},
		{"max_limit = 1", "app.overload.max_limit"}, // below min_limit (2)
		{"initial_limit = 2000", "app.overload.initial_limit"},
		{"tolerance = 0.9", "app.overload.tolerance"},
		{"window = \"0s\"", "app.overload.window"},
		{"max_cpu_wait = \"0s\"", "app.overload.max_cpu_wait"},
		{"baseline_window = \"500ms\"", "app.overload.baseline_window"},
		{"queue = -1", "app.overload.queue"},
		{"queue_timeout = \"0s\"", "app.overload.queue_timeout"},
		{"retry_after = \"100ms\"", "app.overload.retry_after"},
		{"critical = [\"orders\"]", "app.overload.critical"},
		{"critical = [\"FETCH /orders\"]", "app.overload.critical"},
		{"critical = [\"/a\"]\nsheddable = [\"/a\"]", "app.overload.sheddable"},
	} {
		errs := jfasttest.ConfigErrors(t, jfasttest.Options{TOML: "[app.overload]\n" + tc.toml})
		if _, ok := errs.For(tc.key); !ok {
			t.Errorf("%s: no error for %s, got %v", tc.toml, tc.key, errs)
		}
	}
}

// The fix offered for initial_limit is a value the limits allow, and with
// min_limit over max_limit only max_limit is wrong: no initial_limit fits.
// The overload's spans of time are not called deadlines.
func TestOverloadConfigFixes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ toml, key, fix string }{
		{"min_limit = 30", "app.overload.initial_limit", "set initial_limit = 30"},
		{"max_limit = 10", "app.overload.initial_limit", "set initial_limit = 10"},
		{"initial_limit = 2000", "app.overload.initial_limit", "set initial_limit = 20"},
		{"max_limit = 1", "app.overload.max_limit", "set max_limit = 1000"},
		{"window = \"0s\"", "app.overload.window", `set a duration such as "100ms" or a number of seconds`},
		{"max_cpu_wait = \"-1s\"", "app.overload.max_cpu_wait", `set a duration such as "10ms" or a number of seconds`},
		{"queue_timeout = \"0s\"", "app.overload.queue_timeout", `set a duration such as "50ms" or a number of seconds`},
		{"baseline_window = \"0s\"", "app.overload.baseline_window", `set a duration such as "30s" or a number of seconds`},
	} {
		errs := jfasttest.ConfigErrors(t, jfasttest.Options{TOML: "[app.overload]\n" + tc.toml})
		if e, ok := errs.For(tc.key); !ok || e.Fix != tc.fix {
			t.Errorf("%s: %v, want the fix %q for %s", tc.toml, errs, tc.fix, tc.key)
		}
	}
	jfasttest.ConfigErrors(t, jfasttest.Options{TOML: "[app.overload]\nmax_limit = 1"}).Only(t, "app.overload.max_limit")
}

// A route is in two lists when the front door would read two entries as
// the same route, however they are written, and when a pattern alone (every
// method) covers an entry with a method: either way the config says two things
// about one route, and the boot is refused naming both keys.
func TestOverloadRouteInTwoLists(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, toml string
		key, want  string // key "" means the config is valid
	}{
		{"same entry", `critical = ["/a"]` + "\n" + `sheddable = ["/a"]`,
			"app.overload.sheddable", `"/a" is also in app.overload.critical`},
		{"spaces inside", `critical = ["GET  /work"]` + "\n" + `sheddable = ["GET /work"]`,
			"app.overload.sheddable", `"GET /work" is also in app.overload.critical, written "GET  /work"`},
		{"spaces around", `critical = [" GET /work "]` + "\n" + `exempt = ["GET /work"]`,
			"app.overload.exempt", `"GET /work" is also in app.overload.critical, written " GET /work "`},
		{"every method first", `critical = ["/crit"]` + "\n" + `exempt = ["GET /crit"]`,
			"app.overload.exempt", `"GET /crit" is also in app.overload.critical, whose "/crit" is every method`},
		{"every method second", `critical = ["GET /crit"]` + "\n" + `sheddable = [" /crit"]`,
			"app.overload.sheddable", `" /crit" is every method, "GET /crit" among them, which is in app.overload.critical`},
		{"two methods", `critical = ["GET /a"]` + "\n" + `sheddable = ["POST /a"]`, "", ""},
		{"one list twice", `critical = ["/a", "GET /a", "GET  /a"]`, "", ""},
		{"other pattern", `critical = ["/a"]` + "\n" + `sheddable = ["GET /a/b"]`, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			errs := jfasttest.ConfigErrors(t, jfasttest.Options{TOML: "[app.overload]\n" + tc.toml})
			if tc.key == "" {
				if len(errs) > 0 {
					t.Fatalf("refused: %v", errs)
				}
				return
			}
			e, ok := errs.For(tc.key)
			if !ok || e.Problem != tc.want {
				t.Fatalf("error for %s = %q, want %q (all: %v)", tc.key, e.Problem, tc.want, errs)
			}
			if len(errs) != 1 {
				t.Fatalf("%d errors, want one: %v", len(errs), errs)
			}
		})
	}
}

func TestUnknownPriorityRouteFailsTheStart(t *testing.T) {
	t.Parallel()
	app, err := jfasttest.New(t, jfasttest.Options{TOML: "[app.overload]\ncritical = [\"POST /nowhere\"]"})
	if err != nil {
		t.Fatal(err)
	}
	err = app.Start(context.Background())
	if err == nil {
		_ = app.Stop(context.Background())
		t.Fatal("started with a critical route nothing mounts")
	}
	if !strings.Contains(err.Error(), "app.overload.critical") {
		t.Fatalf("error %v does not name the key", err)
	}
}

func TestOverloadCanBeTurnedOff(t *testing.T) {
	t.Parallel()
	svc := jfasttest.Start(t, jfasttest.Options{TOML: "[app.overload]\nenabled = false"})
	if svc.Overload() != nil {
		t.Fatal("a limiter with enabled = false")
	}
	if m := svc.Get(t, "/metrics").String(); strings.Contains(m, "jfast_overload_limit") {
		t.Fatal("overload metrics without a limiter")
	}
}

// The status page's front-door card shows the limit, what is in flight and
// what was shed.
func TestStatusPageShowsTheFrontDoor(t *testing.T) {
	t.Parallel()
	svc, g := overloadSetup(t, "0", "[app]\nadmin_listen = \"127.0.0.1:0\"\n", nil)
	first := sendAsync(svc, http.MethodGet, "/slow")
	<-g.entered
	if r := svc.Get(t, "/slow"); r.Status != http.StatusServiceUnavailable {
		t.Fatalf("over the limit: %d", r.Status)
	}
	page := svc.AdminGet(t, "/status").String()
	for _, want := range []string{`id="front-door"`, `<span class="fd-inflight">1</span> of <span class="fd-limit">1</span>`, `<span class="fd-shed">queue_full 1</span>`} {
		if !strings.Contains(page, want) {
			t.Errorf("the status page lacks %s", want)
		}
	}
	close(g.open)
	<-first
}

// A value the file gives with another TOML type than its key's is refused,
// naming what to write, not read weakly (true as 1, 2.5 as 2, "3" as 3, a
// string as a one-entry list); the environment's values, which are all
// text, are read as the key's type.
func TestFileValuesOfAnotherTypeAreRefused(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ toml, key, problem string }{
		{"[app.overload]\nqueue = true", "app.overload.queue", "must be an integer, got true"},
		{"[app.overload]\nqueue = 2.5", "app.overload.queue", "must be an integer, got 2.5"},
		{"[app.overload]\nqueue = \"3\"", "app.overload.queue", `must be an integer, got "3"`},
		{"[app.overload]\nenabled = 1", "app.overload.enabled", "must be true or false, got 1"},
		{"[app.overload]\nenabled = \"true\"", "app.overload.enabled", `must be true or false, got "true"`},
		{"[app.overload]\ncritical = \"/a\"", "app.overload.critical", "must be a list"},
		{"[app.overload]\ncritical = [\"/a\", 1]", "app.overload.critical", "each entry must be a string, got 1"},
		{"[app]\nlog_level = 1", "app.log_level", "must be a string, got 1"},
	} {
		errs := jfasttest.ConfigErrors(t, jfasttest.Options{TOML: tc.toml})
		e, ok := errs.For(tc.key)
		if !ok || !strings.Contains(e.Problem, tc.problem) || e.Fix == "" {
			t.Errorf("%q: %v, want %s: %s with a fix", tc.toml, errs, tc.key, tc.problem)
		}
	}
	// A number where a float goes is one, and the environment's text is
	// read as the key's type.
	app, err := jfasttest.New(t, jfasttest.Options{
		TOML: "[app.overload]\ntolerance = 2",
		Env:  map[string]string{"JFAST_APP_OVERLOAD__QUEUE": "3", "JFAST_APP_OVERLOAD__ENABLED": "true", "JFAST_APP_OVERLOAD__CRITICAL": "/a,/b"},
	})
	if err != nil {
		t.Fatalf("an integer for a float and the environment's text: %v", err)
	}
	if o := app.Config().Overload; o.Tolerance != 2 || o.Queue != 3 || !o.Enabled || len(o.Critical) != 2 {
		t.Fatalf("read as %+v", o)
	}
}

// A path with escapes net/http would not write (/liv%65, /tai%6c) is routed
// on as the client wrote it, to /{slug} here, not to the exempt route it
// decodes to: the front door classes it by the route that serves it, so it
// is limited like that route and shed while the limit is full.
func TestEscapedPathIsClassedByTheRouteThatServesIt(t *testing.T) {
	t.Parallel()
	served := make(chan string, 16)
	svc, g := overloadSetup(t, "0", "exempt = [\"GET /reports/export\"]\n", func(r chi.Router) {
		r.Method(http.MethodGet, "/tail", framework.WithPriority(framework.PriorityExempt, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {})))
		r.Get("/reports/export", func(w http.ResponseWriter, _ *http.Request) {})
		r.Get("/reports/{id}", func(w http.ResponseWriter, r *http.Request) { served <- "/reports/{id}" })
		r.Get("/{slug}", func(w http.ResponseWriter, r *http.Request) { served <- "/{slug}" })
	})
	first := sendAsync(svc, http.MethodGet, "/slow")
	<-g.entered
	for _, path := range []string{"/liv%65", "/rea%64y", "/metric%73", "/tai%6c", "/reports/expor%74"} {
		if r := svc.Get(t, path); r.Status != http.StatusServiceUnavailable {
			t.Errorf("GET %s with the limit full = %d, want 503: it is served by a limited route", path, r.Status)
		}
	}
	for _, path := range []string{"/live", "/tail", "/reports/export"} {
		if got := svc.Get(t, path).Status; got != http.StatusOK {
			t.Errorf("%s answered %d while the limit is full, want 200", path, got)
		}
	}
	close(g.open)
	if resp := <-first; resp == nil || resp.StatusCode != http.StatusNoContent {
		t.Fatalf("the admitted request: %v", resp)
	}
	// Admitted, they reach the routes chi gives them.
	for path, want := range map[string]string{"/liv%65": "/{slug}", "/reports/expor%74": "/reports/{id}"} {
		if r := svc.Get(t, path); r.Status != http.StatusOK || <-served != want {
			t.Errorf("GET %s = %d, want 200 from %s", path, r.Status, want)
		}
	}
}

// The file wins over WithPriority for the routes it names, a pattern alone
// as well as a method and pattern; the framework's own exempt routes stay
// exempt whatever the file says.
func TestFileClassWinsOverWithPriority(t *testing.T) {
	t.Parallel()
	exempt := framework.WithPriority(framework.PriorityExempt, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	for _, list := range []string{`sheddable = ["/tail", "/live"]`, `sheddable = ["GET /tail", "GET /live"]`} {
		svc, g := overloadSetup(t, "0", list+"\n", func(r chi.Router) { r.Method(http.MethodGet, "/tail", exempt) })
		first := sendAsync(svc, http.MethodGet, "/slow")
		<-g.entered
		if got := svc.Get(t, "/tail").Status; got != http.StatusServiceUnavailable {
			t.Errorf("%s: GET /tail (WithPriority exempt) with the limit full = %d, want 503: the file makes it sheddable", list, got)
		}
		if got := svc.Get(t, "/live").Status; got != http.StatusOK {
			t.Errorf("%s: GET /live with the limit full = %d, want 200: never limited", list, got)
		}
		close(g.open)
		<-first
	}
}

// A request shed (or whose caller's time is spent) is answered at once even
// when it declares a body it holds back: the answer closes the connection,
// so net/http does not first wait, up to the request's deadline (30 s by
// default), for a body nobody reads.
func TestRefusalWithAHeldBackBodyIsAnsweredAtOnce(t *testing.T) {
	t.Parallel()
	const requestTimeout = 30 * time.Second // the default: what the answer must come well before
	svc, g := overloadSetup(t, "0", "", nil)
	first := sendAsync(svc, http.MethodGet, "/slow")
	<-g.entered
	for _, head := range []string{
		"POST /pay HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n",
		"POST /pay HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n",
		"POST /pay HTTP/1.1\r\nHost: x\r\nJfast-Timeout-Ms: 0\r\nContent-Length: 100\r\n\r\n",
	} {
		conn, err := net.Dial("tcp", strings.TrimPrefix(svc.URL, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		_ = conn.SetDeadline(time.Now().Add(requestTimeout / 3))
		if _, err := io.WriteString(conn, head); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatalf("%q: no answer before a third of the request's deadline: %v", head, err)
		}
		if resp.StatusCode != http.StatusServiceUnavailable || !resp.Close {
			t.Errorf("%q: %d close=%v, want a 503 closing the connection", head, resp.StatusCode, resp.Close)
		}
		_ = conn.Close()
	}
	close(g.open)
	<-first
}

// Mounted under another router (outer.Mount("/svc", app.Router())), a
// request is classed by the path left to route, as the App's router routes
// it: /svc/live is /live, never limited; and a subrouter's root route
// ("/grp/") keeps its class for the path without the slash ("/grp"), which
// the router serves with it.
func TestClassOfMountedAndSlashlessPaths(t *testing.T) {
	t.Parallel()
	svc, g := overloadSetup(t, "0", "exempt = [\"GET /grp/\"]\n", func(r chi.Router) {
		r.Route("/grp", func(r chi.Router) {
			r.Get("/", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "grp-root") })
		})
	})
	outer := chi.NewRouter()
	outer.Mount("/svc", svc.App.Router())
	srv := httptest.NewServer(outer)
	t.Cleanup(srv.Close)
	first := sendAsync(svc, http.MethodGet, "/slow")
	<-g.entered
	get := func(url string) int {
		resp, err := http.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		return resp.StatusCode
	}
	for url, want := range map[string]int{
		svc.URL + "/grp":       200, // the root route's class, exempt
		svc.URL + "/grp/":      200,
		srv.URL + "/svc/live":  200,
		srv.URL + "/svc/ready": 200,
		srv.URL + "/svc/grp/":  200,
		srv.URL + "/svc/slow":  503, // limited, and the limit is full
	} {
		if got := get(url); got != want {
			t.Errorf("GET %s with the limit full = %d, want %d", url, got, want)
		}
	}
	close(g.open)
	<-first
}
