package framework_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/jfasttest"
)

// configErrors builds an App that must fail and returns its errors by key.
func configErrors(t *testing.T, o jfasttest.Options) map[string]framework.ConfigError {
	t.Helper()
	_, err := jfasttest.New(t, o)
	var errs framework.ConfigErrors
	if !errors.As(err, &errs) {
		t.Fatalf("want ConfigErrors, got %v", err)
	}
	byKey := map[string]framework.ConfigError{}
	for _, e := range errs {
		byKey[e.Key] = e
	}
	return byKey
}

func TestDefaultsWithoutAnyFile(t *testing.T) {
	t.Parallel()
	app, err := jfasttest.New(t, jfasttest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := app.Config()
	want := framework.DefaultAppConfig()
	want.Listen = "127.0.0.1:0" // jfasttest's JFAST_APP_LISTEN
	if !reflect.DeepEqual(cfg, want) {
		t.Fatalf("config = %+v, want %+v", cfg, want)
	}
	if !app.Enabled("observability") {
		t.Fatal("observability is not enabled by default")
	}
}

func TestDurationsAcceptStringsAndBareSeconds(t *testing.T) {
	t.Parallel()
	app, err := jfasttest.New(t, jfasttest.Options{TOML: `
[app]
request_timeout = "250ms"
readiness_timeout = 3
shutdown_timeout = 1.5
`, Env: map[string]string{"JFAST_APP_START_TIMEOUT": "7"}})
	if err != nil {
		t.Fatal(err)
	}
	cfg := app.Config()
	if cfg.RequestTimeout != 250*time.Millisecond || cfg.ReadinessTimeout != 3*time.Second ||
		cfg.ShutdownTimeout != 1500*time.Millisecond || cfg.StartTimeout != 7*time.Second {
		t.Fatalf("durations = %v %v %v %v", cfg.RequestTimeout, cfg.ReadinessTimeout, cfg.ShutdownTimeout, cfg.StartTimeout)
	}
}

// TestDurationsOutOfRangeAreRefused: a bare number of seconds longer than a
// time.Duration holds (2^63-1 ns, 9223372036 s) is refused naming its key,
// from the file as an integer, a float or text and from the environment,
// where it would wrap around into 290 ms or a negative duration; "inf" and
// "nan", which read as numbers, are not durations. The largest that fits
// still binds exactly.
func TestDurationsOutOfRangeAreRefused(t *testing.T) {
	t.Parallel()
	const fix = `; fix: write a duration such as "250ms" or "5s", or a number of seconds`
	const tooLong = " seconds is out of range: a duration holds at most 9223372036 seconds (about 292 years)" + fix
	tests := []struct{ toml, env, key, want string }{
		{"request_timeout = 18446744074", "", "app.request_timeout", "app.request_timeout: 18446744074" + tooLong},
		{"request_timeout = 9223372037", "", "app.request_timeout", "app.request_timeout: 9223372037" + tooLong},
		{"request_timeout = 1e19", "", "app.request_timeout", "app.request_timeout: 1e+19" + tooLong},
		{"request_timeout = \"-9223372037\"", "", "app.request_timeout", "app.request_timeout: -9223372037" + tooLong},
		{"drain_delay = \"inf\"", "", "app.drain_delay", `app.drain_delay: "inf" is not a duration` + fix},
		{"drain_delay = \"NaN\"", "", "app.drain_delay", `app.drain_delay: "NaN" is not a duration` + fix},
		{"", "18446744074", "app.shutdown_timeout", "app.shutdown_timeout (JFAST_APP_SHUTDOWN_TIMEOUT): 18446744074" + tooLong},
	}
	for _, tt := range tests {
		o := jfasttest.Options{TOML: "[app]\n" + tt.toml + "\n"}
		if tt.env != "" {
			o.Env = map[string]string{"JFAST_APP_SHUTDOWN_TIMEOUT": tt.env}
		}
		errs := configErrors(t, o)
		if got := errs[tt.key].Error(); got != tt.want {
			t.Errorf("%s%s:\n got %s\nwant %s", tt.toml, tt.env, got, tt.want)
		}
	}
	app, err := jfasttest.New(t, jfasttest.Options{TOML: "[app]\nidle_timeout = 9223372036\n"})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := app.Config().IdleTimeout, 9223372036*time.Second; got != want {
		t.Errorf("idle_timeout = 9223372036: %v, want %v", got, want)
	}
}

func TestDeployKeyTakesEnvironmentOverFileWithWarning(t *testing.T) {
	t.Parallel()
	p := newFake("fake", nil)
	o := jfasttest.Options{
		TOML: `
[plugins]
enabled = ["fake"]
[plugin.fake]
address = "file-host:1"
[plugin.fake.targets.billing]
url = "http://billing.file:8010"
`,
		Plugins: []framework.Plugin{p},
		Env: map[string]string{
			"JFAST_FAKE_ADDRESS":               "env-host:2",
			"JFAST_FAKE_TARGETS__BILLING__URL": "http://billing.env:8010",
		},
	}
	svc := jfasttest.Start(t, o)
	if p.cfg.Address != "env-host:2" {
		t.Fatalf("address = %q, want the environment's", p.cfg.Address)
	}
	if got := p.cfg.Targets["billing"].URL; got != "http://billing.env:8010" {
		t.Fatalf("targets.billing.url = %q, want the environment's", got)
	}
	if got := p.cfg.Targets["billing"].Timeout; got != 5*time.Second {
		t.Fatalf("a map entry did not start from its defaults: timeout = %v", got)
	}
	logs := svc.Logs()
	for _, want := range []string{
		"plugin.fake.address: JFAST_FAKE_ADDRESS and config disagree; the environment wins",
		"plugin.fake.targets.billing.url: JFAST_FAKE_TARGETS__BILLING__URL and config disagree",
	} {
		if !strings.Contains(logs, want) {
			t.Errorf("logs lack %q:\n%s", want, logs)
		}
	}
	if strings.Contains(logs, "env-host") || strings.Contains(logs, "file-host") {
		t.Errorf("the warning printed a deploy key's value:\n%s", logs)
	}
	if !strings.Contains(logs, "level=WARN") {
		t.Errorf("the disagreement is not a WARNING:\n%s", logs)
	}
	src := svc.Sources()
	if src["plugin.fake.address"] != "env JFAST_FAKE_ADDRESS" {
		t.Errorf("source of plugin.fake.address = %q", src["plugin.fake.address"])
	}
}

func TestShapeKeyTakesFileOverEnvironmentWithWarning(t *testing.T) {
	t.Parallel()
	p := newFake("fake", nil)
	svc := jfasttest.Start(t, jfasttest.Options{
		TOML: `
[plugins]
enabled = ["fake"]
[plugin.fake]
timeout = "3s"
`,
		Plugins: []framework.Plugin{p},
		Env: map[string]string{
			"JFAST_FAKE_TIMEOUT": "9s",
			"JFAST_FAKE_RETRIES": "4", // not in the file: the environment is used
		},
	})
	if p.cfg.Timeout != 3*time.Second {
		t.Fatalf("timeout = %v, want the file's 3s", p.cfg.Timeout)
	}
	if p.cfg.Retries != 4 {
		t.Fatalf("retries = %d, want the environment's 4 (the file does not set it)", p.cfg.Retries)
	}
	want := `plugin.fake.timeout: JFAST_FAKE_TIMEOUT is ignored; config wins because plugin.fake.timeout is a shape key`
	logs := svc.Logs()
	if !strings.Contains(logs, want) || !strings.Contains(logs, "level=WARN") {
		t.Fatalf("logs lack the WARNING %q:\n%s", want, logs)
	}
	// A value can be a secret under a key no plugin declared: neither side's is shown.
	if line := lineWith(logs, "JFAST_FAKE_TIMEOUT"); strings.Contains(line, "9s") || strings.Contains(line, "3s") {
		t.Fatalf("the WARNING prints a value: %s", line)
	}
}

func TestUnknownKeysAreErrorsWithSuggestions(t *testing.T) {
	t.Parallel()
	errs := configErrors(t, jfasttest.Options{
		TOML: `
[app]
request_timout = "5s"
[plugins]
enabled = ["fake"]
[plugin.fake]
adress = "x:1"
[plugin.fake.targets.billing]
url = "http://b"
timeot = "1s"
[plugin.fak]
x = 1
[aap]
name = "x"
`,
		Plugins: []framework.Plugin{newFake("fake", nil)},
	})
	cases := map[string]string{
		"app.request_timout":                 `did you mean "request_timeout"?`,
		"plugin.fake.adress":                 `did you mean "address"?`,
		"plugin.fake.targets.billing.timeot": `did you mean "timeout"?`,
		"plugin.fak":                         "did you mean [plugin.fake]?",
		"aap":                                `did you mean "app"?`,
	}
	for key, fix := range cases {
		e, ok := errs[key]
		if !ok {
			t.Errorf("no error for %s; got %v", key, errs)
			continue
		}
		if !strings.Contains(e.Fix, fix) {
			t.Errorf("%s: fix = %q, want it to contain %q", key, e.Fix, fix)
		}
	}
}

// A renamed policy key is refused, never read as an alias: the error names
// the new key and how to convert the value, in the file and in a variable.
func TestRenamedKeysAreRefused(t *testing.T) {
	t.Parallel()
	errs := configErrors(t, jfasttest.Options{
		TOML: `
[plugins]
enabled = ["fake"]
[plugin.fake.targets.billing]
url = "http://b"
total_timeout = "1s"
`,
		Plugins: []framework.Plugin{newFake("fake", nil)},
		Env:     map[string]string{"JFAST_FAKE_TARGETS__CRM__TOTAL_TIMEOUT": "2s"},
	})
	e, ok := errs["plugin.fake.targets.billing.total_timeout"]
	if !ok || e.Problem != `was renamed to "timeout"` || !strings.HasPrefix(e.Fix, "write timeout instead") {
		t.Errorf("file: error %+v, want the renamed key named; all: %v", e, errs)
	}
	e, ok = errs["JFAST_FAKE_TARGETS__CRM__TOTAL_TIMEOUT"]
	if !ok || !strings.Contains(e.Problem, `was renamed to "timeout"`) || !strings.HasPrefix(e.Fix, "write JFAST_FAKE_TARGETS__CRM__TIMEOUT instead") {
		t.Errorf("environment: error %+v, want the renamed variable named; all: %v", e, errs)
	}
}

func TestEnvironmentUnknownKeyIsAnError(t *testing.T) {
	t.Parallel()
	// No file holds the key: the error names the variable, and suggests one.
	errs := configErrors(t, jfasttest.Options{
		TOML:    "[plugins]\nenabled = [\"fake\"]\n",
		Plugins: []framework.Plugin{newFake("fake", nil)},
		Env:     map[string]string{"JFAST_APP_LISTN": "127.0.0.1:1", "JFAST_FAKE_ADRESS": "x:1"},
	})
	for name, fix := range map[string]string{"JFAST_APP_LISTN": "did you mean JFAST_APP_LISTEN?", "JFAST_FAKE_ADRESS": "did you mean JFAST_FAKE_ADDRESS?"} {
		if e, ok := errs[name]; !ok || e.Fix != fix {
			t.Errorf("%s: error %+v, want the fix %q; all: %v", name, e, fix, errs)
		}
	}
	if _, ok := errs["plugin.fake.adress"]; ok {
		t.Errorf("the error names a key no file holds: %v", errs)
	}
}

// TestUnknownKeyWithNoCloseMatchListsTheKnownKeys: an unknown key with no
// known key within edit distance 2 gets the table's known keys, in the
// file's words from the file and as variables from the environment.
func TestUnknownKeyWithNoCloseMatchListsTheKnownKeys(t *testing.T) {
	t.Parallel()
	errs := configErrors(t, jfasttest.Options{
		TOML:    "[plugins]\nenabled = [\"fake\"]\n[plugin.fake]\ncolour = \"red\"\n",
		Plugins: []framework.Plugin{newFake("fake", nil)},
		Env: map[string]string{
			"JFAST_FAKE_FLAVOUR":                "vanilla",
			"JFAST_FAKE_TARGETS__CRM__URL":      "http://crm",
			"JFAST_FAKE_TARGETS__CRM__PRIORITY": "1",
		},
	})
	for key, fix := range map[string]string{
		"plugin.fake.colour":                "remove it; known keys here: address, retries, secret, targets, timeout",
		"JFAST_FAKE_FLAVOUR":                "remove the variable; known variables here: JFAST_FAKE_ADDRESS, JFAST_FAKE_RETRIES, JFAST_FAKE_SECRET, JFAST_FAKE_TARGETS, JFAST_FAKE_TIMEOUT",
		"JFAST_FAKE_TARGETS__CRM__PRIORITY": "remove the variable; known variables here: JFAST_FAKE_TARGETS__CRM__TIMEOUT, JFAST_FAKE_TARGETS__CRM__URL",
	} {
		if e, ok := errs[key]; !ok || e.Fix != fix {
			t.Errorf("%s: fix %q, want %q; all: %v", key, e.Fix, fix, errs)
		}
	}
}

func TestTOMLErrorsSayWhere(t *testing.T) {
	t.Parallel()
	cases := []struct{ name, text, key, problem, fix string }{
		{"duplicate key", "[app]\nname = \"x\"\nname = \"y\"\n", "config:3:1",
			"key name is already defined (first at line 2); line 3 reads `name = \"y\"`", "remove line 3 or merge it with line 2"},
		{"duplicate table", "[app]\nname = \"x\"\n[plugins]\n[app]\n", "config:4:2",
			"table app already exists (first at line 1)", "remove line 4"},
		{"unterminated string", "[app]\nname = \"x\n", "config:2:10",
			"line 2 reads `name = \"x`", "close the string on line 2"},
		{"secret on the line", "[plugin.fake]\nsecret = \"hunter2\n", "config:2:18",
			"line 2 reads `secret = ***`", "close the string on line 2"},
		// Only secrets are masked: an address (a deploy key) is what the
		// reader must correct, and a URL's password is masked alone.
		{"address on the line", "[plugins]\nenabled = [\"fake\"]\n[plugin.fake]\naddress = 127.0.0.1:5432\n", "config:4:16",
			"line 4 reads `address = 127.0.0.1:5432`", "correct the TOML at line 4"},
		{"password in a URL on the line", "[plugin.fake.targets.a]\nurl = postgres://u:hunter2@db/x\n", "config:2:",
			"line 2 reads `url = postgres://u:***@db/x`", "correct the TOML at line 2"},
		// A conflict the decoder finds after parsing, with no position of
		// its own: the line of the expression that makes it.
		{"table extending a value", "[plugins]\nenabled = [\"fake\"]\n[plugin.fake]\ntargets = \"x\"\n[plugin.fake.targets.a]\nurl = \"http://a\"\n", "config:5:",
			"expected targets to be a table, not a value; line 5 reads `[plugin.fake.targets.a]`", "correct the TOML at line 5"},
		// The parser runs on past a missing ] to the next table: the
		// mistake is where the array opens.
		{"unclosed array", "[app]\nname = \"x\"\n\n[plugins]\nenabled = [\"observability\", # the first\n  \"fake\"\n\n[plugin.fake]\nretries = 1\n", "config:5:11",
			"the array opened on line 5, column 11 is not closed (array elements must be separated by commas); line 5 reads `enabled = [\"observability\", # the first`", "close the array that line 5 opens with ]"},
		{"unclosed array after a string holding brackets", "[plugins]\nenabled = [\"[fake]\", \"x\"\nother = [1, [2,\n3]]\n[app]\n", "config:2:11",
			"the array opened on line 2", "close the array that line 2 opens with ]"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			errs := configErrors(t, jfasttest.Options{TOML: c.text, Plugins: []framework.Plugin{newFake("fake", nil)}})
			e, ok := errs[c.key]
			for k, v := range errs {
				if strings.HasSuffix(c.key, ":") && strings.HasPrefix(k, c.key) {
					e, ok = v, true // any column
				}
			}
			if !ok || !strings.Contains(e.Problem, c.problem) || !strings.Contains(e.Fix, c.fix) {
				t.Fatalf("errors %v, want %s: ...%s...; fix: ...%s...", errs, c.key, c.problem, c.fix)
			}
			if strings.Contains(e.Error(), "hunter2") {
				t.Fatalf("a secret reached the error: %v", e)
			}
		})
	}
}

