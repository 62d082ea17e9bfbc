package framework_test

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/jfasttest"
	jhttp "github.com/jfastframework/jfast/plugins/http"
)

// kennel is a plugin with a table of named entries and two tables whose
// keys are not names: a header table and a free-form one.
type kennel struct {
	cfg struct {
		Dogs       map[string]dog    `koanf:"dogs"`
		Headers    map[string]string `koanf:"headers"`
		Attributes map[string]any    `koanf:"attributes"`
	}
}

type dog struct {
	Legs    int               `koanf:"legs"`
	Headers map[string]string `koanf:"headers"`
}

func (d *dog) SetDefaults() { d.Legs = 4 }

var dogsTable = framework.NamedTable{Plugin: "kennel", Key: "dogs", Noun: "dog", Nouns: "dogs"}

func (k *kennel) Name() string { return "kennel" }
func (k *kennel) Config() any  { return &k.cfg }
func (k *kennel) Validate(v *framework.Validation) {
	framework.ValidateNamed(v, dogsTable, k.cfg.Dogs, func(d dog) []framework.ConfigError {
		var p framework.Problems
		p.Positive("legs", d.Legs)
		return p
	})
}

const kennelHead = "[plugins]\nenabled = [\"kennel\"]\n"

// A quoted key with "." is one key: the loader never splits it into the
// tables its parts name. As the name of an entry it breaks the name rule
// and is refused alone, named as the file spells it; as a key of a table
// it is an unknown key; as a key of a table whose keys are not names (a
// header, an attribute) it is read as written.
func TestQuotedKeyWithADotIsOneKey(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, toml, key string
		words           []string
	}{
		{"entry name", "[plugin.kennel.dogs.\"a.b\"]\nlegs = 3\n", `plugin.kennel.dogs."a.b"`,
			[]string{"is not a valid dog name", "a name is " + framework.NameRule, `[plugin.kennel.dogs.a.b] is the table "b" of the dog "a"`}},
		{"entry name in single quotes", "[plugin.kennel.dogs.'a.b']\n", `plugin.kennel.dogs.'a.b'`,
			[]string{"is not a valid dog name"}},
		{"an entry's table, quoted, next to the entry", "[plugin.kennel.dogs.rex]\nlegs = 4\n[plugin.kennel.dogs.\"rex.headers\"]\nx-extra = \"sneaky\"\n",
			`plugin.kennel.dogs."rex.headers"`, []string{"is not a valid dog name", `the table "headers" of the dog "rex"`}},
		{"entry name in an inline table", "[plugin.kennel]\ndogs = { \"a.b\" = { legs = 0 } }\n", `plugin.kennel.dogs."a.b"`,
			[]string{"is not a valid dog name"}},
		{"key of a table", "[plugin.kennel.dogs.rex]\n\"legs.front\" = 2\n", `plugin.kennel.dogs.rex."legs.front"`,
			[]string{`"legs.front" is one key`, "without quotes"}},
		{"a plugin's table", "[plugin.\"kennel.dogs\".rex]\nlegs = 2\n", `plugin."kennel.dogs"`,
			[]string{"not compiled into this service"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			errs := jfasttest.ConfigErrors(t, jfasttest.Options{TOML: kennelHead + tc.toml, Plugins: []framework.Plugin{&kennel{}}})
			e := errs.Only(t, tc.key)
			for _, w := range tc.words {
				if !strings.Contains(e.Problem+" "+e.Fix, w) {
					t.Errorf("%s: %q lacks %q", tc.key, e.Error(), w)
				}
			}
			if strings.Contains(e.Error(), "\x00") {
				t.Errorf("%q shows the loader's stand-in for the dot", e.Error())
			}
		})
	}
}

// What the tester found: a quoted upstream name "up1.headers" was merged
// into up1's headers, and "a.b" was reported as an upstream a the file
// never wrote.
func TestQuotedUpstreamNameIsNotMerged(t *testing.T) {
	t.Parallel()
	errs := jfasttest.ConfigErrors(t, jfasttest.Options{Plugins: []framework.Plugin{jhttp.New()}, TOML: `
[plugins]
enabled = ["http"]
[plugin.http.upstreams.up1]
base_url = "http://127.0.0.1:1"
[plugin.http.upstreams."up1.headers"]
x-extra = "sneaky"
[plugin.http.upstreams."a.b"]
base_url = "http://127.0.0.1:1"
`})
	if len(errs) != 2 || !errs.Has(`plugin.http.upstreams."up1.headers"`, "is not a valid upstream name") || !errs.Has(`plugin.http.upstreams."a.b"`, "is not a valid upstream name") {
		t.Fatalf("errors:\n%v\nwant the two quoted names refused, nothing else", errs)
	}
}

