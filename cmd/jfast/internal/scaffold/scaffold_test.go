package scaffold

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/knadh/koanf/parsers/toml/v2"

	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/internal/tomltext"
	"github.com/jfastframework/jfast/plugins/auth"
	"github.com/jfastframework/jfast/plugins/cache"
	"github.com/jfastframework/jfast/plugins/db"
	"github.com/jfastframework/jfast/plugins/grpc"
	"github.com/jfastframework/jfast/plugins/http"
	"github.com/jfastframework/jfast/plugins/idempotency"
	"github.com/jfastframework/jfast/plugins/llm"
	"github.com/jfastframework/jfast/plugins/mail"
	"github.com/jfastframework/jfast/plugins/queue"
	"github.com/jfastframework/jfast/plugins/storage"
	"github.com/jfastframework/jfast/plugins/telemetry"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// frameworkRoot is the checkout these tests run in.
func frameworkRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("../../../..")
	if err != nil {
		t.Fatal(err)
	}
	return root
}

var all = map[string]func() framework.Plugin{
	"http":        func() framework.Plugin { return http.New() },
	"db":          func() framework.Plugin { return db.New() },
	"cache":       func() framework.Plugin { return cache.New() },
	"auth":        func() framework.Plugin { return auth.New() },
	"storage":     func() framework.Plugin { return storage.New() },
	"idempotency": func() framework.Plugin { return idempotency.New() },
	"queue":       func() framework.Plugin { return queue.New() },
	"telemetry":   func() framework.Plugin { return telemetry.New() },
	"mail":        func() framework.Plugin { return mail.New() },
	"llm":         func() framework.Plugin { return llm.New() },
	"grpc":        func() framework.Plugin { return grpc.New() },
}

// golden compares got with testdata/<name>, or rewrites it with -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to write it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the golden file (go test -update rewrites it):\n--- got\n%s", path, got)
	}
}

func files(t *testing.T, o Options) map[string][]byte {
	t.Helper()
	fs, err := Files(o)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]byte{}
	for _, f := range fs {
		out[f.Path] = f.Data
	}
	return out
}

// TestGoldenNoPlugins pins every file of a service with no plugins but the
// built-in observability. go.sum must be the framework's, byte for byte.
func TestGoldenNoPlugins(t *testing.T) {
	t.Parallel()
	root := frameworkRoot(t)
	got := files(t, Options{Name: "orders", Framework: root, Available: all})
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got["go.sum"], sum) {
		t.Error("go.sum is not the framework's")
	}
	delete(got, "go.sum")
	want := []string{".dockerignore", ".gitignore", "Dockerfile", "Makefile", "README.md", "compose.yaml", "go.mod", "jfast.toml", "main.go", "routes.go", "routes_test.go"}
	var names []string
	for name := range got {
		names = append(names, name)
	}
	slices.Sort(names)
	if !slices.Equal(names, want) {
		t.Fatalf("files %v, want %v", names, want)
	}
	for _, name := range names {
		data := got[name]
		if name == "go.mod" {
			data = normalizeGoMod(t, data, root)
		}
		golden(t, "none/"+name, data)
	}
}

// normalizeGoMod replaces the checkout's path and keeps only the lines jfast new
// writes itself: the framework's requirement list changes with the framework.
func normalizeGoMod(t *testing.T, data []byte, root string) []byte {
	t.Helper()
	s := strings.ReplaceAll(string(data), root, "$FRAMEWORK")
	start := strings.Index(s, "require (\n")
	end := strings.Index(s[start:], ")\n")
	if start < 0 || end < 0 {
		t.Fatalf("no require block in go.mod:\n%s", data)
	}
	return []byte(s[:start] + "require (\n\t...the framework's requirements...\n" + s[start+end:])
}