// TestFileErrorsNameTheirLine: an error about a value of the file names the
// line that writes it, found as TOML reads the file (the same key name under
// another table, in a comment or in a string does not count); an error about
// a value of the environment names none.
func TestFileErrorsNameTheirLine(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "jfast.toml")
	text := `[app]
name = "x" # request_timout = "1s" is not this line
request_timout = "5s"

[plugins]
enabled = ["fake"]

[plugin.fake]
description = "retries = 'ten' is not this line either"
"retries" = "ten"
targets.a = { url = "http://a", timeout = "soon" }

[plugin.fake.targets.b]
url = "http://b"
timeout = "later"

[plugin.absent.upstreams.x]
target = "y"
`
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := framework.New(framework.Options{
		ConfigFile: path,
		Plugins:    []framework.Plugin{newFake("fake", nil)},
		Environ:    []string{"JFAST_APP_SHUTDOWN_TIMEOUT=soon"},
		LogOutput:  io.Discard,
	})
	var errs framework.ConfigErrors
	if !errors.As(err, &errs) {
		t.Fatalf("want ConfigErrors, got %v", err)
	}
	want := map[string]int{
		"app.request_timout":            3,
		"plugin.fake.description":       9,
		"plugin.fake.retries":           10,
		"plugin.fake.targets.a.timeout": 11, // in an inline table: its key's line
		"plugin.fake.targets.b.timeout": 15,
		"plugin.absent":                 17, // written only through a subtable: its first line
		"app.shutdown_timeout":          0,  // from the environment
	}
	got := map[string]int{}
	for _, e := range errs {
		got[e.Key] = e.Line
		if e.Line > 0 && (e.File != path || !strings.HasPrefix(e.Error(), fmt.Sprintf("%s:%d: %s: ", path, e.Line, e.Key))) {
			t.Errorf("%s: Error() = %q, want it to begin with the file, the line and the key", e.Key, e.Error())
		}
	}
	for key, line := range want {
		if l, ok := got[key]; !ok || l != line {
			t.Errorf("%s: line %d (reported: %v), want %d; all: %v", key, l, ok, line, errs)
		}
	}
}

