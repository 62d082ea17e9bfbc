package main

import (
	"bytes"
	"context"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// jfast runs the command line in-process and returns its exit status and output.
func jfast(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), args, &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test -update writes it)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs (go test -update rewrites it); got:\n%s", path, got)
	}
}

func TestCheckInvalidListsEveryProblem(t *testing.T) {
	t.Parallel()
	code, stdout, stderr := jfast(t, "check", "--config", "testdata/invalid.toml")
	if code != 1 || stdout != "" {
		t.Fatalf("exit %d, stdout %q", code, stdout)
	}
	if strings.Contains(stderr, "hunter2") {
		t.Fatal("a password reached the output")
	}
	golden(t, "check_invalid.golden", stderr)
}

func TestCheckValidWithoutBuildingTheService(t *testing.T) {
	t.Parallel()
	code, stdout, stderr := jfast(t, "check", "--config", "testdata/valid.toml")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if stdout != "ok: testdata/valid.toml is valid (env development; plugins: observability, http, db, cache)\n" {
		t.Fatalf("stdout %q", stdout)
	}
}

// TestConfigExplainsSources reads the process environment, so it is not parallel.
func TestConfigExplainsSources(t *testing.T) {
	t.Setenv("JFAST_DB_URL", "postgres://orders:s3cret@prod-db:5432/orders")
	t.Setenv("JFAST_HTTP_UPSTREAMS__BILLING__TIMEOUT", "7s")
	code, stdout, stderr := jfast(t, "config", "--config", "testdata/valid.toml")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if strings.Contains(stdout, "s3cret") || strings.Contains(stdout, "hunter2") {
		t.Fatalf("a password reached the output:\n%s", stdout)
	}
	for _, want := range []string{
		`url `, `"postgres://orders:***@prod-db:5432/orders"  # env JFAST_DB_URL`,
		`pool_size `, `= 20 `, `# file`,
		"[plugin.http.upstreams.billing]",
		`"7s"`, `# env JFAST_HTTP_UPSTREAMS__BILLING__TIMEOUT`,
		`read_timeout `, `"3s"`,
		"[plugin.cache]",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("config output lacks %q:\n%s", want, stdout)
		}
	}
	if !strings.Contains(stderr, "plugin.db.url: JFAST_DB_URL and testdata/valid.toml disagree; the environment wins") {
		t.Errorf("no deploy-key warning in the logs: %s", stderr)
	}
}

// TestConfigShowsPoolSizeFromTheURL: a pool size in a connection URL, with
// the pool_size key unset, is the value config shows, with the URL as its
// source.
func TestConfigShowsPoolSizeFromTheURL(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "jfast.toml")
	text := "[app]\nname = \"orders\"\n[plugins]\nenabled = [\"observability\", \"db\", \"cache\"]\n" +
		"[plugin.db]\nurl = \"postgres://orders:hunter2@db:5432/orders?pool_max_conns=6\"\n" +
		"[plugin.cache]\nurl = \"redis://127.0.0.1:6379/0?pool_size=7\"\n"
	if err := os.WriteFile(file, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := jfast(t, "config", "--config", file)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`(?m)^pool_size += 6 +# url \(plugin\.db\.url pool_max_conns\)$`),
		regexp.MustCompile(`(?m)^pool_size += 7 +# url \(plugin\.cache\.url pool_size\)$`),
	} {
		if !want.MatchString(stdout) {
			t.Errorf("config output lacks %s:\n%s", want, stdout)
		}
	}
}

func TestVersion(t *testing.T) {
	t.Parallel()
	code, stdout, _ := jfast(t, "version")
	if code != 0 || !strings.HasPrefix(stdout, "jfast ") || !strings.Contains(stdout, "plugins: observability, http, db, cache, auth, storage") {
		t.Fatalf("exit %d, stdout %q", code, stdout)
	}
	// docs/cli.md's sample lists the plugins this jfast prints.
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "cli.md"))
	if err != nil {
		t.Fatal(err)
	}
	sample := regexp.MustCompile("(?s)### jfast version\n\n```\n(.*?)```").FindSubmatch(doc)
	if sample == nil {
		t.Fatal("docs/cli.md has no jfast version sample")
	}
	plugins := func(s string) string {
		_, after, _ := strings.Cut(s, "\nplugins: ")
		return strings.TrimSpace(after)
	}
	if got, want := plugins(string(sample[1])), plugins(stdout); got != want {
		t.Errorf("docs/cli.md's jfast version sample lists plugins %q; jfast version prints %q", got, want)
	}
}

