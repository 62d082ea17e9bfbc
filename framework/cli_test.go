package framework_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/jfastframework/jfast/framework"
)

// run runs the service command line with args and returns the exit status and the
// two streams. The process environment is never read.
func run(t *testing.T, opts framework.Options, args ...string) (int, string, string) {
	t.Helper()
	if opts.Environ == nil {
		opts.Environ = []string{}
	}
	var stdout, stderr bytes.Buffer
	code := framework.Command(context.Background(), opts, args, &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

func writeConfig(t *testing.T, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "jfast.toml")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestCheckValid(t *testing.T) {
	t.Parallel()
	path := writeConfig(t, "[app]\nname = \"orders\"\n[plugins]\nenabled = [\"observability\", \"fake\"]\n")
	code, out, errOut := run(t, framework.Options{Plugins: []framework.Plugin{newFake("fake", nil)}}, "check", "--config", path)
	if code != 0 {
		t.Fatalf("exit %d, stderr %s", code, errOut)
	}
	want := "ok: " + path + " is valid (env development; plugins: observability, fake)\n"
	if out != want {
		t.Fatalf("stdout %q, want %q", out, want)
	}
}

func TestCheckInvalidListsEveryErrorAndCount(t *testing.T) {
	t.Parallel()
	path := writeConfig(t, `[app]
request_timout = "5s"
shutdown_timeout = "0s"
[plugins]
enabled = ["observability", "db"]
[plugin.fake]
timeout = "-1s"
`)
	code, out, errOut := run(t, framework.Options{Plugins: []framework.Plugin{newFake("fake", nil)}}, "check", "--config", path)
	if code != 1 {
		t.Fatalf("exit %d, want 1; stderr %s", code, errOut)
	}
	if out != "" {
		t.Fatalf("stdout %q, want nothing", out)
	}
	want := []string{
		`app.request_timout: unknown key; fix: did you mean "request_timeout"?`,
		`app.shutdown_timeout: must be a positive duration, got 0s; fix: set a duration such as "5s" or a number of seconds; deadlines cannot be switched off`,
		`plugins.enabled: plugin "db" is enabled but not compiled into this service; fix: import "github.com/jfastframework/jfast/plugins/db" and add db.New() to framework.Options.Plugins in main`,
		"3 configuration errors",
	}
	lines := strings.Split(strings.TrimSpace(errOut), "\n")
	if len(lines) != len(want) {
		t.Fatalf("stderr has %d lines, want %d:\n%s", len(lines), len(want), errOut)
	}
	for i := range want {
		if lines[i] != want[i] {
			t.Errorf("line %d:\n got %s\nwant %s", i, lines[i], want[i])
		}
	}
	if strings.Contains(errOut, "\x1b[") {
		t.Error("colour written to a stream that is not a terminal")
	}
}

func TestCheckColourAlways(t *testing.T) {
	t.Parallel()
	code, _, errOut := run(t, framework.Options{ConfigText: "[app]\nenv = \"staging\"\n"}, "check", "--color", "always")
	if code != 1 {
		t.Fatalf("exit %d", code)
	}
	if !strings.Contains(errOut, "\x1b[1m\x1b[31mapp.env\x1b[0m") || !strings.Contains(errOut, "\x1b[31m1 configuration error\x1b[0m") {
		t.Fatalf("no colour in %q", errOut)
	}
}

func TestErrorLineColour(t *testing.T) {
	t.Parallel()
	_, _, errOut := run(t, framework.Options{}, "migrate", "sideways", "--color", "always")
	if !strings.HasPrefix(errOut, "\x1b[31merror:\x1b[0m ") {
		t.Fatalf("stderr %q", errOut)
	}
}

func TestUsageMistakesExitTwo(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"bogus"},
		{"check", "extra"},
		{"check", "--no-such-flag"},
		{"migrate"},
		{"migrate", "sideways"},
		{"check", "--color", "sometimes"},
	} {
		code, _, errOut := run(t, framework.Options{}, args...)
		if code != 2 {
			t.Errorf("%v: exit %d, want 2; stderr %s", args, code, errOut)
		}
		if !strings.Contains(errOut, "--help' for usage.") {
			t.Errorf("%v: no usage hint in %q", args, errOut)
		}
	}
}