// TestListElementErrorsNameTheirLine: an error about an element of a list
// (app.admin_hosts[1]) names the line of the list's key, not its table's;
// with the list from the environment, none.
func TestListElementErrorsNameTheirLine(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "jfast.toml")
	text := "[app]\nname = \"x\"\n\nadmin_hosts = [\"a.internal\", \"b.internal:9000\"]\n"
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		environ []string
		line    int
	}{
		{nil, 4},
		{[]string{"JFAST_APP_ADMIN_HOSTS=a.internal,b.internal:9000"}, 0},
	} {
		_, err := framework.New(framework.Options{ConfigFile: path, Environ: tc.environ, LogOutput: io.Discard})
		var errs framework.ConfigErrors
		if !errors.As(err, &errs) || len(errs) != 1 || errs[0].Key != "app.admin_hosts[1]" {
			t.Fatalf("environ %v: want one error about app.admin_hosts[1], got %v", tc.environ, err)
		}
		if errs[0].Line != tc.line {
			t.Errorf("environ %v: line %d, want %d (%v)", tc.environ, errs[0].Line, tc.line, errs[0])
		}
	}
}

// TestDottedKeyErrorsNameTheirLine: an unknown key written as a dotted key
// (foo.bar = 1) is named at the line that writes it, not at its table's
// header.
func TestDottedKeyErrorsNameTheirLine(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "jfast.toml")
	if err := os.WriteFile(path, []byte("[app]\nname = \"x\"\n\nfoo.bar = 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := framework.New(framework.Options{ConfigFile: path, LogOutput: io.Discard})
	var errs framework.ConfigErrors
	if !errors.As(err, &errs) || len(errs) != 1 || errs[0].Key != "app.foo" || errs[0].Line != 4 {
		t.Fatalf("want one error about app.foo at line 4, got %v", err)
	}
}

// TestEnvironmentErrorsNameTheirVariable: an error about a value the
// environment set names the variable that set it, after the key, whether the
// value has the wrong type or breaks a rule; an element of a list names the
// list's variable. A value of the file names its line and no variable.
func TestEnvironmentErrorsNameTheirVariable(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "jfast.toml")
	text := "[app]\nidle_timeout = \"0s\"\n[plugins]\nenabled = [\"fake\"]\n"
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := framework.New(framework.Options{
		ConfigFile: path,
		Plugins:    []framework.Plugin{newFake("fake", nil)},
		Environ: []string{
			"JFAST_APP_REQUEST_TIMEOUT=0",                   // a rule: must be positive
			"JFAST_APP_SHUTDOWN_TIMEOUT=soon",               // a type: not a duration
			"JFAST_FAKE_RETRIES=ten",                        // a type: not an integer
			"JFAST_FAKE_TARGETS__BILLING__TIMEOUT=0",        // a rule, in a map's entry
			"JFAST_FAKE_TARGETS__BILLING__URL=http://b",     // with a valid sibling
			"JFAST_APP_ADMIN_HOSTS=a.internal,b.internal:9", // an element of a list
		},
		LogOutput: io.Discard,
	})
	var errs framework.ConfigErrors
	if !errors.As(err, &errs) {
		t.Fatalf("want ConfigErrors, got %v", err)
	}
	want := map[string]string{
		"app.request_timeout":                 "app.request_timeout (JFAST_APP_REQUEST_TIMEOUT): must be a positive duration, got 0s; fix: ",
		"app.shutdown_timeout":                `app.shutdown_timeout (JFAST_APP_SHUTDOWN_TIMEOUT): "soon" is not a duration; fix: `,
		"plugin.fake.retries":                 `plugin.fake.retries (JFAST_FAKE_RETRIES): must be an integer, got "ten"; fix: `,
		"plugin.fake.targets.billing.timeout": "plugin.fake.targets.billing.timeout (JFAST_FAKE_TARGETS__BILLING__TIMEOUT): must be a positive duration, got 0s; fix: ",
		"app.admin_hosts[1]":                  "app.admin_hosts[1] (JFAST_APP_ADMIN_HOSTS): ",
		"app.idle_timeout":                    path + ":2: app.idle_timeout: must be a positive duration, got 0s; fix: ",
	}
	if len(errs) != len(want) {
		t.Errorf("%d errors, want %d: %v", len(errs), len(want), errs)
	}
	for _, e := range errs {
		prefix, ok := want[e.Key]
		if !ok {
			t.Errorf("unexpected error %v", e)
			continue
		}
		if !strings.HasPrefix(e.Error(), prefix) {
			t.Errorf("%s:\n got %s\nwant it to begin %s", e.Key, e.Error(), prefix)
		}
		if fromFile := e.Key == "app.idle_timeout"; fromFile != (e.EnvVar == "") || fromFile != (e.Line > 0) {
			t.Errorf("%s: EnvVar %q, line %d", e.Key, e.EnvVar, e.Line)
		}
	}
}

