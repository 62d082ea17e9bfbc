package framework_test

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/go-chi/chi/v5"

	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/jfasttest"
	"github.com/jfastframework/jfast/readiness"
)

// internals are what a check's detail and meta may hold that the public must
// not read: an address, a user, a database name.
var internals = []string{"10.0.0.7", "5432", "orders_app", "orders_prod"}

// dbLike is a plugin whose check fails with internals in its detail and meta,
// and which serves an admin route of its own.
type dbLike struct{ critical bool }

func (dbLike) Name() string { return "dblike" }
func (p dbLike) Check(context.Context) readiness.Report {
	meta := map[string]any{"host": "10.0.0.7:5432", "user": "orders_app", "database": "orders_prod"}
	if p.critical {
		return readiness.Unreachable("connect to orders_app@10.0.0.7:5432/orders_prod: connection refused", meta)
	}
	return readiness.Impaired("connect to orders_app@10.0.0.7:5432/orders_prod: connection refused", meta)
}
func (dbLike) MountAdminRoutes(r chi.Router) {
	r.Get("/dblike/pool", func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("pool stats")) })
}

var _ framework.AdminRouteMounter = dbLike{}

func adminService(t *testing.T, toml string) *jfasttest.Service {
	t.Helper()
	return jfasttest.Start(t, jfasttest.Options{
		TOML:    "[plugins]\nenabled = [\"observability\", \"dblike\"]\n[plugin.dblike]\ncritical = true\n" + toml,
		Plugins: []framework.Plugin{dbLike{critical: true}},
		Routes: func(_ *framework.App, r chi.Router) error {
			r.Get("/orders", func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("orders")) })
			return nil
		},
		AdminRoutes: func(_ *framework.App, r chi.Router) error {
			r.Get("/debug/vars", func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("vars")) })
			return nil
		},
	})
}

// redacted checks a /ready body states each plugin's status and nothing more.
func redacted(t *testing.T, where string, r jfasttest.Response) {
	t.Helper()
	for _, leak := range internals {
		if strings.Contains(r.String(), leak) {
			t.Errorf("%s /ready leaks %q: %s", where, leak, r.Body)
		}
	}
	var body struct {
		Status  any // the number 503 in the problem+json answer
		Verdict string
		Checks  map[string]map[string]any
	}
	if err := json.Unmarshal(r.Body, &body); err != nil {
		t.Fatalf("%s /ready: %v: %s", where, err, r.Body)
	}
	c := body.Checks["dblike"]
	if body.Verdict != "unavailable" || c["status"] != "fail" || c["healthy"] != false || c["critical"] != true || len(c) != 3 {
		t.Errorf("%s /ready = %d %s, want the status per plugin and nothing else", where, r.Status, r.Body)
	}
}

func full(t *testing.T, where string, r jfasttest.Response) {
	t.Helper()
	for _, want := range append(internals, `"detail":`, `"meta":`) {
		if !strings.Contains(r.String(), want) {
			t.Errorf("%s /ready lacks %q: %s", where, want, r.Body)
		}
	}
}

func TestAdminListenerServesWhatOperatorsNeed(t *testing.T) {
	t.Parallel()
	svc := adminService(t, "[app]\nadmin_listen = \"127.0.0.1:0\"")
	if svc.AdminURL == "" || svc.AdminURL == svc.URL {
		t.Fatalf("AdminURL = %q (URL %q)", svc.AdminURL, svc.URL)
	}
	svc.Get(t, "/orders") // a request the metrics count

	// The public listener: the service, /live, a redacted /ready; no admin routes.
	if r := svc.Get(t, "/orders"); r.Status != 200 || r.String() != "orders" {
		t.Errorf("public /orders = %d %s", r.Status, r.Body)
	}
	if r := svc.Get(t, "/live"); r.Status != 200 {
		t.Errorf("public /live = %d", r.Status)
	}
	r := svc.Get(t, "/ready")
	if r.Status != http.StatusServiceUnavailable {
		t.Errorf("public /ready = %d, want the same 503 as the details say", r.Status)
	}
	redacted(t, "public", r)
	for _, path := range []string{"/metrics", "/debug/vars", "/dblike/pool"} {
		if r := svc.Get(t, path); r.Status != http.StatusNotFound {
			t.Errorf("public %s = %d, want 404: it lives on the admin listener", path, r.Status)
		}
	}

	// The admin listener: /live, the full /ready, /metrics, the plugins' and
	// the service's admin routes; not the service's routes.
	if r := svc.AdminGet(t, "/live"); r.Status != 200 {
		t.Errorf("admin /live = %d", r.Status)
	}
	r = svc.AdminGet(t, "/ready")
	if r.Status != http.StatusServiceUnavailable {
		t.Errorf("admin /ready = %d", r.Status)
	}
	full(t, "admin", r)
	if r := svc.AdminGet(t, "/metrics"); r.Status != 200 || !strings.Contains(r.String(), `http_server_requests_total{method="GET",route="/orders",status="200"} 2`) {
		t.Errorf("admin /metrics = %d, want the public requests counted:\n%.2000s", r.Status, r.Body)
	}
	if r := svc.AdminGet(t, "/debug/vars"); r.Status != 200 || r.String() != "vars" {
		t.Errorf("admin /debug/vars = %d %s", r.Status, r.Body)
	}
	if r := svc.AdminGet(t, "/dblike/pool"); r.Status != 200 || r.String() != "pool stats" {
		t.Errorf("admin /dblike/pool = %d %s", r.Status, r.Body)
	}
	if r := svc.AdminGet(t, "/orders"); r.Status != http.StatusNotFound || r.Header.Get("Content-Type") != "application/problem+json" {
		t.Errorf("admin /orders = %d %s, want a 404 problem", r.Status, r.Body)
	}
	if r := svc.AdminGet(t, "/live", "X-Request-ID", "admin-req-1"); r.Header.Get("X-Request-ID") != "admin-req-1" {
		t.Errorf("the admin listener lacks the framework's middleware: X-Request-ID %q", r.Header.Get("X-Request-ID"))
	}
}