// A quoted key with "." where its name has "_" ("read.timeout" for
// read_timeout) gets the did-you-mean of a misspelt key, at its own line.
func TestQuotedKeyWithADotSuggestsTheKey(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "jfast.toml")
	text := "[plugins]\nenabled = [\"http\"]\n[plugin.http.upstreams.ok]\nbase_url = \"http://127.0.0.1:1\"\n\"read.timeout\" = \"1s\"\n"
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := framework.New(framework.Options{ConfigFile: path, Plugins: []framework.Plugin{jhttp.New()}, LogOutput: io.Discard})
	var errs framework.ConfigErrors
	if !errors.As(err, &errs) || len(errs) != 1 {
		t.Fatalf("want one error, got %v", err)
	}
	if e := errs[0]; e.Key != `plugin.http.upstreams.ok."read.timeout"` || e.Line != 5 || e.Fix != `did you mean "read_timeout"?` {
		t.Fatalf("error %v (line %d, fix %q); want the key at line 5, did you mean \"read_timeout\"?", e, e.Line, e.Fix)
	}
}

// Header names and free-form keys may have "." in them: quoted, such a key
// is read as written, and its value keeps its source.
func TestQuotedKeyWithADotIsReadWhereKeysAreNotNames(t *testing.T) {
	t.Parallel()
	k := &kennel{}
	app, err := newWith(t, kennelHead+`
[plugin.kennel.headers]
"x.trace" = "1"
[plugin.kennel.attributes]
"deployment.region" = "eu-1"
service.tier = "gold"
[plugin.kennel.attributes.nested]
"a.b" = 1
[plugin.kennel.dogs.rex.headers]
"x.dog" = "woof"
`, k)
	if err != nil {
		t.Fatal(err)
	}
	if got := k.cfg.Headers["x.trace"]; got != "1" || len(k.cfg.Headers) != 1 {
		t.Errorf("headers = %v, want x.trace", k.cfg.Headers)
	}
	if got := k.cfg.Dogs["rex"].Headers["x.dog"]; got != "woof" {
		t.Errorf("rex's headers = %v, want x.dog", k.cfg.Dogs["rex"].Headers)
	}
	a := k.cfg.Attributes
	if a["deployment.region"] != "eu-1" || a["service"].(map[string]any)["tier"] != "gold" || a["nested"].(map[string]any)["a.b"] != int64(1) {
		t.Errorf("attributes = %v", a)
	}
	var b strings.Builder
	if err := app.WriteEffectiveConfig(&b); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), "\x00") {
		t.Errorf("config shows the loader's stand-in for the dot:\n%s", b.String())
	}
}

func newWith(t *testing.T, toml string, p framework.Plugin) (*framework.App, error) {
	t.Helper()
	return jfasttest.New(t, jfasttest.Options{TOML: toml, Plugins: []framework.Plugin{p}})
}

// The error about a quoted name points at the line that writes it.
func TestQuotedKeyErrorHasItsLine(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "jfast.toml")
	text := kennelHead + "[plugin.kennel.dogs.rex]\nlegs = 4\n[plugin.kennel.dogs.\"rex.headers\"]\nx = \"y\"\n"
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := framework.New(framework.Options{ConfigFile: path, Environ: []string{}, Plugins: []framework.Plugin{&kennel{}}, LogOutput: &strings.Builder{}})
	var errs framework.ConfigErrors
	if !errors.As(err, &errs) || len(errs) != 1 {
		t.Fatalf("err = %v, want one configuration error", err)
	}
	if e := errs[0]; e.Line != 5 || e.Key != `plugin.kennel.dogs."rex.headers"` {
		t.Errorf("error %q at line %d, want line 5", e.Error(), e.Line)
	}
}

// A header whose quoted name has "." is as secret as any other header of a
// table declared secret: config never prints its value.
func TestQuotedHeaderWithADotIsMasked(t *testing.T) {
	t.Parallel()
	app, err := jfasttest.New(t, jfasttest.Options{Plugins: []framework.Plugin{jhttp.New()}, TOML: `
[plugins]
enabled = ["http"]
[plugin.http.upstreams.up1]
base_url = "http://127.0.0.1:1"
[plugin.http.upstreams.up1.headers]
"x.partner-auth" = "sekrit-value"
`})
	if err != nil {
		t.Fatal(err)
	}
	if !app.IsSecret("plugin.http.upstreams.up1.headers.x.partner-auth") {
		t.Error("the header is not a secret")
	}
	var b strings.Builder
	if err := app.WriteEffectiveConfig(&b); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), "sekrit-value") || !strings.Contains(b.String(), "x.partner-auth") {
		t.Errorf("config:\n%s\nwant the header named and its value masked", b.String())
	}
}
