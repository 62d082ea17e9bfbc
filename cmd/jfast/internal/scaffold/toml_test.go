package scaffold

import (
	"regexp"
	"strings"
	"testing"

	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/jfasttest"
	"github.com/jfastframework/jfast/plugins/http"
)

// generated is the jfast.toml `jfast new` writes for o, and the plugins it
// enables, made afresh.
func generated(t *testing.T, o Options) ([]byte, []framework.Plugin) {
	t.Helper()
	chosen, err := choose(o.Plugins, all)
	if err != nil {
		t.Fatal(err)
	}
	text, err := configFile(o, chosen)
	if err != nil {
		t.Fatal(err)
	}
	var plugins []framework.Plugin
	for _, r := range chosen {
		plugins = append(plugins, all[r.Name]())
	}
	return text, plugins
}

// TestConfigCommentsStateTheDefaultsWritten: no comment in a generated
// jfast.toml (every plugin enabled) states a default other than the one
// its commented key shows. The comments come from Go doc comments, and a
// type several plugins share states its own defaults ("Defaults to 5."
// above the auth plugin's breaker_failures = 1): such a sentence is left
// out, the rest of the comment kept.
func TestConfigCommentsStateTheDefaultsWritten(t *testing.T) {
	t.Parallel()
	o := Options{Name: "shop", Framework: frameworkRoot(t), Available: all, Plugins: Known()}
	text, _ := generated(t, o)
	var block []string // the comment lines above the current line
	checked, kept := 0, 0
	for i, line := range strings.Split(string(text), "\n") {
		m := commentedKey.FindStringSubmatch(line)
		if m == nil {
			if strings.HasPrefix(line, "# ") && !computedKey.MatchString(line) && !commentedTable.MatchString(line) {
				block = append(block, strings.TrimPrefix(line, "# "))
			} else {
				block = nil
			}
			continue
		}
		doc := strings.Join(block, "\n")
		block = nil
		for _, sub := range defaultSentence.FindAllStringSubmatch(doc, -1) {
			agrees, judged := sameDefault(sub[1], m[2])
			if judged && !agrees {
				t.Errorf("line %d: the comment says %q above %s", i+1, strings.Join(strings.Fields(sub[0]), " "), line)
			}
			if judged {
				checked++
			}
			if agrees {
				kept++
			}
		}
	}
	if checked < 100 || kept < 100 {
		t.Fatalf("%d default sentences judged, %d kept: the test no longer reads the file it means to", checked, kept)
	}
}

func TestWithoutWrongDefault(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ doc, shown, want string }{
		{"x is how many.\nDefaults to 5.", "1", "x is how many."},
		{"x is how long, before it lets one probe call\nthrough. Defaults to 15s.", `"30s"`, "x is how long, before it lets one probe call\nthrough."},
		{"x bounds the call. Defaults to 10s. The caller's deadline wins.", `"1s"`, "x bounds the call. The caller's deadline wins."},
		{"x bounds the call. Defaults to 10s.", `"10s"`, "x bounds the call. Defaults to 10s."},
		{"x is the ratio. Defaults to 0.5.", "0.5", "x is the ratio. Defaults to 0.5."},
		{"x is the mode. Defaults to \"full\".", `"window"`, "x is the mode."},
		{"x is the prefix. Defaults to the app's name.", `""`, "x is the prefix. Defaults to the app's name."},
		{"x is off. Defaults to false.", "true", "x is off."},
		{"x waits. Defaults to 1m.", `"1m0s"`, "x waits. Defaults to 1m."},
		{"x is the pool. Defaults to 10 per CPU (GOMAXPROCS).", "20", "x is the pool. Defaults to 10 per CPU (GOMAXPROCS)."},
		{"x is the pool. Defaults to 10 (per process).", "20", "x is the pool."},
	} {
		if got := withoutWrongDefault(tc.doc, tc.shown); got != tc.want {
			t.Errorf("withoutWrongDefault(%q, %s) = %q, want %q", tc.doc, tc.shown, got, tc.want)
		}
	}
}

// TestHeadersCommentIsTrueOfItsTable: the comment jfast new writes above
// the headers of an upstream and of a shared client (one Go doc comment,
// rendered under both tables) names the variable of each table, and that
// variable, for a header whose name has "-", sets that header.
func TestHeadersCommentIsTrueOfItsTable(t *testing.T) {
	t.Parallel()
	text, _ := generated(t, Options{Name: "shop", Framework: frameworkRoot(t), Available: all, Plugins: []string{"http"}})
	for _, c := range []struct {
		table, file string
		headers     func(*http.Config) map[string]string
	}{
		{"upstreams", "[plugin.http.upstreams.ada]\nbase_url = \"http://127.0.0.1:1\"\n", func(c *http.Config) map[string]string { return c.Upstreams["ada"].Headers }},
		{"shared", "[plugin.http.shared.ada]\n", func(c *http.Config) map[string]string { return c.Shared["ada"].Headers }},
	} {
		t.Run(c.table, func(t *testing.T) {
			t.Parallel()
			header := regexp.MustCompile(`^# \[plugin\.http\.` + c.table + `\.[^.\]]+\.headers\]$`)
			var block []string // the comment lines above the current line
			for line := range strings.Lines(string(text)) {
				line = strings.TrimSuffix(line, "\n")
				if header.MatchString(line) {
					break
				}
				if strings.HasPrefix(line, "# ") && !commentedKey.MatchString(line) {
					block = append(block, strings.TrimPrefix(line, "# "))
				} else {
					block = nil
				}
			}
			doc := strings.Join(block, " ")
			pattern := "JFAST_HTTP_" + strings.ToUpper(c.table) + "__<NAME>__HEADERS__<HEADER>"
			if !strings.Contains(doc, pattern) || !strings.Contains(doc, "X-API-KEY is the header x-api-key") {
				t.Fatalf("the comment above [plugin.http.%s.<name>.headers] must name %s and how a header with \"-\" is named:\n%s", c.table, pattern, doc)
			}
			name := strings.NewReplacer("<NAME>", "ADA", "<HEADER>", "X-API-KEY").Replace(pattern)
			p := http.New()
			_, err := jfasttest.New(t, jfasttest.Options{TOML: "[plugins]\nenabled = [\"http\"]\n" + c.file, Plugins: []framework.Plugin{p}, Env: map[string]string{name: "k1"}})
			if err != nil {
				t.Fatal(err)
			}
			if got := c.headers(p.Config().(*http.Config)); got["x-api-key"] != "k1" || len(got) != 1 {
				t.Fatalf("%s set the headers %v, want x-api-key alone", name, got)
			}
		})
	}
}