// TestGoldenEveryPlugin pins the code, README and container files of a service
// with every plugin. jfast.toml is checked by TestConfigHasEveryKey instead: its
// comments come from the plugins' doc comments, which their authors may reword.
func TestGoldenEveryPlugin(t *testing.T) {
	t.Parallel()
	got := files(t, Options{Name: "shop", Module: "github.com/acme/shop", Framework: frameworkRoot(t), Available: all, Plugins: []string{"storage", "auth", "cache", "db", "http", "idempotency", "queue", "telemetry", "mail", "grpc"}})
	for name, data := range got {
		if name == "go.mod" || name == "go.sum" || name == "jfast.toml" {
			continue
		}
		golden(t, "every/"+name, data)
	}
	if !strings.Contains(string(got["jfast.toml"]), `enabled = ["observability", "http", "db", "cache", "auth", "storage", "queue", "mail", "telemetry", "idempotency", "grpc"]`) {
		t.Errorf("plugins not enabled in recipe order:\n%s", got["jfast.toml"])
	}
}

var (
	commentedKey   = regexp.MustCompile(`^# ([a-z0-9_]+) = (.+)$`)
	computedKey    = regexp.MustCompile(`^# ([a-z0-9_]+)  \(unset: .+\)$`)
	commentedTable = regexp.MustCompile(`^# (\[[^\] ]+\])$`)
)

// TestConfigHasEveryKey uncomments every key of a generated jfast.toml and checks
// the keys are exactly those of [app] and every plugin's Config(), each with its
// default.
func TestConfigHasEveryKey(t *testing.T) {
	t.Parallel()
	root := frameworkRoot(t)
	o := Options{Name: "shop", Framework: root, Available: all, Plugins: Known()}
	chosen, err := choose(o.Plugins, all)
	if err != nil {
		t.Fatal(err)
	}
	text, err := configFile(o, chosen)
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, line := range strings.Split(string(text), "\n") {
		if m := commentedKey.FindStringSubmatch(line); m != nil {
			line = m[1] + " = " + m[2]
		} else if m := computedKey.FindStringSubmatch(line); m != nil {
			line = m[1] + " = 0"
		} else if m := commentedTable.FindStringSubmatch(line); m != nil {
			line = m[1]
		}
		lines = append(lines, strings.ReplaceAll(line, "<name>", "NAME"))
	}
	tree, err := toml.Parser().Unmarshal([]byte(strings.Join(lines, "\n")))
	if err != nil {
		t.Fatalf("uncommented jfast.toml is not TOML: %v\n%s", err, strings.Join(lines, "\n"))
	}
	got := map[string]bool{}
	flatten("", tree, got)

	want := map[string]bool{}
	set := settings(o.Name, chosen)
	walkKeys("app", reflect.TypeFor[framework.AppConfig](), reflect.Value{}, set, want)
	want["plugins.enabled"] = true
	plugins := []framework.Plugin{&framework.Observability{}}
	for _, r := range chosen {
		plugins = append(plugins, all[r.Name]())
	}
	for _, p := range plugins {
		want["plugin."+p.Name()+".critical"] = true
		cfg := reflect.ValueOf(p.(framework.Configurable).Config()).Elem()
		walkKeys("plugin."+p.Name(), cfg.Type(), cfg, set, want)
	}
	for k := range want {
		if !got[k] {
			t.Errorf("jfast.toml lacks %s", k)
		}
	}
	for k := range got {
		if !want[k] {
			t.Errorf("jfast.toml has %s, which no config struct declares", k)
		}
	}
	// Defaults are written as the values the framework binds: a sample.
	for _, want := range []string{`# request_timeout = "30s"`, `# idle_timeout = "2m"`, `# metrics_path = "/metrics"`, `# critical = false`} {
		if !strings.Contains(string(text), "\n"+want+"\n") {
			t.Errorf("jfast.toml lacks %q", want)
		}
	}
}