// A list from the environment is split on its commas, and the spaces
// around each element are dropped: "a, b" is the list "a,b" is.
func TestEnvironmentListsTrimTheirElements(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		value string
		want  []string
	}{
		{"a.internal,b.internal", []string{"a.internal", "b.internal"}},
		{"a.internal, b.internal", []string{"a.internal", "b.internal"}},
		{" a.internal ,\tb.internal ", []string{"a.internal", "b.internal"}},
		{"a.internal", []string{"a.internal"}},
		{"", []string{}},
	} {
		app, err := jfasttest.New(t, jfasttest.Options{Env: map[string]string{
			"JFAST_APP_ADMIN_HOSTS": tc.value,
			"JFAST_PLUGINS_ENABLED": "observability, fake",
		}, Plugins: []framework.Plugin{newFake("fake", nil)}})
		if err != nil {
			t.Fatalf("%q: %v", tc.value, err)
		}
		if got := app.Config().AdminHosts; !reflect.DeepEqual(got, tc.want) {
			t.Errorf("JFAST_APP_ADMIN_HOSTS=%q: admin_hosts = %q, want %q", tc.value, got, tc.want)
		}
		if !app.Enabled("fake") {
			t.Errorf("JFAST_PLUGINS_ENABLED=\"observability, fake\": fake is not enabled")
		}
	}
}

func TestPluginTableForPluginsAndOneSuggestion(t *testing.T) {
	t.Parallel()
	errs := configErrors(t, jfasttest.Options{
		TOML:    "[plugin]\nenabled = [\"fake\"]\n[plugin.fak]\nx = 1\n",
		Plugins: []framework.Plugin{newFake("fake", nil)},
	})
	if e := errs["plugin.enabled"]; !strings.Contains(e.Fix, "[plugins]") {
		t.Errorf("plugin.enabled: %+v, want a fix naming [plugins]", e)
	}
	if e := errs["plugin.fak"]; e.Fix != "did you mean [plugin.fake]?" {
		t.Errorf("plugin.fak: fix %q, want one suggestion", e.Fix)
	}
}

// A plugin's table written under [plugins] (one s too many) is named with
// its right name, not only as an unknown key of the list's table.
func TestPluginTableUnderPlugins(t *testing.T) {
	t.Parallel()
	errs := configErrors(t, jfasttest.Options{
		TOML:    "[plugins]\nenabled = [\"fake\"]\n[plugins.fake]\nx = 1\n",
		Plugins: []framework.Plugin{newFake("fake", nil)},
	})
	if e := errs["plugins.fake"]; e.Fix != "write the plugin's table as [plugin.fake] (without an s)" || !strings.Contains(e.Problem, "holds the list") {
		t.Errorf("plugins.fake: %+v, want the table's right name", e)
	}
	if len(errs) != 1 {
		t.Errorf("errors %v, want the one about [plugins.fake]", errs)
	}
}

func TestWrongTypesSayWhatToWrite(t *testing.T) {
	t.Parallel()
	errs := configErrors(t, jfasttest.Options{
		TOML:    "[plugins]\nenabled = [\"fake\"]\n[plugin.fake]\nretries = \"ten\"\n",
		Plugins: []framework.Plugin{newFake("fake", nil)},
	})
	if e := errs["plugin.fake.retries"]; e.Problem != `must be an integer, got "ten"` {
		t.Fatalf("retries: %+v", e)
	}
}