// Without an admin listener, production redacts the public /ready; /metrics
// and the admin routes stay where they were.
func TestProductionWithoutAdminListenerRedactsReady(t *testing.T) {
	t.Parallel()
	svc := adminService(t, "[app]\nenv = \"production\"")
	if svc.AdminURL != "" || svc.AdminAddr() != "" || svc.AdminRouter() != nil {
		t.Fatalf("an admin listener without admin_listen: %q", svc.AdminURL)
	}
	redacted(t, "production", svc.Get(t, "/ready"))
	for _, path := range []string{"/metrics", "/debug/vars", "/dblike/pool"} {
		if r := svc.Get(t, path); r.Status != 200 {
			t.Errorf("%s = %d, want it on the public listener without admin_listen", path, r.Status)
		}
	}
}

func TestDevelopmentWithoutAdminListenerShowsDetails(t *testing.T) {
	t.Parallel()
	svc := adminService(t, "")
	full(t, "development", svc.Get(t, "/ready"))
}

func TestAdminListenValidation(t *testing.T) {
	t.Parallel()
	for toml, want := range map[string]string{
		"[app]\nadmin_listen = \"9000\"":           `must be host:port, got "9000"`,
		"[app]\nadmin_listen = \"127.0.0.1:8000\"": "must differ from app.listen",
	} {
		errs := configErrors(t, jfasttest.Options{TOML: toml, Env: map[string]string{"JFAST_APP_LISTEN": "127.0.0.1:8000"}})
		if e, ok := errs["app.admin_listen"]; !ok || !strings.Contains(e.Problem, want) {
			t.Errorf("%s: errors = %v, want %q", toml, errs, want)
		}
	}
	// A deploy key: the environment wins over the file, with a warning.
	logs := &jfasttest.Logs{}
	app, err := framework.New(framework.Options{
		ConfigText: "[app]\nadmin_listen = \"127.0.0.1:9000\"",
		Environ:    []string{"JFAST_APP_ADMIN_LISTEN=127.0.0.1:9100"},
		LogOutput:  logs,
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := app.Config().AdminListen; got != "127.0.0.1:9100" || !strings.Contains(logs.String(), "JFAST_APP_ADMIN_LISTEN") {
		t.Errorf("admin_listen = %q, logs:\n%s", got, logs)
	}
}

// The admin listener stops with the App, and a port already taken fails the
// start naming the key.
func TestAdminListenerLifecycle(t *testing.T) {
	t.Parallel()
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	app, err := jfasttest.New(t, jfasttest.Options{TOML: "[app]\nadmin_listen = \"" + taken.Addr().String() + "\""})
	if err != nil {
		t.Fatal(err)
	}
	if err := app.Start(context.Background()); err == nil || !strings.Contains(err.Error(), "(app.admin_listen)") {
		t.Fatalf("start on a taken admin port = %v", err)
	}
	if app.Addr() != "" {
		// The public listener opened before the admin one failed is closed again.
		if c, err := net.Dial("tcp", app.Addr()); err == nil {
			c.Close()
			t.Error("the public listener stays open after the admin listener failed")
		}
	}

	svc := adminService(t, "[app]\nadmin_listen = \"127.0.0.1:0\"")
	addr := svc.AdminAddr()
	if err := svc.App.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if c, err := net.Dial("tcp", addr); err == nil {
		c.Close()
		t.Errorf("the admin listener %s still accepts after Stop", addr)
	}
}
