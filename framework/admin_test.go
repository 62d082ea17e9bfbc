package framework_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net"
	"net/http"
	"slices"
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
// and the admin routes stay where they were when public_admin_routes says so.
func TestProductionWithoutAdminListenerRedactsReady(t *testing.T) {
	t.Parallel()
	svc := adminService(t, "[app]\nenv = \"production\"\npublic_admin_routes = true")
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

// In production, admin routes on the public listener refuse to boot, naming
// both fixes: an admin listener, or public_admin_routes on purpose. Without
// any admin route (observability not enabled, no AdminRoutes) nothing is
// refused; development is unchanged.
func TestProductionPublicAdminRoutesRefused(t *testing.T) {
	t.Parallel()
	errs := configErrors(t, jfasttest.Options{TOML: "[app]\nenv = \"production\""})
	e, ok := errs["app.admin_listen"]
	if !ok || !strings.Contains(e.Problem, "observability") || !strings.Contains(e.Fix, `admin_listen = "127.0.0.1:9000"`) || !strings.Contains(e.Fix, "public_admin_routes = true") {
		t.Fatalf("errors = %v", errs)
	}
	admin := func(*framework.App, chi.Router) error { return nil }
	errs = configErrors(t, jfasttest.Options{TOML: "[app]\nenv = \"production\"\n[plugins]\nenabled = []", AdminRoutes: admin})
	if e, ok := errs["app.admin_listen"]; !ok || !strings.Contains(e.Problem, "AdminRoutes") {
		t.Fatalf("the service's admin routes: errors = %v", errs)
	}
	for _, toml := range []string{
		"[app]\nenv = \"production\"\nadmin_listen = \"127.0.0.1:9000\"",
		"[app]\nenv = \"production\"\npublic_admin_routes = true",
		"[app]\nenv = \"production\"\n[plugins]\nenabled = []",
		"[app]\nenv = \"development\"",
	} {
		if _, err := jfasttest.New(t, jfasttest.Options{TOML: toml}); err != nil {
			t.Errorf("%s: %v", toml, err)
		}
	}
	// The opt-in serves /metrics publicly, as asked.
	svc := jfasttest.Start(t, jfasttest.Options{TOML: "[app]\nenv = \"production\"\npublic_admin_routes = true"})
	if r := svc.Get(t, "/metrics"); r.Status != 200 {
		t.Fatalf("/metrics with public_admin_routes = %d", r.Status)
	}
}

// With admin_token every admin route but /live needs the token, as a bearer
// token or as Basic auth's password; without it (or with another) the answer
// is 401 problem+json with both challenges. The public listener is not
// guarded by it, and the token is never logged.
func TestAdminToken(t *testing.T) {
	t.Parallel()
	const token = "admin-token-0123456789-0123456789-abcdef"
	svc := adminService(t, "[app]\nadmin_listen = \"127.0.0.1:0\"\nadmin_token = \""+token+"\"")
	if r := svc.AdminGet(t, "/live"); r.Status != 200 {
		t.Errorf("admin /live without the token = %d, want 200 (probes)", r.Status)
	}
	for _, path := range []string{"/ready", "/metrics", "/debug/vars", "/dblike/pool", "/status/"} {
		for _, auth := range []string{"", "Bearer wrong", "Bearer " + token[:len(token)-1], "Basic " + base64.StdEncoding.EncodeToString([]byte("ops:wrong"))} {
			r := svc.AdminGet(t, path, "Authorization", auth)
			if r.Status != 401 || r.Header.Get("Content-Type") != "application/problem+json" ||
				!slices.Contains(r.Header.Values("WWW-Authenticate"), `Bearer realm="jfast admin"`) {
				t.Errorf("admin %s with %q = %d %s %v", path, auth, r.Status, r.Header.Get("Content-Type"), r.Header.Values("WWW-Authenticate"))
			}
		}
		if r := svc.AdminGet(t, path, "Authorization", "Bearer "+token); r.Status == 401 {
			t.Errorf("admin %s with the bearer token = 401", path)
		}
		if r := svc.AdminGet(t, path, "Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte("ops:"+token))); r.Status == 401 {
			t.Errorf("admin %s with the token as Basic auth's password = 401", path)
		}
	}
	if r := svc.Get(t, "/orders"); r.Status != 200 {
		t.Errorf("public /orders = %d: admin_token guards only the admin listener", r.Status)
	}
	if strings.Contains(svc.Logs(), token) {
		t.Errorf("the admin token is in the logs:\n%s", svc.Logs())
	}
}

// TestAdminHostCheck: the admin listener answers to IP literals, localhost
// and the names in app.admin_hosts; any other Host (a name rebound to
// 127.0.0.1 by another site's DNS) gets 421 problem+json, /live included.
func TestAdminHostCheck(t *testing.T) {
	t.Parallel()
	svc := adminService(t, "[app]\nadmin_listen = \"127.0.0.1:0\"\nadmin_hosts = [\"orders-admin.internal\"]")
	for host, want := range map[string]int{
		"":                             200, // the listener's own 127.0.0.1:PORT
		"127.0.0.1":                    200,
		"[::1]:9000":                   200,
		"10.0.3.7:9090":                200, // a probe or scraper by pod IP
		"localhost:9000":               200,
		"LOCALHOST.":                   200,
		"orders-admin.internal:9000":   200,
		"Orders-Admin.Internal":        200,
		"rebind.attacker.example":      421,
		"rebind.attacker.example:9000": 421,
		"orders-admin.internal.evil":   421,
	} {
		for _, path := range []string{"/live", "/metrics", "/debug/vars"} {
			var r jfasttest.Response
			if host == "" {
				r = svc.AdminGet(t, path)
			} else {
				r = svc.AdminGet(t, path, "Host", host)
			}
			if r.Status != want {
				t.Errorf("admin %s with Host %q = %d, want %d", path, host, r.Status, want)
			}
			if want == 421 && r.Header.Get("Content-Type") != "application/problem+json" {
				t.Errorf("admin %s with Host %q: Content-Type %q, want problem+json", path, host, r.Header.Get("Content-Type"))
			}
		}
	}
	for _, bad := range []string{"http://orders-admin", "orders-admin:9000", ""} {
		errs := configErrors(t, jfasttest.Options{TOML: "[app]\nadmin_listen = \"127.0.0.1:0\"\nadmin_hosts = [\"ok.internal\", \"" + bad + "\"]"})
		if _, ok := errs["app.admin_hosts[1]"]; !ok {
			t.Errorf("admin_hosts with %q: errors = %v, want app.admin_hosts[1]", bad, errs)
		}
	}
	// A deploy key: the environment's list, comma-separated, wins.
	app, err := framework.New(framework.Options{
		ConfigText: "[app]\nadmin_listen = \"127.0.0.1:9000\"\nadmin_hosts = [\"file.internal\"]",
		Environ:    []string{"JFAST_APP_ADMIN_HOSTS=a.internal,b.internal"},
		LogOutput:  &jfasttest.Logs{},
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := app.Config().AdminHosts; !slices.Equal(got, []string{"a.internal", "b.internal"}) {
		t.Errorf("admin_hosts from JFAST_APP_ADMIN_HOSTS = %q", got)
	}
	if r := svc.Get(t, "/orders", "Host", "rebind.attacker.example"); r.Status != 200 {
		t.Errorf("public /orders with another Host = %d: the check is the admin listener's only", r.Status)
	}
}

func TestAdminTokenValidation(t *testing.T) {
	t.Parallel()
	for toml, want := range map[string]string{
		"[app]\nadmin_token = \"x\"": "app.admin_listen is not set",
		"[app]\nenv = \"production\"\nadmin_listen = \"127.0.0.1:9000\"\nadmin_token = \"short\"": "at least 32 bytes in production",
	} {
		errs := configErrors(t, jfasttest.Options{TOML: toml})
		if e, ok := errs["app.admin_token"]; !ok || !strings.Contains(e.Problem, want) || strings.Contains(e.Error(), "short") {
			t.Errorf("%s: errors = %v, want %q", toml, errs, want)
		}
	}
	// A deploy key: the environment's token wins, and is never printed.
	logs := &jfasttest.Logs{}
	app, err := framework.New(framework.Options{
		ConfigText: "[app]\nadmin_listen = \"127.0.0.1:9000\"\nadmin_token = \"file-token\"",
		Environ:    []string{"JFAST_APP_ADMIN_TOKEN=env-token"},
		LogOutput:  logs,
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := app.Config().AdminToken; got != "env-token" || strings.Contains(logs.String(), "env-token") || strings.Contains(logs.String(), "file-token") {
		t.Errorf("admin_token = %q, logs:\n%s", got, logs)
	}
	if !app.IsSecret("app.admin_token") {
		t.Error("app.admin_token is not a secret")
	}
}

// An admin listener that listens beyond loopback (every interface, a
// private or public address, a host name) is warned about at boot, saying
// whether admin_token guards it and never what the token is; loopback draws
// no warning. The addresses are a table: nothing listens on them.
func TestAdminListenExposureWarning(t *testing.T) {
	t.Parallel()
	const token = "admin-token-0123456789-0123456789-abcdef"
	for addr, warn := range map[string]bool{
		":9000": true, "0.0.0.0:9000": true, "[::]:9000": true, "10.0.0.7:9000": true,
		"203.0.113.5:9000": true, "admin.internal:9000": true,
		"127.0.0.1:9000": false, "127.0.0.2:9000": false, "[::1]:9000": false, "localhost:9000": false,
	} {
		for _, withToken := range []bool{false, true} {
			logs := &jfasttest.Logs{}
			toml := "[app]\nadmin_listen = \"" + addr + "\""
			if withToken {
				toml += "\nadmin_token = \"" + token + "\""
			}
			app, err := framework.New(framework.Options{ConfigText: toml, LogOutput: logs})
			if err != nil {
				t.Fatal(err)
			}
			app.WarnAdminExposure()
			got := logs.String()
			if warned := strings.Contains(got, "level=WARN") && strings.Contains(got, "reachable beyond this host"); warned != warn {
				t.Errorf("admin_listen %s: warned %v, want %v:\n%s", addr, warned, warn, got)
			}
			if warn && withToken != strings.Contains(got, "app.admin_token guards it") {
				t.Errorf("admin_listen %s, token %v: the warning does not say whether the token guards it:\n%s", addr, withToken, got)
			}
			if strings.Contains(got, token) {
				t.Errorf("the token is logged:\n%s", got)
			}
		}
	}
	// The real boot warns too: loopback here, so nothing.
	svc := adminService(t, "[app]\nadmin_listen = \"127.0.0.1:0\"")
	if strings.Contains(svc.Logs(), "reachable beyond this host") {
		t.Errorf("a loopback admin listener was warned about:\n%s", svc.Logs())
	}
}