// A listening address is a deploy key, but no secret: the rules that check
// one quote it, as docs/framework.md says (Secrets), while a value of the
// wrong type for it is named by its kind only.
func TestListenErrorsQuoteTheAddress(t *testing.T) {
	t.Parallel()
	tests := []struct{ key, env, value, want string }{
		{"app.listen", "JFAST_APP_LISTEN", "25810", `app.listen (JFAST_APP_LISTEN): must be host:port, got "25810"; fix: set listen = "127.0.0.1:8000" (":8000" listens on every interface), or JFAST_APP_LISTEN`},
		{"app.listen", "JFAST_APP_LISTEN", "127.0.0.1:", `app.listen (JFAST_APP_LISTEN): has no port, got "127.0.0.1:"; fix: set listen = "127.0.0.1:8000" (":8000" listens on every interface), or JFAST_APP_LISTEN`},
		{"app.listen", "JFAST_APP_LISTEN", "127.0.0.1:80000", `app.listen (JFAST_APP_LISTEN): port must be from 0 to 65535, got "127.0.0.1:80000"; fix: set listen = "127.0.0.1:8000" (":8000" listens on every interface), or JFAST_APP_LISTEN`},
		{"app.admin_listen", "JFAST_APP_ADMIN_LISTEN", "9000", `app.admin_listen (JFAST_APP_ADMIN_LISTEN): must be host:port, got "9000"; fix: set admin_listen = "127.0.0.1:9000", or leave it unset to serve /metrics on the public listener`},
	}
	for _, tt := range tests {
		errs := configErrors(t, jfasttest.Options{Env: map[string]string{tt.env: tt.value}})
		if got := errs[tt.key].Error(); got != tt.want {
			t.Errorf("%s=%s:\n got %s\nwant %s", tt.env, tt.value, got, tt.want)
		}
	}
	_, err := framework.New(framework.Options{ConfigText: "[app]\nlisten = { host = \"127.0.0.1\" }", Environ: []string{}, LogOutput: io.Discard})
	if want := "app.listen: must be a string, got a table (not shown: app.listen is a deploy key or a secret)"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("a table for app.listen: got %v, want %s", err, want)
	}
}

// TestListenRefusesWhatTheListenerCannotUse: a listen address the
// listener would fail on at start (a space around or inside it, a port name
// no service has) is refused by the validation, so by check too, naming the
// key and the fix, for app.listen and app.admin_listen alike.
func TestListenRefusesWhatTheListenerCannotUse(t *testing.T) {
	t.Parallel()
	const listenFix = `; fix: set listen = "127.0.0.1:8000" (":8000" listens on every interface), or JFAST_APP_LISTEN`
	tests := []struct{ env, value, want string }{
		{"JFAST_APP_LISTEN", " 127.0.0.1:0", `app.listen (JFAST_APP_LISTEN): must be host:port without spaces, got " 127.0.0.1:0"` + listenFix},
		{"JFAST_APP_LISTEN", "127.0.0.1:0 ", `app.listen (JFAST_APP_LISTEN): must be host:port without spaces, got "127.0.0.1:0 "` + listenFix},
		{"JFAST_APP_LISTEN", "127.0.0.1: 0", `app.listen (JFAST_APP_LISTEN): must be host:port without spaces, got "127.0.0.1: 0"` + listenFix},
		{"JFAST_APP_LISTEN", "127.0.0.1:\t8000", `app.listen (JFAST_APP_LISTEN): must be host:port without spaces, got "127.0.0.1:\t8000"` + listenFix},
		{"JFAST_APP_LISTEN", "127.0.0.1:htttp", `app.listen (JFAST_APP_LISTEN): port must be a number from 0 to 65535 or a known service name, got "127.0.0.1:htttp"` + listenFix},
		{"JFAST_APP_ADMIN_LISTEN", "127.0.0.1:9000 ", `app.admin_listen (JFAST_APP_ADMIN_LISTEN): must be host:port without spaces, got "127.0.0.1:9000 "; fix: set admin_listen = "127.0.0.1:9000", or leave it unset to serve /metrics on the public listener`},
	}
	for _, tt := range tests {
		key := "app.listen"
		if tt.env == "JFAST_APP_ADMIN_LISTEN" {
			key = "app.admin_listen"
		}
		errs := configErrors(t, jfasttest.Options{Env: map[string]string{tt.env: tt.value}})
		if got := errs[key].Error(); got != tt.want {
			t.Errorf("%s=%q:\n got %s\nwant %s", tt.env, tt.value, got, tt.want)
		}
	}
	// A service name the listener knows still passes (net.Listen looks it up
	// the same way), as do the forms TestListenIsHostAndPort accepts.
	if _, err := jfasttest.New(t, jfasttest.Options{Env: map[string]string{"JFAST_APP_LISTEN": "127.0.0.1:https"}}); err != nil {
		t.Errorf("listen = 127.0.0.1:https: %v", err)
	}
}

func TestListenIsHostAndPort(t *testing.T) {
	t.Parallel()
	for _, listen := range []string{"8000", "127.0.0.1", "127.0.0.1:80000", "127.0.0.1:"} {
		errs := configErrors(t, jfasttest.Options{Env: map[string]string{"JFAST_APP_LISTEN": listen}})
		if _, ok := errs["app.listen"]; !ok {
			t.Errorf("listen = %q: errors %v, want one on app.listen", listen, errs)
		}
	}
	for _, listen := range []string{":8000", "127.0.0.1:0", "[::1]:8000", "localhost:http"} {
		if _, err := jfasttest.New(t, jfasttest.Options{Env: map[string]string{"JFAST_APP_LISTEN": listen}}); err != nil {
			t.Errorf("listen = %q: %v", listen, err)
		}
	}
}

func TestAnEmptyTableNamesAnEntry(t *testing.T) {
	t.Parallel()
	p := newFake("fake", nil)
	if _, err := jfasttest.New(t, jfasttest.Options{
		TOML:    "[plugins]\nenabled = [\"fake\"]\n[plugin.fake.targets.billing]\n[plugin.fake.targets.stock]\n",
		Plugins: []framework.Plugin{p},
		Env:     map[string]string{"JFAST_FAKE_TARGETS__STOCK__URL": "http://stock"},
	}); err != nil {
		t.Fatal(err)
	}
	if b, ok := p.cfg.Targets["billing"]; !ok || b.Timeout != 5*time.Second {
		t.Errorf("targets = %+v, want billing with its defaults", p.cfg.Targets)
	}
	if s := p.cfg.Targets["stock"]; s.URL != "http://stock" {
		t.Errorf("targets = %+v, want stock's URL from the environment", p.cfg.Targets)
	}
}

func TestIgnoredVariableIsReportedWhenTheConfigIsInvalid(t *testing.T) {
	t.Parallel()
	var logs strings.Builder
	_, err := framework.New(framework.Options{
		ConfigText: "[app]\nlog_level = \"info\"\nshutdown_timeout = 0\n",
		Environ:    []string{"JFAST_APP_LOG_LEVEL=debug"},
		LogOutput:  &logs,
	})
	if err == nil {
		t.Fatal("the configuration is valid")
	}
	want := `app.log_level: JFAST_APP_LOG_LEVEL is ignored; config wins`
	if !strings.Contains(logs.String(), want) {
		t.Fatalf("logs lack %q:\n%s", want, logs.String())
	}
	if line := lineWith(logs.String(), "JFAST_APP_LOG_LEVEL"); strings.Contains(line, "debug") || strings.Contains(line, "info") {
		t.Fatalf("the WARNING prints a value: %s", line)
	}
}