// walkKeys lists the keys of a config struct type; a map of tables is one entry
// named NAME (the "<name>" placeholder), or the entries jfast new configures
// (set: the keys jfast.toml sets). A table that is a
// framework.ConditionalKeys lists only the keys that apply to it, with its
// defaults and the string values set gives it.
//
// defaults is the table's value before the file sets it (the plugin's
// Config() for its own table, the parent's field for a nested one); the zero
// Value for a map's entry, which starts from its SetDefaults.
func walkKeys(path string, t reflect.Type, defaults reflect.Value, set map[string]string, out map[string]bool) {
	table := reflect.New(t)
	if defaults.IsValid() {
		table.Elem().Set(defaults)
	} else if d, ok := table.Interface().(framework.Defaulter); ok {
		d.SetDefaults()
	}
	for _, tf := range tomltext.Fields(t) {
		if v, ok := set[path+"."+tf.Name]; ok && tf.Field.Type.Kind() == reflect.String {
			s, _ := strconv.Unquote(v)
			table.Elem().FieldByIndex(tf.Index).SetString(s)
		}
	}
	ck, _ := table.Elem().Interface().(framework.ConditionalKeys)
	for _, tf := range tomltext.Fields(t) {
		f := tf.Field
		key := path + "." + tf.Name
		switch {
		case ck != nil && !ck.Applies(tf.Name):
			// left out: the validation refuses it in this table
		case tomltext.IsTable(f.Type):
			walkKeys(key, f.Type, table.Elem().FieldByIndex(tf.Index), set, out)
		case tomltext.IsMapOfTables(f.Type):
			entries := map[string]bool{}
			for k := range set {
				if rest, ok := strings.CutPrefix(k, key+"."); ok {
					n, _, _ := strings.Cut(rest, ".")
					entries[n] = true
				}
			}
			if len(entries) == 0 {
				entries["NAME"] = true
			}
			for n := range entries {
				walkKeys(key+"."+n, f.Type.Elem(), reflect.Value{}, set, out)
			}
		case f.Type.Kind() == reflect.Map:
			out[key] = true // an empty table
		default:
			out[key] = true
		}
	}
}

func flatten(path string, m map[string]any, out map[string]bool) {
	for k, v := range m {
		key := k
		if path != "" {
			key = path + "." + k
		}
		if sub, ok := v.(map[string]any); ok && len(sub) > 0 {
			flatten(key, sub, out)
			continue
		}
		out[key] = true
	}
}

func TestRefusals(t *testing.T) {
	t.Parallel()
	root := frameworkRoot(t)
	for _, tc := range []struct {
		name string
		o    Options
		want string
	}{
		{"bad name", Options{Name: "Orders", Framework: root}, `invalid service name "Orders"`},
		{"name with a slash", Options{Name: "a/b", Framework: root}, `invalid service name "a/b"`},
		{"trailing dash", Options{Name: "orders-", Framework: root}, `invalid service name`},
		{"bad module", Options{Name: "orders", Module: "github.com//x", Framework: root}, `invalid module path "github.com//x": it has an empty element`},
		{"module with a space", Options{Name: "orders", Module: "github.com/a b", Framework: root}, `character outside`},
		{"module upper-case first element", Options{Name: "orders", Module: "GitHub.com/a", Framework: root}, `first element must be lower case`},
		{"module inside jfast", Options{Name: "orders", Module: "github.com/jfastframework/jfast/x", Framework: root}, `inside the framework's own module`},
		{"unknown plugin", Options{Name: "orders", Framework: root, Available: all, Plugins: []string{"htp"}}, `unknown plugin "htp"; available: http, db, cache, auth, storage, queue, mail, telemetry, idempotency`},
		{"plugin not there yet", Options{Name: "orders", Framework: root, Available: all, Plugins: []string{"drills"}}, `unknown plugin "drills"`},
		{"plugin without an example", Options{Name: "orders", Framework: root, Available: map[string]func() framework.Plugin{"sms": func() framework.Plugin { return &framework.Observability{} }}, Plugins: []string{"sms"}}, `jfast new has no example for plugin "sms" yet`},
		{"mail without the queue", Options{Name: "orders", Framework: root, Available: all, Plugins: []string{"mail", "db"}}, `plugin "mail" needs queue as well`},
		{"a planned plugin not compiled in", Options{Name: "orders", Framework: root, Available: map[string]func() framework.Plugin{}, Plugins: []string{"db"}}, `plugin "db" does not exist in this jfast yet`},
		{"idempotency without a store", Options{Name: "orders", Framework: root, Available: all, Plugins: []string{"idempotency"}}, `plugin "idempotency" needs one of db or cache as well`},
		{"plugin twice", Options{Name: "orders", Framework: root, Available: all, Plugins: []string{"db", "db"}}, `plugin "db" is listed twice`},
		{"not a checkout", Options{Name: "orders", Framework: t.TempDir()}, `framework checkout`},
	} {
		if _, err := Files(tc.o); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want it to contain %q", tc.name, err, tc.want)
		}
	}
}