func TestNewUsageMistakes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"new"}, 2, "want the service's NAME"},
		{[]string{"new", "a", "b"}, 2, "want the service's NAME"},
		{[]string{"new", "Orders"}, 2, `invalid service name "Orders"`},
		{[]string{"new", "orders", "--module", "x//y"}, 2, "invalid module path"},
		{[]string{"new", "orders", "--dir", t.TempDir() + "/o", "--plugins", "mail"}, 1, `plugin "mail" needs queue as well`},
		{[]string{"new", "orders", "--dir", t.TempDir() + "/o", "--plugins", "smtp"}, 1, `unknown plugin "smtp"`},
		{[]string{"new", "orders", "--framework", t.TempDir()}, 1, "framework checkout"},
		{[]string{"new", "orders", "--bogus"}, 2, "unknown flag: --bogus"},
	} {
		code, _, stderr := jfast(t, tc.args...)
		if code != tc.code || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit %d and %q", tc.args, code, stderr, tc.code, tc.want)
		}
	}
}

// TestNewRefusesWhatTheGoCommandRefuses: jfast new refuses a NAME or --module
// that would give a service the go command cannot build or test, as a usage
// mistake naming the rule, and writes nothing.
func TestNewRefusesWhatTheGoCommandRefuses(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"new", "std"}, `invalid service name "std": without --module it is the module path too`},
		{[]string{"new", "go"}, `"go" for the Go toolchain`},
		{[]string{"new", "aux"}, `"aux" disallowed as path element component on Windows`},
		{[]string{"new", "orders", "--module", "example.com/acme/con"}, `invalid module path "example.com/acme/con"`},
		{[]string{"new", "orders", "--module", "example.com/acme~1/x"}, `trailing tilde and digits`},
	} {
		dir := filepath.Join(t.TempDir(), "svc")
		code, _, stderr := jfast(t, append(tc.args, "--dir", dir)...)
		if code != 2 || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 and %q", tc.args, code, stderr, tc.want)
		}
		if _, err := os.Stat(dir); err == nil {
			t.Errorf("%v: wrote %s", tc.args, dir)
		}
	}
}

func TestNewRefusesANonEmptyDirectory(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte("package main\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := jfast(t, "new", "orders", "--dir", dir)
	if code != 1 || !strings.Contains(stderr, "is not empty: jfast new never overwrites files") {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "main.go")); string(b) != "package main\n" {
		t.Fatal("main.go was overwritten")
	}
}