func TestEveryErrorIsReportedAtOnce(t *testing.T) {
	t.Parallel()
	_, err := jfasttest.New(t, jfasttest.Options{
		TOML: `
[app]
env = "prod"
request_timeout = 0
shutdown_timeout = "-1s"
log_level = "loud"
[plugins]
enabled = ["fake"]
[plugin.fake]
timeout = "abc"
retries = "many"
`,
		Plugins: []framework.Plugin{newFake("fake", nil)},
	})
	var errs framework.ConfigErrors
	if !errors.As(err, &errs) {
		t.Fatalf("want ConfigErrors, got %v", err)
	}
	want := []string{"app.env", "app.request_timeout", "app.shutdown_timeout", "app.log_level", "plugin.fake.timeout", "plugin.fake.retries"}
	if len(errs) != len(want) {
		t.Fatalf("got %d errors, want %d:\n%v", len(errs), len(want), err)
	}
	msg := err.Error()
	for _, key := range want {
		if !strings.Contains(msg, key+": ") {
			t.Errorf("message lacks a line for %s:\n%s", key, msg)
		}
	}
	if !strings.HasSuffix(msg, "6 configuration errors") {
		t.Errorf("message does not end with the count:\n%s", msg)
	}
	if lines := strings.Count(msg, "\n"); lines != 6 {
		t.Errorf("want one line per error, got %d lines:\n%s", lines, msg)
	}
}

func TestDeadlinesCannotBeSwitchedOff(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, toml string
		env        map[string]string
		key        string
	}{
		{"zero", "[app]\nrequest_timeout = 0", nil, "app.request_timeout"},
		{"zero string", "[app]\nreadiness_timeout = \"0s\"", nil, "app.readiness_timeout"},
		{"negative", "[app]\nshutdown_timeout = \"-5s\"", nil, "app.shutdown_timeout"},
		{"missing", "", map[string]string{"JFAST_APP_REQUEST_TIMEOUT": ""}, "app.request_timeout"},
		{"plugin zero", "[plugins]\nenabled = [\"fake\"]\n[plugin.fake]\ntimeout = 0", nil, "plugin.fake.timeout"},
		{"map entry negative", "[plugins]\nenabled = [\"fake\"]\n[plugin.fake.targets.billing]\ntimeout = -1", nil, "plugin.fake.targets.billing.timeout"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			errs := configErrors(t, jfasttest.Options{TOML: tc.toml, Env: tc.env, Plugins: []framework.Plugin{newFake("fake", nil)}})
			e, ok := errs[tc.key]
			if !ok || len(errs) != 1 {
				t.Fatalf("want exactly one error for %s, got %v", tc.key, errs)
			}
			if e.Fix == "" {
				t.Fatalf("%s: no fix given", tc.key)
			}
		})
	}
}

func TestEnablingAPluginNotCompiledIn(t *testing.T) {
	t.Parallel()
	errs := configErrors(t, jfasttest.Options{TOML: "[plugins]\nenabled = [\"observability\", \"db\"]"})
	e, ok := errs["plugins.enabled"]
	if !ok {
		t.Fatalf("errors = %v", errs)
	}
	if !strings.Contains(e.Problem, `"db" is enabled but not compiled`) ||
		!strings.Contains(e.Fix, `import "github.com/jfastframework/jfast/plugins/db"`) {
		t.Fatalf("error = %v", e)
	}
}

func TestRequiredDependencyMustBeEnabled(t *testing.T) {
	t.Parallel()
	p := newFake("mailer", nil)
	p.deps = []framework.Dependency{{Name: "jobs"}}
	errs := configErrors(t, jfasttest.Options{
		TOML:    "[plugins]\nenabled = [\"mailer\"]",
		Plugins: []framework.Plugin{p, newFake("jobs", nil)},
	})
	if e, ok := errs["plugins.enabled"]; !ok || !strings.Contains(e.Fix, `add "jobs"`) {
		t.Fatalf("errors = %v", errs)
	}
}

// consumer runs on the plugin called on, as the queue's postgres backend runs
// on the db plugin's main pool.
type consumer struct{ on string }

func (c consumer) Name() string { return "consumer" }
func (c consumer) Validate(v *framework.Validation) {
	v.RequirePlugin("backend", c.on, `backend "x" uses the provider's pool`, `set backend = "y"`)
}

// provider offers its pool only with an address, as the db plugin offers its
// main pool only with url.
type provider struct{ *fakePlugin }

func (p provider) Lacks() (problem, fix string) {
	if p.cfg.Address != "" {
		return "", ""
	}
	return "the provider has no pool (no address)", "set [plugin." + p.name + "] address"
}

// TestRequirePluginAsksTheProvider: a plugin that is enabled but whose table
// leaves out what another runs on is refused at the other's key, with the
// provider's problem and fix beside the other's; the provider's table is
// bound whether its name sorts before the consumer's or after.
func TestRequirePluginAsksTheProvider(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, provider, address, want string // want "" when valid
	}{
		{"bound after the consumer", "zeta", "",
			`plugin.consumer.backend: backend "x" uses the provider's pool, and the provider has no pool (no address); fix: set [plugin.zeta] address, or set backend = "y"`},
		{"bound before the consumer", "alpha", "",
			`plugin.consumer.backend: backend "x" uses the provider's pool, and the provider has no pool (no address); fix: set [plugin.alpha] address, or set backend = "y"`},
		{"with an address", "zeta", "address = \"127.0.0.1:9\"\n", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			es := jfasttest.ConfigErrors(t, jfasttest.Options{
				TOML:    fmt.Sprintf("[plugins]\nenabled = [%q, \"consumer\"]\n[plugin.%s]\n%s", c.provider, c.provider, c.address),
				Plugins: []framework.Plugin{consumer{c.provider}, provider{newFake(c.provider, nil)}},
			})
			if c.want == "" {
				if len(es) > 0 {
					t.Fatalf("refused: %v", es)
				}
				return
			}
			if e := es.Only(t, "plugin.consumer.backend"); e.Error() != c.want {
				t.Fatalf("error\n %q\nwant\n %q", e, c.want)
			}
		})
	}
}

func TestCriticalIsAcceptedForEveryPlugin(t *testing.T) {
	t.Parallel()
	app, err := jfasttest.New(t, jfasttest.Options{TOML: `
[plugins]
enabled = ["observability", "fake"]
[plugin.observability]
critical = false
[plugin.fake]
critical = true
`, Plugins: []framework.Plugin{newFake("fake", nil)}})
	if err != nil {
		t.Fatal(err)
	}
	if !app.Critical("fake") || app.Critical("observability") {
		t.Fatal("critical flags not recorded")
	}
	errs := configErrors(t, jfasttest.Options{TOML: "[plugin.observability]\ncritical = \"yes\""})
	if _, ok := errs["plugin.observability.critical"]; !ok {
		t.Fatalf("errors = %v", errs)
	}
}