// TestRefusesWhatTheGoCommandRefuses: a name or module path that passes the
// character rules but that go mod init, go build or go test would refuse is
// refused up front, naming the go command's rule; the name only while it is
// the module path too, except a name Windows keeps for a device, which is
// also the service's directory and binary. Bare names the go command builds
// stay allowed.
func TestRefusesWhatTheGoCommandRefuses(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, module string
		want         string // "" for accepted
	}{
		{"std", "", `invalid service name "std": without --module it is the module path too, and the go command reads "std" as a pattern`},
		{"cmd", "", `reads "cmd" as a pattern`},
		{"all", "", `reads "all" as a pattern`},
		{"tool", "", `reads "tool" as a pattern`},
		{"work", "", `reads "work" as a pattern`},
		{"go", "", `keeps the module path "go" for the Go toolchain`},
		{"toolchain", "", `keeps the module path "toolchain" for the Go toolchain`},
		{"main", "", `cannot import a package whose path is "main"`},
		{"fmt", "", `"fmt" is also a package of Go's standard library`},
		{"unsafe", "", `"unsafe" is also a package of Go's standard library`},
		{"aux", "", `invalid service name "aux": the go command refuses it: "aux" disallowed as path element component on Windows`},
		{"aux", "example.com/acme/aux-svc", `"aux" disallowed as path element component on Windows`},
		{"lpt1", "", `"lpt1" disallowed as path element component on Windows`},
		{"orders", "example.com/acme/con", `invalid module path "example.com/acme/con": the go command refuses it: "con" disallowed`},
		{"orders", "example.com/acme~1/x", `trailing tilde and digits in path element`},
		{"orders", "-acme/orders", `leading dash`},
		{"orders", "net/http", `"net/http" is also a package of Go's standard library`},
		{"orders", "std", `reads "std" as a pattern`},
		{"orders", "example.com/orders/v1", `a major version suffix must be /vN, and only for v2 or later`},
		{"orders", "gopkg.in/orders", `must end in a major version suffix .vN`},
		{"std", "example.com/acme/std", ""},
		{"fmt", "example.com/fmt", ""},
		{"orders", "", ""},
		{"internal", "", ""},
		{"orders", "std/orders", ""},
		{"orders", "example.com/orders/v2", ""},
		{"orders", "gopkg.in/orders.v2", ""},
	} {
		err := Check(tc.name, tc.module)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("Check(%q, %q): %v, want it accepted", tc.name, tc.module, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("Check(%q, %q): %v, want an error containing %q", tc.name, tc.module, err, tc.want)
		}
	}
}