func TestHelpOnEveryCommandHasAnExample(t *testing.T) {
	t.Parallel()
	for _, cmd := range []string{"", "serve", "check", "config", "worker", "migrate", "drill"} {
		args := []string{"--help"}
		if cmd != "" {
			args = []string{cmd, "--help"}
		}
		code, out, _ := run(t, framework.Options{}, args...)
		if code != 0 {
			t.Errorf("%s --help: exit %d", cmd, code)
		}
		if !strings.Contains(out, "Examples:") || !strings.Contains(out, "--config") {
			t.Errorf("%s --help: no example or flags:\n%s", cmd, out)
		}
	}
}

func TestMissingExplicitConfigFails(t *testing.T) {
	t.Parallel()
	code, _, errOut := run(t, framework.Options{}, "check", "--config", filepath.Join(t.TempDir(), "nope.toml"))
	if code != 1 || !strings.Contains(errOut, "read config") {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
}

// resettingFake's Config returns a fresh value holding the defaults, as some
// plugins' do: config must still show the bound values.
type resettingFake struct{ *fakePlugin }

func (p resettingFake) Config() any {
	p.cfg = fakeConfig{Timeout: 2 * time.Second, Retries: 2}
	return &p.cfg
}

func TestConfigShowsValuesSourcesAndMasksSecrets(t *testing.T) {
	t.Parallel()
	path := writeConfig(t, `[app]
name = "orders"
request_timeout = "45s"
[plugins]
enabled = ["fake", "observability"]
[plugin.fake]
critical = true
retries = 4
[plugin.fake.targets.billing]
url = "https://bill:hunter2@billing.internal/v1"
`)
	opts := framework.Options{
		Plugins: []framework.Plugin{resettingFake{newFake("fake", nil)}},
		Environ: []string{"JFAST_FAKE_SECRET=s3cr3t-value", "JFAST_FAKE_ADDRESS=postgres://app:pw@db:5432/app?sslmode=disable password=other", "JFAST_APP_LISTEN=0.0.0.0:9000"},
	}
	code, out, errOut := run(t, opts, "config", "--config", path)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, secret := range []string{"hunter2", "s3cr3t", ":pw@", "other"} {
		if strings.Contains(out, secret) {
			t.Errorf("secret %q printed:\n%s", secret, out)
		}
	}
	for _, want := range []string{
		"\n[app]\n",
		`name                = "orders"        # file`,
		`listen              = "0.0.0.0:9000"  # env JFAST_APP_LISTEN`,
		`request_timeout     = "45s"           # file`,
		`shutdown_timeout    = "20s"           # default`,
		`idle_timeout        = "2m"            # default`,
		"\n[plugins]\nenabled = [\"fake\", \"observability\"]  # file\n",
		"\n[plugin.fake]\n",
		`critical = true`,
		`secret   = "***"`,
		`# env JFAST_FAKE_SECRET`,
		`address  = "postgres://app:***@db:5432/app?sslmode=disable password=***"  # env JFAST_FAKE_ADDRESS`,
		`retries  = 4 `,
		"\n[plugin.fake.targets.billing]\n",
		`url     = "https://bill:***@billing.internal/v1"  # file`,
		`timeout = "5s"                                    # default`,
		"\n[plugin.observability]\ncritical        = false       # default\nmetrics_path    = \"/metrics\"  # default\nruntime_metrics = true        # default\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Index(out, "[plugin.fake]") > strings.Index(out, "[plugin.observability]") {
		t.Error("plugin tables are not in [plugins] enabled order")
	}
}

func TestConfigInvalidPrintsErrors(t *testing.T) {
	t.Parallel()
	code, out, errOut := run(t, framework.Options{ConfigText: "[app]\nlog_level = \"loud\"\n"}, "config")
	if code != 1 || out != "" || !strings.Contains(errOut, "app.log_level: must be debug, info, warn or error") {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}

func TestIsSecretKey(t *testing.T) {
	t.Parallel()
	for key, want := range map[string]bool{
		"plugin.db.password": true, "plugin.auth.secret": true, "plugin.storage.disks.s3.secret_key": true,
		"plugin.storage.signing_key": true, "plugin.auth.private_key": true, "plugin.x.token": true,
		"plugin.x.api_key": true, "plugin.mail.smtp_password": true, "plugin.x.client_secret": true,
		"plugin.db.url": false, "plugin.auth.public_key": false, "app.name": false, "plugin.cache.key_prefix": false,
		"plugin.x.token_ttl": false,
		// an upstream's configured headers
		"plugin.http.upstreams.billing.headers.Authorization":       true,
		"plugin.http.upstreams.billing.headers.Proxy-Authorization": true,
		"plugin.http.upstreams.billing.headers.X-Api-Key":           true,
		"plugin.http.upstreams.billing.headers.X-Auth-Token":        true,
		"plugin.http.upstreams.billing.headers.Cookie":              true,
		"plugin.http.upstreams.billing.headers.Accept":              false,
		"plugin.http.upstreams.billing.headers.X-Tenant":            false,
	} {
		if got := framework.IsSecretKey(key); got != want {
			t.Errorf("IsSecretKey(%q) = %v, want %v", key, got, want)
		}
	}
}

func TestMaskSecrets(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"postgres://app:pw@db:5432/app":           "postgres://app:***@db:5432/app",
		"redis://:topsecret@cache:6379/0":         "redis://:***@cache:6379/0",
		"redis://cache:6379/0":                    "redis://cache:6379/0",
		"host=db user=app password=pw dbname=app": "host=db user=app password=*** dbname=app",
		"host=db password='p w' dbname=app":       "host=db password=*** dbname=app",
		"amqp://guest@rabbit:5672/":               "amqp://guest@rabbit:5672/",
		"plain text":                              "plain text",
	} {
		if got := framework.MaskSecrets(in); got != want {
			t.Errorf("MaskSecrets(%q) = %q, want %q", in, got, want)
		}
	}
}

// With no container named for a plugin's dependency, drill skips it with a
// line naming the variable to set, and exits 0; mistakes in the flags are 2.
func TestDrillSkipsPluginsWithoutContainers(t *testing.T) {
	t.Setenv("JFAST_DRILL_REDIS_CONTAINER", "")
	opts := framework.Options{
		Plugins:    []framework.Plugin{newFake("cache", nil)},
		ConfigText: "[plugins]\nenabled = [\"observability\", \"cache\"]\n",
	}
	code, out, errOut := run(t, opts, "drill", "--url", "http://127.0.0.1:1", "--route", "/products")
	if code != 0 || !strings.Contains(out, "SKIP cache: JFAST_DRILL_REDIS_CONTAINER names no container") {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if code, _, errOut := run(t, opts, "drill", "--want", "cache=fast"); code != 2 || !strings.Contains(errOut, "--want") {
		t.Fatalf("a bad --want: exit %d, stderr %q", code, errOut)
	}
}

func TestWorkerWithoutRunners(t *testing.T) {
	t.Parallel()
	code, _, errOut := run(t, framework.Options{}, "worker")
	if code != 1 || !strings.Contains(errOut, "worker: no enabled plugin runs workers (enabled: observability)") {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
}

// workerFake runs "workers" until its context ends.
type workerFake struct {
	*fakePlugin
	running chan struct{}
	err     error
	stopped atomic.Bool
}

func (w *workerFake) RunWorkers(ctx context.Context) error {
	close(w.running)
	if w.err != nil {
		return w.err
	}
	<-ctx.Done()
	w.stopped.Store(true)
	return nil
}

func TestWorkerRunsUntilCancelled(t *testing.T) {
	t.Parallel()
	rec := &recorder{}
	w := &workerFake{fakePlugin: newFake("queue", rec), running: make(chan struct{})}
	var routesRan atomic.Bool
	opts := framework.Options{
		Plugins:    []framework.Plugin{w},
		ConfigText: "[plugins]\nenabled = [\"queue\"]\n",
		Environ:    []string{"JFAST_APP_LISTEN=" + freeAddr(t)},
		LogOutput:  io.Discard,
		Routes: func(app *framework.App, r chi.Router) error {
			routesRan.Store(true) // job handlers are registered here
			r.Get("/orders", func(http.ResponseWriter, *http.Request) {})
			return nil
		},
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int)
	var stderr bytes.Buffer
	go func() { done <- framework.Command(ctx, opts, []string{"worker"}, io.Discard, &stderr) }()
	select {
	case <-w.running:
	case <-time.After(10 * time.Second):
		t.Fatal("workers never ran")
	}
	// The worker serves the probes, not the service's routes.
	addr := strings.TrimPrefix(opts.Environ[0], "JFAST_APP_LISTEN=")
	for path, want := range map[string]int{"/live": http.StatusOK, "/orders": http.StatusNotFound} {
		resp, err := http.Get("http://" + addr + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("GET %s: %d, want %d", path, resp.StatusCode, want)
		}
	}
	http.DefaultClient.CloseIdleConnections()
	cancel()
	if code := <-done; code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	if !w.stopped.Load() {
		t.Fatal("RunWorkers did not see the cancellation")
	}
	if !routesRan.Load() {
		t.Fatal("the worker did not run Routes, where job handlers are registered")
	}
	if got := fmt.Sprint(rec.list()); got != "[start queue stop queue]" {
		t.Fatalf("lifecycle %s", got)
	}
}

func TestWorkerErrorExitsOne(t *testing.T) {
	t.Parallel()
	w := &workerFake{fakePlugin: newFake("queue", nil), running: make(chan struct{}), err: errors.New("broker gone")}
	opts := framework.Options{
		Plugins:    []framework.Plugin{w},
		ConfigText: "[plugins]\nenabled = [\"queue\"]\n",
		Environ:    []string{"JFAST_APP_LISTEN=127.0.0.1:0"},
	}
	var logs bytes.Buffer
	opts.LogOutput = &logs
	code, _, _ := run(t, opts, "worker")
	if code != 1 || !strings.Contains(logs.String(), "workers of queue: broker gone") {
		t.Fatalf("exit %d, logs %s", code, logs.String())
	}
}

func TestMigrateWithoutMigrators(t *testing.T) {
	t.Parallel()
	code, _, errOut := run(t, framework.Options{}, "migrate", "up")
	if code != 1 || !strings.Contains(errOut, "migrate: no enabled plugin has migrations") {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
}

type migratorFake struct {
	*fakePlugin
	err error
}

func (m *migratorFake) RunMigrations(_ context.Context, direction string, out io.Writer) error {
	fmt.Fprintf(out, "ran %s with address %s\n", direction, m.cfg.Address)
	return m.err
}

func TestMigrateCallsMigrators(t *testing.T) {
	t.Parallel()
	m := &migratorFake{fakePlugin: newFake("db", nil)}
	opts := framework.Options{
		Plugins:    []framework.Plugin{m},
		ConfigText: "[plugins]\nenabled = [\"db\"]\n[plugin.db]\naddress = \"db:5432\"\n",
	}
	code, out, errOut := run(t, opts, "migrate", "status")
	if code != 0 || out != "db: migrate status\nran status with address db:5432\n" {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	m.err = errors.New("connection refused")
	code, _, errOut = run(t, opts, "migrate", "up")
	if code != 1 || !strings.Contains(errOut, "error: db: migrate up: connection refused") {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
}

// freeAddr returns a loopback address nothing listens on.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func TestServeIsTheDefault(t *testing.T) {
	t.Parallel()
	addr := freeAddr(t)
	path := writeConfig(t, "[app]\nname = \"orders\"\n")
	opts := framework.Options{Environ: []string{"JFAST_APP_LISTEN=" + addr}, LogOutput: io.Discard}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() { done <- framework.Command(ctx, opts, []string{"--config", path}, io.Discard, io.Discard) }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := http.Get("http://" + addr + "/live")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("/live: %d", resp.StatusCode)
			}
			break
		}
		if time.Now().After(deadline) {
			cancel()
			t.Fatalf("never served: %v (exit %d?)", err, <-done)
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	if code := <-done; code != 0 {
		t.Fatalf("exit %d after a clean stop", code)
	}
	http.DefaultClient.CloseIdleConnections()
}