func TestConfigFileFromEnvironment(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := dir + "/service.toml"
	if err := writeFile(path, "[app]\nname = \"orders\"\n"); err != nil {
		t.Fatal(err)
	}
	app, err := framework.New(framework.Options{Environ: []string{"JFAST_CONFIG=" + path}})
	if err != nil {
		t.Fatal(err)
	}
	if app.Config().Name != "orders" {
		t.Fatalf("name = %q", app.Config().Name)
	}
	if _, err := framework.New(framework.Options{ConfigFile: dir + "/missing.toml", Environ: []string{}}); err == nil {
		t.Fatal("an explicit config file that does not exist must be an error")
	}
}

func TestEnvironmentForAPluginNotCompiledInIsIgnoredWithAWarning(t *testing.T) {
	t.Parallel()
	// A deployment's environment often carries a sibling service's variables.
	svc := jfasttest.Start(t, jfasttest.Options{Env: map[string]string{"JFAST_DB_URL": "postgres://x@db/orders"}})
	logs := svc.Logs()
	if !strings.Contains(logs, "plugin.db: JFAST_DB_URL configures a plugin this service does not compile in; ignored") || !strings.Contains(logs, "level=WARN") {
		t.Fatalf("no WARNING for JFAST_DB_URL:\n%s", logs)
	}
	if strings.Contains(logs, "postgres://x@db") {
		t.Fatalf("the warning printed the value:\n%s", logs)
	}
	// The same table in the file is the service's own mistake: an error.
	errs := configErrors(t, jfasttest.Options{TOML: "[plugin.db]\nurl = \"postgres://x@db/orders\""})
	if _, ok := errs["plugin.db"]; !ok {
		t.Fatalf("errors = %v", errs)
	}
}

// TestEnvironmentSectionNearAKnownOneIsRefused: a variable whose first
// segment is no section and no plugin compiled in or shipped, but within
// the did-you-mean distance of one, is a misspelling the boot would
// otherwise ignore (leaving the service without the setting), so it is
// refused naming the variable meant; a plugin jfast ships but the service
// does not compile in, or a name close to none, is a sibling's and only
// warned about.
func TestEnvironmentSectionNearAKnownOneIsRefused(t *testing.T) {
	t.Parallel()
	const also = " and no plugin jfast ships or this service compiles in, and it is "
	for _, c := range []struct {
		name string
		env  []string
		want string // the one error, or the warning when the boot accepts the variables
	}{
		{"plugin for plugins", []string{"JFAST_PLUGIN_ENABLED=observability,fake"},
			`JFAST_PLUGIN_ENABLED: "plugin" is no section (app, plugins)` + also + `one edit from "plugins"; fix: did you mean JFAST_PLUGINS_ENABLED? (JFAST_* variables for another service's own plugin need a plugin name unlike "plugins")`},
		{"appp for app", []string{"JFAST_APPP_LISTEN=0.0.0.0:9", "JFAST_APPP_ADMIN_TOKEN=t"},
			`JFAST_APPP_ADMIN_TOKEN, JFAST_APPP_LISTEN: "appp" is no section (app, plugins)` + also + `one edit from "app"; fix: did you mean JFAST_APP_ADMIN_TOKEN, JFAST_APP_LISTEN? (JFAST_* variables for another service's own plugin need a plugin name unlike "app")`},
		{"a shipped plugin misspelt", []string{"JFAST_CAHCE_URL=redis://127.0.0.1:6379"},
			`JFAST_CAHCE_URL: "cahce" is no section (app, plugins)` + also + `two edits from "cache"; fix: did you mean JFAST_CACHE_URL? (JFAST_* variables for another service's own plugin need a plugin name unlike "cache")`},
		{"a compiled plugin misspelt", []string{"JFAST_FAK_ADDRESS=127.0.0.1:1"},
			`JFAST_FAK_ADDRESS: "fak" is no section (app, plugins)` + also + `one edit from "fake"; fix: did you mean JFAST_FAKE_ADDRESS? (JFAST_* variables for another service's own plugin need a plugin name unlike "fake")`},
		{"a shipped plugin not compiled in", []string{"JFAST_DB_URL=postgres://x@db/orders"},
			"plugin.db: JFAST_DB_URL configures a plugin this service does not compile in; ignored"},
		{"a name close to none", []string{"JFAST_EXAMPLES_DIR=/tmp/x", "JFAST_EXAMPLES_RUN=1"},
			"plugin.examples: JFAST_EXAMPLES_DIR, JFAST_EXAMPLES_RUN configure a plugin this service does not compile in; ignored"},
		{"a short name two edits from a short one", []string{"JFAST_CI_BUILD=1"},
			"plugin.ci: JFAST_CI_BUILD configures a plugin this service does not compile in; ignored"},
		{"a name two edits from a long one", []string{"JFAST_STAGE_NAME=blue"},
			"plugin.stage: JFAST_STAGE_NAME configures a plugin this service does not compile in; ignored"},
		{"a short name two edits from a longer one", []string{"JFAST_FAKIR_X=1"},
			"plugin.fakir: JFAST_FAKIR_X configures a plugin this service does not compile in; ignored"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			var logs strings.Builder
			_, err := framework.New(framework.Options{Plugins: []framework.Plugin{newFake("fake", nil)},
				ConfigText: "[plugins]\nenabled = [\"fake\"]\n", Environ: c.env, LogOutput: &logs})
			if !strings.Contains(c.want, "fix: ") {
				if err != nil || !strings.Contains(logs.String(), c.want) {
					t.Fatalf("%v: boot error %v, logs:\n%s\nwant the boot to go on, warning %q", c.env, err, logs.String(), c.want)
				}
				return
			}
			var errs framework.ConfigErrors
			if !errors.As(err, &errs) || len(errs) != 1 || errs[0].Error() != c.want {
				t.Fatalf("%v: boot error\n %v\nwant the one error\n %s", c.env, err, c.want)
			}
		})
	}
}

// lineWith returns the first line of logs that contains s.
func lineWith(logs, s string) string {
	for line := range strings.Lines(logs) {
		if strings.Contains(line, s) {
			return line
		}
	}
	return ""
}

// entriesPlugin has a table of tables whose entries need a url, as the http
// plugin's upstreams need a base_url.
type entriesPlugin struct{ cfg fakeConfig }

func (p *entriesPlugin) Name() string                                { return "entries" }
func (p *entriesPlugin) Config() any                                 { return &p.cfg }
func (p *entriesPlugin) DeployKeys() []string                        { return []string{"targets.*.url"} }
func (p *entriesPlugin) Start(context.Context, *framework.App) error { return nil }
func (p *entriesPlugin) Stop(context.Context) error                  { return nil }
func (p *entriesPlugin) Validate(v *framework.Validation) {
	for name, t := range p.cfg.Targets {
		if t.URL == "" {
			v.Sub("targets."+name).Error("url", "is missing", "set url")
		}
	}
}