func TestWriteRefusesANonEmptyDirectory(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "keep.txt"), []byte("mine"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := Write(Options{Name: "orders", Dir: dir, Framework: frameworkRoot(t)})
	if err == nil || !strings.Contains(err.Error(), "is not empty") {
		t.Fatalf("error %v", err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Fatalf("wrote into a non-empty directory: %v", entries)
	}
	// An empty directory is fine.
	empty := t.TempDir()
	if _, err := Write(Options{Name: "orders", Dir: empty, Framework: frameworkRoot(t)}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(empty, "main.go")); err != nil {
		t.Fatal(err)
	}
}

// TestGoldenQueueOnRedis pins the tests of a service whose queue runs on Redis
// (cache chosen, db not): like the PostgreSQL variant, its queue is named after
// the service in jfast.toml and each test's service works one of its own, so a
// dev server on the same Redis never takes a test's jobs.
func TestGoldenQueueOnRedis(t *testing.T) {
	t.Parallel()
	got := files(t, Options{Name: "shop", Module: "github.com/acme/shop", Framework: frameworkRoot(t), Available: all, Plugins: []string{"cache", "queue", "mail"}})
	for _, name := range []string{"routes_test.go", "routes_queue_test.go", "routes_mail_test.go"} {
		golden(t, "redisqueue/"+name, got[name])
	}
	toml := string(got["jfast.toml"])
	for _, want := range []string{"\nbackend = \"redis\"\n", "\n[plugin.queue.queues.shop]\n", "\nconcurrency = 10\n"} {
		if !strings.Contains(toml, want) {
			t.Errorf("jfast.toml lacks %q:\n%s", want, toml)
		}
	}
}

// TestGeneratedQueueIsTheServices: on each backend the generated jfast.toml
// makes the service work one queue, named after it, and enqueue to it (the
// only queue configured is the default one).
func TestGeneratedQueueIsTheServices(t *testing.T) {
	t.Parallel()
	root := frameworkRoot(t)
	for _, set := range [][]string{{"queue", "db"}, {"queue", "cache"}} {
		o := Options{Name: "my-svc", Framework: root, Available: all, Plugins: set}
		text, plugins := generated(t, o)
		app, err := framework.New(framework.Options{Plugins: plugins, ConfigText: string(text), Environ: []string{}, LogOutput: io.Discard})
		if err != nil {
			t.Fatalf("%v: %v", set, err)
		}
		var b strings.Builder
		if err := app.WriteEffectiveConfig(&b); err != nil {
			t.Fatal(err)
		}
		var queues []string
		for _, line := range strings.Split(b.String(), "\n") {
			if q, ok := strings.CutPrefix(line, "[plugin.queue.queues."); ok {
				queues = append(queues, strings.TrimSuffix(q, "]"))
			}
		}
		if !slices.Equal(queues, []string{"my-svc"}) {
			t.Errorf("%v: the service works queues %v, want only its own, my-svc:\n%s", set, queues, b.String())
		}
	}
}

// TestTestQueueFitsRiver: the queue a generated test makes of its own
// (ownQueue: the service's queue, -test- and 16 hex digits) is one River takes
// for a name of any length, the longest (63 characters, with a dash where the
// cut falls) included: the jfast.toml the test runs with validates. Unlike the
// golden services, it was 22 characters longer than the name, and a service of
// 43 or more failed its own tests on the postgres backend.
func TestTestQueueFitsRiver(t *testing.T) {
	t.Parallel()
	root := frameworkRoot(t)
	ownQueue := regexp.MustCompile(`own := fmt.Sprintf\("([^"]+)", rand.Uint64\(\)\)`)
	for _, name := range []string{"orders", strings.Repeat("abcde-", 7) + "x", strings.Repeat("abcde-", 10) + "xyz"} {
		o := Options{Name: name, Framework: root, Available: all, Plugins: []string{"db", "queue"}}
		m := ownQueue.FindSubmatch(files(t, o)["routes_test.go"])
		if m == nil {
			t.Fatalf("%s: routes_test.go has no line matching %s", name, ownQueue)
		}
		own := fmt.Sprintf(string(m[1]), uint64(math.MaxUint64))
		if len(own) > 64 || !strings.HasPrefix(own, name[:min(len(name), 41)]) {
			t.Errorf("%s: the tests' queue %s (%d characters): want at most 64, starting with the name", name, own, len(own))
		}
		text, plugins := generated(t, o)
		header := "[plugin.queue.queues." + name + "]"
		if !bytes.Contains(text, []byte(header)) {
			t.Fatalf("%s: jfast.toml has no %s", name, header)
		}
		text = bytes.Replace(text, []byte(header), []byte("[plugin.queue.queues."+own+"]"), 1)
		if _, err := framework.New(framework.Options{Plugins: plugins, ConfigText: string(text), Environ: []string{}, LogOutput: io.Discard}); err != nil {
			t.Errorf("%s: the jfast.toml of its tests, with queue %s, does not validate:\n%v", name, own, err)
		}
	}
}

// TestConfigWritesComputedDefaultsAsUnset: every key whose value config
// reports as computed at boot ("# default: app.name", the telemetry endpoint's
// "# default: the OTLP exporter's") is written "# key  (unset: …)" in the
// generated jfast.toml, not with a zero that is not its default.
func TestConfigWritesComputedDefaultsAsUnset(t *testing.T) {
	t.Parallel()
	root := frameworkRoot(t)
	o := Options{Name: "svc", Framework: root, Available: all, Plugins: Known()}
	text, plugins := generated(t, o)
	app, err := framework.New(framework.Options{Plugins: plugins, ConfigText: string(text), Environ: []string{}, LogOutput: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	var effective strings.Builder
	if err := app.WriteEffectiveConfig(&effective); err != nil {
		t.Fatal(err)
	}
	header := regexp.MustCompile(`^(?:# )?(\[[^\] ]+\])$`)
	computed := regexp.MustCompile(`^([a-z0-9_]+) += .*  # default: .+$`)
	lines := func(text string, key *regexp.Regexp) map[string]bool {
		found := map[string]bool{}
		table := ""
		for _, line := range strings.Split(text, "\n") {
			if m := header.FindStringSubmatch(line); m != nil {
				table = m[1]
			} else if m := key.FindStringSubmatch(line); m != nil {
				found[table+" "+m[1]] = true
			}
		}
		return found
	}
	want := lines(effective.String(), computed)
	got := lines(string(text), computedKey)
	for _, k := range []string{"[plugin.telemetry] endpoint", "[plugin.telemetry] service_name", "[plugin.cache] key_prefix"} {
		if !want[k] {
			t.Errorf("config does not report %s as computed:\n%s", k, effective.String())
		}
	}
	for k := range want {
		if !got[k] {
			t.Errorf("jfast.toml does not write %s as \"# key  (unset: …)\", though config computes it", k)
		}
	}
	for _, line := range []string{
		`# endpoint  (unset: OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, else OTEL_EXPORTER_OTLP_ENDPOINT + "/v1/traces", else "https://localhost:4318/v1/traces" (the OTLP exporter's default))`,
		`# service_name  (unset: app.name)`,
	} {
		if !strings.Contains(string(text), "\n"+line+"\n") {
			t.Errorf("jfast.toml lacks %q", line)
		}
	}
}

// TestGeneratedConfigBoots validates each generated jfast.toml as the service's
// boot would, for every plugin alone (idempotency with each store) and all of them.
func TestGeneratedConfigBoots(t *testing.T) {
	t.Parallel()
	root := frameworkRoot(t)
	sets := [][]string{nil, Known(), {"idempotency", "cache"}, {"queue", "cache"}, {"mail", "queue", "db"}}
	for _, n := range Known() {
		if n != "idempotency" && n != "queue" && n != "mail" {
			sets = append(sets, []string{n})
		}
	}
	sets = append(sets, []string{"idempotency", "db"}, []string{"queue", "db"})
	for _, set := range sets {
		o := Options{Name: "svc", Framework: root, Available: all, Plugins: set}
		text, plugins := generated(t, o)
		if _, err := framework.New(framework.Options{Plugins: plugins, ConfigText: string(text), Environ: []string{}}); err != nil {
			t.Errorf("%v: the generated jfast.toml does not validate:\n%v", set, err)
		}
	}
}

// TestImageBuildsVendorFirst: go.mod replaces jfast with a checkout outside the
// service's directory, which an image build cannot see, so every command the
// generated files give that builds the image (docker compose up --build) comes
// after go mod vendor, on its line or the line before, and the Dockerfile
// refuses a build without vendor/ naming that fix.
func TestImageBuildsVendorFirst(t *testing.T) {
	t.Parallel()
	root := frameworkRoot(t)
	for _, plugins := range [][]string{nil, {"db"}, {"cache", "queue", "mail"}} {
		got := files(t, Options{Name: "shop", Framework: root, Available: all, Plugins: plugins})
		for _, name := range []string{"README.md", "compose.yaml", "Makefile"} {
			lines := strings.Split(string(got[name]), "\n")
			for i, line := range lines {
				if !strings.Contains(line, "--build") && !strings.Contains(line, "docker build") {
					continue
				}
				if !strings.Contains(line, "go mod vendor") && (i == 0 || !strings.Contains(lines[i-1], "go mod vendor")) {
					t.Errorf("plugins %v: %s:%d builds the image without go mod vendor first: %s", plugins, name, i+1, line)
				}
			}
		}
		docker := string(got["Dockerfile"])
		guard := strings.Index(docker, `run "go mod vendor"`)
		build := strings.Index(docker, "go build")
		if guard < 0 || build < guard {
			t.Errorf("plugins %v: the Dockerfile does not refuse a build without vendor/ before go build:\n%s", plugins, docker)
		}
	}
}
