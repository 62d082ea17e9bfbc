package framework_test

import (
	"strings"
	"testing"

	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/jfasttest"
	jhttp "github.com/jfastframework/jfast/plugins/http"
)

const upstreamFile = `
[plugins]
enabled = ["http"]
[plugin.http.upstreams.up1]
base_url = "http://127.0.0.1:1"
`

// Each variable here breaks one rule, and is refused by exactly one error
// naming it: "." is no second spelling of "__", a renamed key's error does
// not repeat the variable, and a variable refused alone does not create the
// entry it names (whose missing keys would be a second error of one cause).
func TestEnvironmentVariableRefusedOnce(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, value, problem, fix string
	}{
		{"JFAST_HTTP_UPSTREAMS.UP1.BASE_URL", "http://127.0.0.1:2", `has "." in its name, and only "__" separates the levels of a key`, "rename it JFAST_HTTP_UPSTREAMS__UP1__BASE_URL"},
		{"JFAST_HTTP_UPSTREAMS__UP1.ATTEMPTS", "1", `has "." in its name, and only "__" separates the levels of a key`, "rename it JFAST_HTTP_UPSTREAMS__UP1__ATTEMPTS"},
		{"JFAST_HTTP_UPSTREAMS__UP1.RETRIES", "1", `has "." in its name, and only "__" separates the levels of a key`, "rename it JFAST_HTTP_UPSTREAMS__UP1__RETRIES"},
		{"JFAST_HTTP_UPSTREAMS__NEW.ONE__BASE_URL", "http://127.0.0.1:2", `has "." in its name, and only "__" separates the levels of a key`, "rename it JFAST_HTTP_UPSTREAMS__NEW__ONE__BASE_URL"},
		{"JFAST_HTTP_UPSTREAMS__UP1__RETRIES", "2", `was renamed to "attempts"`, "write JFAST_HTTP_UPSTREAMS__UP1__ATTEMPTS instead"},
		{"JFAST_HTTP_UPSTREAMS__NEWONE__RETRIES", "2", `was renamed to "attempts"`, "write JFAST_HTTP_UPSTREAMS__NEWONE__ATTEMPTS instead"},
		{"JFAST_HTTP_UPSTREAMS__NEWONE__TIMOUT", "2s", `plugin.http.upstreams.newone has no key "timout"`, "did you mean JFAST_HTTP_UPSTREAMS__NEWONE__TIMEOUT?"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			errs := jfasttest.ConfigErrors(t, jfasttest.Options{TOML: upstreamFile, Plugins: []framework.Plugin{jhttp.New()}, Env: map[string]string{tc.name: tc.value}})
			e := errs.Only(t, tc.name)
			if e.Problem != tc.problem || !strings.HasPrefix(e.Fix, tc.fix) {
				t.Errorf("%s: %q, want the problem %q and a fix starting %q", tc.name, e.Error(), tc.problem, tc.fix)
			}
		})
	}
}

// A variable that is not configuration may have "." in its name: it is not
// read at all.
func TestEnvironmentDotOutsideConfigurationIsIgnored(t *testing.T) {
	t.Parallel()
	if _, err := jfasttest.New(t, jfasttest.Options{TOML: upstreamFile, Plugins: []framework.Plugin{jhttp.New()},
		Env: map[string]string{"JFAST_DRILL_A.B": "1", "OTHER.VAR": "1"}}); err != nil {
		t.Fatal(err)
	}
}

// A renamed key is found whatever its case, as a did-you-mean is.
func TestRenamedKeyIsFoundInAnyCase(t *testing.T) {
	t.Parallel()
	for _, key := range []string{"RETRIES", "Retries", "Max_Attempts"} {
		t.Run(key, func(t *testing.T) {
			t.Parallel()
			errs := jfasttest.ConfigErrors(t, jfasttest.Options{TOML: upstreamFile + key + " = 2\n", Plugins: []framework.Plugin{jhttp.New()}})
			e := errs.Only(t, "plugin.http.upstreams.up1."+key)
			if e.Problem != `was renamed to "attempts"` || !strings.HasPrefix(e.Fix, "write attempts instead") {
				t.Errorf("%q, want the rename", e.Error())
			}
		})
	}
}

// A variable whose name has "-" is read: env(1), Docker, Kubernetes and
// systemd set such names, though a shell's export cannot. It names an
// entry or a header with "-" in it, in lower case.
func TestEnvironmentVariableWithADashIsRead(t *testing.T) {
	t.Parallel()
	h := jhttp.New()
	_, err := jfasttest.New(t, jfasttest.Options{TOML: upstreamFile, Plugins: []framework.Plugin{h}, Env: map[string]string{
		"JFAST_HTTP_UPSTREAMS__SEA-SNAKE__BASE_URL":     "http://127.0.0.1:2",
		"JFAST_HTTP_UPSTREAMS__UP1__HEADERS__X-API-KEY": "secret1",
	}})
	if err != nil {
		t.Fatal(err)
	}
	cfg := h.Config().(*jhttp.Config)
	if u, ok := cfg.Upstreams["sea-snake"]; !ok || u.BaseURL != "http://127.0.0.1:2" {
		t.Errorf("upstreams = %v, want sea-snake from its variable", cfg.Upstreams)
	}
	if got := cfg.Upstreams["up1"].Headers["x-api-key"]; got != "secret1" {
		t.Errorf("up1's headers = %v, want x-api-key from its variable", cfg.Upstreams["up1"].Headers)
	}
}