// entriesErrors boots the entries plugin with text as its jfast.toml (a
// file, so errors can name its lines) and environ, and returns the error
// lines, the file's path replaced by "jfast.toml", or nil when it boots.
func entriesErrors(t *testing.T, text string, environ ...string) []string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "jfast.toml")
	if err := os.WriteFile(path, []byte("[plugins]\nenabled = [\"entries\"]\n"+text), 0o644); err != nil {
		t.Fatal(err)
	}
	a, err := framework.New(framework.Options{ConfigFile: path, Plugins: []framework.Plugin{&entriesPlugin{}}, Environ: environ, LogOutput: io.Discard})
	if err == nil {
		_ = a
		return nil
	}
	var errs framework.ConfigErrors
	if !errors.As(err, &errs) {
		t.Fatalf("want ConfigErrors, got %v", err)
	}
	var lines []string
	for _, e := range errs {
		lines = append(lines, strings.ReplaceAll(e.Error(), path, "jfast.toml"))
	}
	return lines
}

// An environment variable may create an entry of a table of tables, but
// not one whose name is a near miss of an entry the table has: the
// intended entry would silently keep the file's value.
func TestEnvironmentEntryNearMissIsRefused(t *testing.T) {
	t.Parallel()
	const file = "[plugin.entries.targets.example]\nurl = \"http://example\"\n[plugin.entries.targets.orders]\nurl = \"http://orders\"\n"
	tests := []struct {
		name    string
		text    string
		environ []string
		want    []string
	}{{
		name:    "a deploy key, one edit away",
		text:    file,
		environ: []string{"JFAST_ENTRIES_TARGETS__EXAMPL__URL=http://x"},
		want:    []string{`JFAST_ENTRIES_TARGETS__EXAMPL__URL: would create plugin.entries.targets.exampl, which the file does not have, and "exampl" is one edit from "example"; fix: did you mean JFAST_ENTRIES_TARGETS__EXAMPLE__URL? (to add the entry "exampl" on purpose, declare [plugin.entries.targets.exampl] in the file, or give it a name unlike "example")`},
	}, {
		name:    "a shape key, two edits away, with a second variable",
		text:    file,
		environ: []string{"JFAST_ENTRIES_TARGETS__ORDR__TIMEOUT=3s", "JFAST_ENTRIES_TARGETS__ORDR__URL=http://x"},
		want:    []string{`JFAST_ENTRIES_TARGETS__ORDR__TIMEOUT, JFAST_ENTRIES_TARGETS__ORDR__URL: would create plugin.entries.targets.ordr, which the file does not have, and "ordr" is two edits from "orders"; fix: did you mean JFAST_ENTRIES_TARGETS__ORDERS__TIMEOUT, JFAST_ENTRIES_TARGETS__ORDERS__URL? (to add the entry "ordr" on purpose, declare [plugin.entries.targets.ordr] in the file, or give it a name unlike "orders")`},
	}, {
		name:    "close to an entry the file declares empty",
		text:    "[plugin.entries.targets.example]\n",
		environ: []string{"JFAST_ENTRIES_TARGETS__EXAMPLE__URL=http://x", "JFAST_ENTRIES_TARGETS__EXAMPLES__URL=http://y"},
		want:    []string{`JFAST_ENTRIES_TARGETS__EXAMPLES__URL: would create plugin.entries.targets.examples, which the file does not have, and "examples" is one edit from "example"; fix: did you mean JFAST_ENTRIES_TARGETS__EXAMPLE__URL? (to add the entry "examples" on purpose, declare [plugin.entries.targets.examples] in the file, or give it a name unlike "example")`},
	}, {
		name:    "a name unlike the file's creates the entry",
		text:    file,
		environ: []string{"JFAST_ENTRIES_TARGETS__BILLING__URL=http://billing"},
	}, {
		name:    "an entry the file declares is no near miss",
		text:    file + "[plugin.entries.targets.exampl]\n",
		environ: []string{"JFAST_ENTRIES_TARGETS__EXAMPL__URL=http://x"},
	}, {
		name:    "the intended entry is overridden as before",
		text:    file,
		environ: []string{"JFAST_ENTRIES_TARGETS__EXAMPLE__URL=http://x"},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := entriesErrors(t, tt.text, tt.environ...); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("errors:\n got %q\nwant %q", got, tt.want)
			}
		})
	}
}

// An error about a key of an entry only the environment created names the
// variables that created it, and no line of the file.
func TestErrorsInAnEntryTheEnvironmentCreatedNameItsVariables(t *testing.T) {
	t.Parallel()
	got := entriesErrors(t, "[plugin.entries]\ntimeout = \"2s\"\n[plugin.entries.targets.example]\nurl = \"http://example\"\n",
		"JFAST_ENTRIES_TARGETS__STOCK__TIMEOUT=3s")
	want := []string{"plugin.entries.targets.stock.url: is missing (the entry was created by JFAST_ENTRIES_TARGETS__STOCK__TIMEOUT alone: the file has no [plugin.entries.targets.stock]); fix: set url"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("errors:\n got %q\nwant %q", got, want)
	}
}

// A misspelt plugin in [plugins] enabled is a typo, not a plugin to compile
// in.
func TestMisspeltPluginIsNotCalledNotCompiledIn(t *testing.T) {
	t.Parallel()
	errs := configErrors(t, jfasttest.Options{TOML: "[plugins]\nenabled = [\"observability\", \"cahce\"]"})
	want := `plugins.enabled: plugin "cahce" is enabled, but no plugin has that name; fix: did you mean "cache"?`
	if got := errs["plugins.enabled"].Error(); got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

// TestEmptyPluginNameIsNoTypo: an empty entry of [plugins] enabled (a
// trailing comma in the variable) is refused with the fix of removing it,
// not a did-you-mean to a plugin nobody meant.
func TestEmptyPluginNameIsNoTypo(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		o    jfasttest.Options
		want string
	}{
		{"in the file", jfasttest.Options{TOML: "[plugins]\nenabled = [\"observability\", \"\"]"},
			`plugins.enabled: entry 2 of 2 is empty; fix: remove the "" from the list`},
		{"a trailing comma in the environment", jfasttest.Options{Env: map[string]string{"JFAST_PLUGINS_ENABLED": "observability,"}},
			`plugins.enabled (JFAST_PLUGINS_ENABLED): entry 2 of 2 is empty; fix: remove the comma that has no plugin name after it (or before it)`},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			if got := jfasttest.ConfigErrors(t, c.o).Only(t, "plugins.enabled").Error(); got != c.want {
				t.Errorf("got  %s\nwant %s", got, c.want)
			}
		})
	}
}