func TestNewSaysWhatItWroteWhere(t *testing.T) {
	t.Chdir(t.TempDir())
	code, stdout, stderr := jfast(t, "new", "orders")
	if code != 0 || !strings.HasPrefix(stdout, "wrote service orders in ./orders\n\n  cd ./orders\n") {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
}

func TestHelpEveryCommand(t *testing.T) {
	t.Parallel()
	for _, cmd := range []string{"new", "version", "check", "config", "serve", "worker", "migrate", "drill"} {
		code, stdout, _ := jfast(t, cmd, "--help")
		if code != 0 || !strings.Contains(stdout, "Examples:") {
			t.Errorf("%s --help: exit %d:\n%s", cmd, code, stdout)
		}
	}
}

// TestCheckRefusesAPluginThatIsNotEnabled: a store or backend that runs on
// another plugin is refused when that plugin is not enabled, by check as by
// the boot (one rule, in the plugin's Validate), naming the key and the fix.
func TestCheckRefusesAPluginThatIsNotEnabled(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ name, text, want string }{
		{"idempotency without db", `enabled = ["observability", "idempotency"]`,
			`plugin.idempotency.store: store "postgres" keeps its keys in the db plugin's database, and plugin "db" is not enabled; fix: add "db" to [plugins] enabled, or set [plugin.idempotency] store = "redis"`},
		{"idempotency redis without cache", "enabled = [\"observability\", \"db\", \"idempotency\"]\n[plugin.db]\nurl = \"postgres://db/orders\"\n[plugin.idempotency]\nstore = \"redis\"",
			`plugin.idempotency.store: store "redis" keeps its keys in the cache plugin's Redis, and plugin "cache" is not enabled; fix: add "cache" to [plugins] enabled`},
		{"queue without db", `enabled = ["observability", "queue"]`,
			`plugin.queue.backend: backend "postgres" uses the db plugin's pool, and plugin "db" is not enabled; fix: add "db" to [plugins] enabled`},
		{"queue redis without cache", "enabled = [\"observability\", \"queue\"]\n[plugin.queue]\nbackend = \"redis\"",
			`plugin.queue.backend: backend "redis" uses the cache plugin's client, and plugin "cache" is not enabled; fix: add "cache" to [plugins] enabled`},
		{"auth revocation without cache", "enabled = [\"observability\", \"auth\"]\n[plugin.auth]\nmode = \"hmac\"\nhmac_secret = \"0123456789abcdef0123456789abcdef\"\ncheck_revocation = true",
			`plugin.auth.check_revocation: is true, and revoked token IDs are kept by the cache plugin, and plugin "cache" is not enabled; fix: add "cache" to [plugins] enabled, or set check_revocation = false`},
	} {
		file := filepath.Join(t.TempDir(), "jfast.toml")
		text := "[app]\nname = \"orders\"\n[plugins]\n" + c.text + "\n"
		if err := os.WriteFile(file, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		code, stdout, stderr := jfast(t, "check", "--config", file)
		if code != 1 || !strings.Contains(stderr, c.want) {
			t.Errorf("%s: exit %d, stdout %q, stderr:\n%s\nwant %s", c.name, code, stdout, stderr, c.want)
		}
	}
}

// TestConfigRoundTripsThroughCheck: the config command's output, with the
// secrets (***) filled back in, is a configuration check accepts: keys that
// do not apply to a table (a local disk's S3 keys, an llm provider's hedging
// keys) are not printed. One file has a local and an s3 disk; the other is
// jfast new's with every plugin it offers, plus channels and gateway, at
// their defaults.
func TestConfigRoundTripsThroughCheck(t *testing.T) {
	t.Parallel()
	disks := filepath.Join(t.TempDir(), "jfast.toml")
	text := `[app]
name = "orders"
[plugins]
enabled = ["observability", "db", "storage"]
[plugin.db]
url = "postgres://orders:hunter2@127.0.0.1:5432/orders"
[plugin.storage]
default = "files"
[plugin.storage.disks.files]
driver = "local"
root = "data/files"
signing_key = "local-signing-key-of-thirty-two-bytes"
[plugin.storage.disks.archive]
driver = "s3"
bucket = "archive"
endpoint = "http://127.0.0.1:7070"
path_style = true
access_key = "archive"
secret_key = "hunter2hunter2"
`
	if err := os.WriteFile(disks, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "shop")
	if code, _, stderr := jfast(t, "new", "shop", "--dir", dir, "--plugins", "http,db,cache,auth,storage,queue,mail,telemetry,idempotency,grpc,llm"); code != 0 {
		t.Fatalf("new: exit %d: %s", code, stderr)
	}
	generated, err := os.ReadFile(filepath.Join(dir, "jfast.toml"))
	if err != nil {
		t.Fatal(err)
	}
	everyPlugin := regexp.MustCompile(`(?m)^enabled = \[(.*)\]$`).ReplaceAll(generated, []byte(`enabled = [$1, "channels", "gateway"]`))
	if err := os.WriteFile(filepath.Join(dir, "jfast.toml"), everyPlugin, 0o644); err != nil {
		t.Fatal(err)
	}
	// The generated file's commented keys, uncommented (but those of a
	// [<name>] placeholder table), are a configuration check accepts too.
	uncommented := filepath.Join(t.TempDir(), "uncommented.toml")
	if err := os.WriteFile(uncommented, uncomment(everyPlugin), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, stderr := jfast(t, "check", "--config", uncommented); code != 0 {
		t.Errorf("check of jfast new's jfast.toml with every key uncommented: exit %d:\n%s", code, stderr)
	}
	for _, file := range []string{disks, filepath.Join(dir, "jfast.toml")} {
		code, stdout, stderr := jfast(t, "config", "--config", file)
		if code != 0 {
			t.Fatalf("config %s: exit %d: %s", file, code, stderr)
		}
		if strings.Contains(stdout, "hunter2") || !strings.Contains(stdout, "***") {
			t.Fatalf("config %s: secrets not masked:\n%s", file, stdout)
		}
		filled := filepath.Join(t.TempDir(), "filled.toml")
		if err := os.WriteFile(filled, []byte(strings.ReplaceAll(stdout, "***", "filled-in-secret-of-thirty-two-bytes-or-more")), 0o644); err != nil {
			t.Fatal(err)
		}
		if code, _, stderr := jfast(t, "check", "--config", filled); code != 0 {
			t.Errorf("check of config's output for %s: exit %d:\n%s", file, code, stderr)
		}
	}
}

// uncomment turns jfast new's commented keys ("# key = value") and tables
// ("# [table]") into settings, but those of placeholder tables ("<name>").
func uncomment(text []byte) []byte {
	key := regexp.MustCompile(`^# ([a-z0-9_]+ = .+)$`)
	table := regexp.MustCompile(`^# (\[[^\] ]+\])$`)
	var out []string
	placeholder := false
	for _, line := range strings.Split(string(text), "\n") {
		if m := table.FindStringSubmatch(line); m != nil {
			placeholder = strings.Contains(line, "<name>")
			if !placeholder {
				out = append(out, m[1])
			}
			continue
		}
		if strings.HasPrefix(line, "[") {
			placeholder = false
		}
		if m := key.FindStringSubmatch(line); m != nil && !placeholder {
			line = m[1]
		}
		out = append(out, line)
	}
	return []byte(strings.Join(out, "\n"))
}

// TestSharedClientKeysAreTheOnesCheckAccepts: a shared http client's table,
// in the config command's output and in the jfast.toml jfast new writes,
// has every key of an upstream's table but the ones check refuses in a
// shared table (docs/http.md, "Every key of [plugin.http.shared.<name>]"),
// and config's output for a service with one passes check.
func TestSharedClientKeysAreTheOnesCheckAccepts(t *testing.T) {
	t.Parallel()
	// Each with a value an upstream's table takes.
	refused := map[string]string{
		"base_url":              `"https://hooks.example.com"`,
		"forward_authorization": "true",
		"instances":             `["http://10.0.0.7:8010"]`,
		"discover":              "true",
		"resolve_every":         `"7s"`,
		"health_path":           `"/ready"`,
		"health_every":          `"7s"`,
		"health_timeout":        `"2s"`,
	}
	dir := t.TempDir()
	write := func(name, text string) string {
		file := filepath.Join(dir, name)
		if err := os.WriteFile(file, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return file
	}
	const service = "[app]\nname = \"orders\"\n[plugins]\nenabled = [\"observability\", \"http\"]\n" +
		"[plugin.http.upstreams.billing]\nbase_url = \"http://127.0.0.1:8010\"\n[plugin.http.shared.hooks]\ntimeout = \"5s\"\n"
	for key, value := range refused {
		if code, _, stderr := jfast(t, "check", "--config", write(key+".toml", service+key+" = "+value+"\n")); code != 1 || !strings.Contains(stderr, "plugin.http.shared.hooks.") {
			t.Errorf("check of %s = %s in a shared table: exit %d, want it refused:\n%s", key, value, code, stderr)
		}
	}
	sameKeys := func(what, text, upstream, shared string) {
		t.Helper()
		up, sh := tableKeys(text, upstream), tableKeys(text, shared)
		if len(up) == 0 || len(sh) == 0 {
			t.Fatalf("%s: no keys under %s or %s:\n%s", what, upstream, shared, text)
		}
		for k := range up {
			if _, no := refused[k]; !no && !sh[k] {
				t.Errorf("%s: the shared table lacks %s, which it takes", what, k)
			}
		}
		for k := range refused {
			if sh[k] {
				t.Errorf("%s: the shared table lists %s, which check refuses there", what, k)
			}
		}
	}

	code, stdout, stderr := jfast(t, "config", "--config", write("jfast.toml", service))
	if code != 0 {
		t.Fatalf("config: exit %d: %s", code, stderr)
	}
	sameKeys("config", stdout, "[plugin.http.upstreams.billing]", "[plugin.http.shared.hooks]")
	if code, _, stderr := jfast(t, "check", "--config", write("printed.toml", stdout)); code != 0 {
		t.Errorf("check of config's output: exit %d:\n%s", code, stderr)
	}

	svc := filepath.Join(t.TempDir(), "shop")
	if code, _, stderr := jfast(t, "new", "shop", "--dir", svc, "--plugins", "http"); code != 0 {
		t.Fatalf("new: exit %d: %s", code, stderr)
	}
	generated, err := os.ReadFile(filepath.Join(svc, "jfast.toml"))
	if err != nil {
		t.Fatal(err)
	}
	sameKeys("jfast new's jfast.toml", string(generated), "[plugin.http.upstreams.example]", "# [plugin.http.shared.<name>]")
}

// tableKeys returns the keys, set or commented ("# key = value"), under the
// header line of text until the next table's.
func tableKeys(text, header string) map[string]bool {
	table := regexp.MustCompile(`^(?:# )?\[[^\] ]+\]$`) // not "# [Route] or …" in a key's doc
	key := regexp.MustCompile(`^(?:# )?([a-z0-9_]+)(?: +=|  \(unset)`)
	keys := map[string]bool{}
	in := false
	for _, line := range strings.Split(text, "\n") {
		if table.MatchString(line) {
			in = line == header
			continue
		}
		if m := key.FindStringSubmatch(line); in && m != nil {
			keys[m[1]] = true
		}
	}
	return keys
}

// TestCheckRefusesListenersOnOnePort: app.listen and the grpc server's listen
// on one address are refused by check, as by the boot, naming both keys.
func TestCheckRefusesListenersOnOnePort(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "jfast.toml")
	text := "[app]\nname = \"orders\"\nlisten = \"127.0.0.1:27200\"\n[plugins]\nenabled = [\"observability\", \"grpc\"]\n[plugin.grpc.server]\nlisten = \"127.0.0.1:27200\"\n"
	if err := os.WriteFile(file, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := jfast(t, "check", "--config", file)
	want := "plugin.grpc.server.listen: is 127.0.0.1:27200, and app.listen is 127.0.0.1:27200: two listeners of this service cannot share a port"
	if code != 1 || !strings.Contains(stderr, want) || !strings.Contains(stderr, "JFAST_GRPC_SERVER__LISTEN") {
		t.Fatalf("exit %d, stderr:\n%s\nwant %s", code, stderr, want)
	}
}

// TestConfigSaysHowChannelsDefaultsAreComputed: the channels plugin's
// key_prefix and group, computed from app.name, say so in config's output.
func TestConfigSaysHowChannelsDefaultsAreComputed(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "jfast.toml")
	text := "[app]\nname = \"orders\"\n[plugins]\nenabled = [\"observability\", \"cache\", \"channels\"]\n[plugin.channels]\ndurable = [\"order.paid\"]\n"
	if err := os.WriteFile(file, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := jfast(t, "config", "--config", file)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`(?m)^key_prefix += "orders:channels:" +# default: app\.name \+ ":channels:"$`),
		regexp.MustCompile(`(?m)^group += "orders" +# default: app\.name$`),
	} {
		if !want.MatchString(stdout) {
			t.Errorf("config output lacks %s:\n%s", want, stdout)
		}
	}
}

// TestCheckRefusesTheMainPoolWithOnlyTenants: the queue's postgres backend
// and the idempotency store run on the db plugin's main pool, which a db
// plugin with only tenant_url_template does not have. Check refuses it, as the
// boot does, naming each key and the fix, instead of passing it to a failed
// Start; with url set beside the template it passes.
func TestCheckRefusesTheMainPoolWithOnlyTenants(t *testing.T) {
	t.Parallel()
	const db = "[plugin.db]\ntenant_url_template = \"postgres://app@127.0.0.1:5432/tenant_{tenant}\"\n"
	for _, c := range []struct {
		name, text string
		want       []string // nil when check passes
	}{
		{"idempotency", "enabled = [\"observability\", \"db\", \"idempotency\"]\n" + db, []string{
			`plugin.idempotency.store: store "postgres" keeps its keys in the db plugin's database, and the db plugin has no main pool ([plugin.db] has only tenant_url_template, no url); fix: set [plugin.db] url (or JFAST_DB_URL), or set [plugin.idempotency] store = "redis" (with the cache plugin)`,
		}},
		{"queue", "enabled = [\"observability\", \"db\", \"queue\"]\n" + db, []string{
			`plugin.queue.backend: backend "postgres" uses the db plugin's pool, and the db plugin has no main pool ([plugin.db] has only tenant_url_template, no url); fix: set [plugin.db] url (or JFAST_DB_URL), or set [plugin.queue] backend = "redis" (with the cache plugin) or "rabbitmq"`,
		}},
		{"mail on the queue", "enabled = [\"observability\", \"db\", \"queue\", \"mail\"]\n" + db + "[plugin.mail]\nhost = \"127.0.0.1\"\nfrom = \"orders@example.com\"\n", []string{
			`plugin.queue.backend: backend "postgres" uses the db plugin's pool, and the db plugin has no main pool`,
		}},
		{"url beside the template", "enabled = [\"observability\", \"db\", \"idempotency\", \"queue\"]\n" + db + "url = \"postgres://app@127.0.0.1:5432/orders\"\n", nil},
	} {
		file := filepath.Join(t.TempDir(), "jfast.toml")
		text := "[app]\nname = \"orders\"\n[plugins]\n" + c.text
		if err := os.WriteFile(file, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		code, stdout, stderr := jfast(t, "check", "--config", file)
		if c.want == nil {
			if code != 0 {
				t.Errorf("%s: exit %d, stderr:\n%s", c.name, code, stderr)
			}
			continue
		}
		if code != 1 {
			t.Errorf("%s: exit %d, stdout %q, want 1", c.name, code, stdout)
		}
		for _, want := range c.want {
			if !strings.Contains(stderr, want) {
				t.Errorf("%s: stderr:\n%s\nwant %s", c.name, stderr, want)
			}
		}
	}
}

// TestConfigPrintsOnlyTheQueueBackendsKeys: the config command prints the
// [plugin.queue.rabbitmq] table only with backend = "rabbitmq", and River's
// keys (schema, dead_retention) only with "postgres"; each output passes
// check (the round trip of TestConfigRoundTripsThroughCheck).
func TestConfigPrintsOnlyTheQueueBackendsKeys(t *testing.T) {
	t.Parallel()
	const service = "[app]\nname = \"orders\"\n[plugins]\nenabled = [\"observability\", \"db\", \"cache\", \"queue\"]\n" +
		"[plugin.db]\nurl = \"postgres://orders:hunter2@127.0.0.1:5432/orders\"\n" +
		"[plugin.cache]\nurl = \"redis://127.0.0.1:6379/0\"\n[plugin.queue]\n"
	for _, tc := range []struct {
		backend         string
		rabbitmq, river bool
	}{
		{"postgres", false, true},
		{"redis", false, false},
		{"rabbitmq", true, false},
	} {
		t.Run(tc.backend, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			file := filepath.Join(dir, "jfast.toml")
			if err := os.WriteFile(file, []byte(service+"backend = \""+tc.backend+"\"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			code, stdout, stderr := jfast(t, "config", "--config", file)
			if code != 0 {
				t.Fatalf("config: exit %d: %s", code, stderr)
			}
			if got := strings.Contains(stdout, "\n[plugin.queue.rabbitmq]\n"); got != tc.rabbitmq {
				t.Errorf("[plugin.queue.rabbitmq] printed: %v, want %v:\n%s", got, tc.rabbitmq, stdout)
			}
			keys := tableKeys(stdout, "[plugin.queue]")
			if !keys["backend"] || !keys["job_timeout"] {
				t.Fatalf("no [plugin.queue] keys:\n%s", stdout)
			}
			for _, k := range []string{"schema", "dead_retention"} {
				if keys[k] != tc.river {
					t.Errorf("%s printed: %v, want %v", k, keys[k], tc.river)
				}
			}
			filled := filepath.Join(dir, "filled.toml")
			if err := os.WriteFile(filled, []byte(strings.ReplaceAll(stdout, "***", "filled-in-secret")), 0o644); err != nil {
				t.Fatal(err)
			}
			if code, _, stderr := jfast(t, "check", "--config", filled); code != 0 {
				t.Errorf("check of config's output: exit %d:\n%s", code, stderr)
			}
		})
	}
}
