package cli_test

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
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/framework/cli"
)

// run runs the service command line with args and returns the exit status and the
// two streams. The process environment is never read.
func run(t *testing.T, opts framework.Options, args ...string) (int, string, string) {
	t.Helper()
	if opts.Environ == nil {
		opts.Environ = []string{}
	}
	var stdout, stderr bytes.Buffer
	code := cli.Run(context.Background(), cli.NewCommand(opts), args, &stdout, &stderr)
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
	// Each line begins where the file writes the key.
	want := []string{
		path + `:2: app.request_timout: unknown key; fix: did you mean "request_timeout"?`,
		path + `:3: app.shutdown_timeout: must be a positive duration, got 0s; fix: set a duration such as "5s" or a number of seconds; deadlines cannot be switched off`,
		path + `:5: plugins.enabled: plugin "db" is enabled but not compiled into this service; fix: import "github.com/jfastframework/jfast/plugins/db" and add db.New() to framework.Options.Plugins in main`,
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

// TestEnvironmentErrorsNameTheirVariableInCheckAndServe: check and serve
// print an error about a value the environment set with its variable after
// the key, where a file's error has its line; the wrong type and the broken
// rule alike.
func TestEnvironmentErrorsNameTheirVariableInCheckAndServe(t *testing.T) {
	t.Parallel()
	path := writeConfig(t, "[app]\nidle_timeout = \"0s\"\n")
	want := []string{
		`app.shutdown_timeout (JFAST_APP_SHUTDOWN_TIMEOUT): "soon" is not a duration; fix: write a duration such as "250ms" or "5s", or a number of seconds`,
		`app.request_timeout (JFAST_APP_REQUEST_TIMEOUT): must be a positive duration, got 0s; fix: set a duration such as "5s" or a number of seconds; deadlines cannot be switched off`,
		path + `:2: app.idle_timeout: must be a positive duration, got 0s; fix: set a duration such as "5s" or a number of seconds; deadlines cannot be switched off`,
		"3 configuration errors",
	}
	for _, command := range []string{"check", "serve"} {
		opts := framework.Options{Environ: []string{"JFAST_APP_REQUEST_TIMEOUT=0", "JFAST_APP_SHUTDOWN_TIMEOUT=soon"}}
		code, _, errOut := run(t, opts, command, "--config", path)
		if code != 1 {
			t.Fatalf("%s: exit %d, want 1; stderr %s", command, code, errOut)
		}
		if lines := strings.Split(strings.TrimSpace(errOut), "\n"); !slices.Equal(lines, want) {
			t.Errorf("%s: stderr\n%s\nwant\n%s", command, errOut, strings.Join(want, "\n"))
		}
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
	for _, cmd := range []string{"", "serve", "check", "config", "worker", "migrate"} {
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

func TestConfigInvalidPrintsErrors(t *testing.T) {
	t.Parallel()
	code, out, errOut := run(t, framework.Options{ConfigText: "[app]\nlog_level = \"loud\"\n"}, "config")
	if code != 1 || out != "" || !strings.Contains(errOut, "app.log_level: must be debug, info, warn or error") {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}

func TestWorkerWithoutRunners(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		opts framework.Options
		want string
	}{
		{"none compiled in", framework.Options{},
			`worker: no enabled plugin runs workers (enabled: observability); no plugin compiled into this service runs workers: to run jobs, import "github.com/jfastframework/jfast/plugins/queue", add queue.New() to the plugins in main, and enable "queue" in [plugins] enabled`},
		{"compiled in, not enabled", framework.Options{Plugins: []framework.Plugin{&workerFake{fakePlugin: newFake("queue", nil)}}},
			`worker: no enabled plugin runs workers (enabled: observability); enable "queue" in [plugins] enabled to run jobs`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			code, _, errOut := run(t, tc.opts, "worker")
			if code != 1 || !strings.Contains(errOut, tc.want) {
				t.Fatalf("exit %d, stderr %q", code, errOut)
			}
		})
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
	go func() { done <- cli.Run(ctx, cli.NewCommand(opts), []string{"worker"}, io.Discard, &stderr) }()
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
	go func() { done <- cli.Run(ctx, cli.NewCommand(opts), []string{"--config", path}, io.Discard, io.Discard) }()
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

// codeBound is a plugin with a rule that depends on what the service's
// main compiled in, as db's migrate_on_start, and with migrations.
type codeBound struct{ *fakePlugin }

func (p codeBound) Validate(v *framework.Validation) {
	v.CompiledInError("address", "needs code main did not compile in", "compile it in")
}

func (p codeBound) RunMigrations(context.Context, string, io.Writer) error { return nil }

// The jfast binary names the service's own command where it cannot decide:
// by app.name when the file or the environment sets it, else generically,
// never by app.name's default "jfast", which is the command just run.
func TestStandInNamesTheServiceCommand(t *testing.T) {
	t.Parallel()
	const enable = "[plugins]\nenabled = [\"observability\", \"bound\"]\n"
	for _, c := range []struct {
		name, text string
		env        []string
		check      string // the undecided line and the verdict's end
		migrate    string
	}{
		{"app.name in the file", "[app]\nname = \"orders\"\n" + enable, nil,
			"plugin.bound.address: cannot know here: run `orders check` (whether it holds depends on what the service's main compiled in)\n" +
				"ok: %s is valid (env development; plugins: observability, bound) but for 1 rule only `orders check` can decide\n",
			"run the service's: `orders migrate up`\n"},
		{"app.name in the environment", enable, []string{"JFAST_APP_NAME=orders"},
			"plugin.bound.address: cannot know here: run `orders check` (whether it holds depends on what the service's main compiled in)\n" +
				"ok: %s is valid (env development; plugins: observability, bound) but for 1 rule only `orders check` can decide\n",
			"run the service's: `orders migrate up`\n"},
		{"no app.name", enable, nil,
			"plugin.bound.address: cannot know here: run the service's own `<binary> check` (whether it holds depends on what the service's main compiled in)\n" +
				"ok: %s is valid (env development; plugins: observability, bound) but for 1 rule only the service's own `<binary> check` can decide\n",
			"run the service's: `<binary> migrate up`\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			path := writeConfig(t, c.text)
			opts := framework.Options{Plugins: []framework.Plugin{codeBound{newFake("bound", nil)}}, StandIn: true, Environ: c.env}
			code, out, errOut := run(t, opts, "check", "--config", path)
			if want := fmt.Sprintf(c.check, path); code != 0 || out != want {
				t.Errorf("check: exit %d\n%s%s\nwant exit 0 and\n%s", code, out, errOut, want)
			}
			code, out, errOut = run(t, opts, "migrate", "up", "--config", path)
			if code != 1 || out != "" || !strings.HasSuffix(errOut, c.migrate) {
				t.Errorf("migrate up: exit %d\n%s%s\nwant exit 1 and a line ending %q", code, out, errOut, c.migrate)
			}
		})
	}
}
