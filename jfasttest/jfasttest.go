package jfasttest

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/framework/resilience"
)

// Options describe the service under test.
type Options struct {
	// TOML is the jfast.toml text. Empty means defaults only.
	TOML string
	// Plugins compiled into the service (observability is always there).
	Plugins []framework.Plugin
	// Routes mounts the service's routes, as in framework.Options.
	Routes func(app *framework.App, r chi.Router) error
	// AdminRoutes mounts the service's admin routes, as in framework.Options.
	AdminRoutes func(app *framework.App, r chi.Router) error
	// Env holds JFAST_* variables; the process environment is not read, so tests
	// do not depend on the machine's. JFAST_APP_LISTEN defaults to 127.0.0.1:0.
	Env map[string]string
	// Clock replaces the real clock for every plugin's breakers, budgets and
	// timers (see NewClock).
	Clock resilience.Clock
}

// Service is a started App with its base URL and captured logs.
type Service struct {
	*framework.App
	// URL is "http://127.0.0.1:PORT".
	URL string
	// AdminURL is the admin listener's "http://127.0.0.1:PORT" when the
	// configuration sets app.admin_listen (use "127.0.0.1:0"), else "".
	AdminURL string
	logs     *Logs
}

// Logs is a concurrency-safe buffer of everything the App logged.
type Logs struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	changed chan struct{} // closed by the next write; nil while nobody waits
}

func (l *Logs) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.changed != nil {
		close(l.changed)
		l.changed = nil
	}
	return l.buf.Write(p)
}

// Wait returns once ok holds of the logs so far, looking again at every
// write, or ctx's error when ctx ends first: a test waits for a line the
// service logs in the background (after a call was answered) as an event.
func (l *Logs) Wait(ctx context.Context, ok func(logs string) bool) error {
	for {
		l.mu.Lock()
		if ok(l.buf.String()) {
			l.mu.Unlock()
			return nil
		}
		if l.changed == nil {
			l.changed = make(chan struct{})
		}
		changed := l.changed
		l.mu.Unlock()
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// String returns the logs so far.
func (l *Logs) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// Logs returns what the service logged so far.
func (s *Service) Logs() string { return s.logs.String() }

// WaitLogs waits until ok holds of what the service logged (see [Logs.Wait]).
func (s *Service) WaitLogs(ctx context.Context, ok func(logs string) bool) error {
	return s.logs.Wait(ctx, ok)
}

func (o Options) framework(logs io.Writer) framework.Options {
	env := []string{"JFAST_APP_LISTEN=127.0.0.1:0"}
	for k, v := range o.Env {
		env = append(env, k+"="+v)
	}
	return framework.Options{
		Plugins:     o.Plugins,
		Routes:      o.Routes,
		AdminRoutes: o.AdminRoutes,
		ConfigText:  o.TOML + "\n",
		Environ:     env,
		LogOutput:   logs,
		Clock:       o.Clock,
	}
}

// New builds the App without starting it, returning the configuration error if any
// (for tests of boot validation).
func New(t testing.TB, o Options) (*framework.App, error) {
	t.Helper()
	return framework.New(o.framework(&Logs{}))
}

// Start builds and starts the App on a free loopback port and stops it (gracefully,
// within app.shutdown_timeout) when the test ends. A configuration or start error
// fails the test.
func Start(t testing.TB, o Options) *Service {
	t.Helper()
	logs := &Logs{}
	app, err := framework.New(o.framework(logs))
	if err != nil {
		t.Fatalf("jfasttest: configuration: %v", err)
	}
	if err := app.Start(context.Background()); err != nil {
		t.Fatalf("jfasttest: start: %v\nlogs:\n%s", err, logs)
	}
	t.Cleanup(func() {
		if err := app.Stop(context.Background()); err != nil {
			t.Errorf("jfasttest: stop: %v", err)
		}
	})
	svc := &Service{App: app, URL: "http://" + app.Addr(), logs: logs}
	if addr := app.AdminAddr(); addr != "" {
		svc.AdminURL = "http://" + addr
	}
	return svc
}

// Response is a response read completely.
type Response struct {
	Status int
	Header http.Header
	Body   []byte
}

// String returns the body as text.
func (r Response) String() string { return string(r.Body) }

// Do sends a request to the service and reads the whole response. headers are
// name, value pairs. A transport error fails the test.
func (s *Service) Do(t testing.TB, method, path string, body string, headers ...string) Response {
	t.Helper()
	return do(t, s.URL, method, path, body, headers...)
}

// AdminGet is Get on the admin listener (app.admin_listen). A service without
// one fails the test.
func (s *Service) AdminGet(t testing.TB, path string, headers ...string) Response {
	t.Helper()
	if s.AdminURL == "" {
		t.Fatal("jfasttest: AdminGet on a service without app.admin_listen")
	}
	return do(t, s.AdminURL, http.MethodGet, path, "", headers...)
}

func do(t testing.TB, base, method, path string, body string, headers ...string) Response {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, base+path, rd)
	if err != nil {
		t.Fatalf("jfasttest: %v", err)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		if strings.EqualFold(headers[i], "Host") {
			req.Host = headers[i+1] // net/http sends req.Host, not a Host header
			continue
		}
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("jfasttest: %s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("jfasttest: read %s %s: %v", method, path, err)
	}
	return Response{Status: resp.StatusCode, Header: resp.Header, Body: b}
}

// Get is Do with GET and no body.
func (s *Service) Get(t testing.TB, path string, headers ...string) Response {
	t.Helper()
	return s.Do(t, http.MethodGet, path, "", headers...)
}

// NewClock returns a test clock that starts at a fixed instant; tests move it with
// Advance instead of sleeping.
func NewClock() *resilience.TestClock {
	return resilience.NewTestClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
}
