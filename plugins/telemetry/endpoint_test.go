package telemetry

import (
	"strings"
	"testing"

	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/jfasttest"
)

func TestWithTracesPath(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"http://collector:4318":            "http://collector:4318/v1/traces",
		"http://collector:4318/":           "http://collector:4318/v1/traces",
		"https://otlp.example/v1/traces":   "https://otlp.example/v1/traces",
		"https://otlp.example/custom/path": "https://otlp.example/custom/path",
	} {
		if got := withTracesPath(in); got != want {
			t.Errorf("withTracesPath(%q) = %q, want %q", in, got, want)
		}
	}
}

// Not parallel: it sets process environment variables, which the OTLP
// exporter reads. The endpoint in force is decided once, at New, and the
// effective configuration shows it with its source.
func TestEndpointPrecedence(t *testing.T) {
	app := func(toml string, env map[string]string) (*Plugin, string) {
		p := New()
		a, err := jfasttest.New(t, jfasttest.Options{
			TOML:    "[plugins]\nenabled = [\"telemetry\"]\n[plugin.telemetry]\n" + toml,
			Plugins: []framework.Plugin{p},
			Env:     env,
		})
		if err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		if err := a.WriteEffectiveConfig(&b); err != nil {
			t.Fatal(err)
		}
		return p, b.String()
	}
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "")
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "")
	const file = "endpoint = \"http://file:4318\"\n"
	for _, tc := range []struct {
		name, toml, otel string
		env              map[string]string
		want, shown      string
	}{
		{"file only", file, "", nil, "http://file:4318/v1/traces", `"http://file:4318"  # file`},
		{"nothing", "", "", nil, "", `"https://localhost:4318/v1/traces"  # default: the OTLP exporter's`},
		{"OTEL over the file", file, "http://otel:4318", nil, "", `"http://otel:4318/v1/traces"  # env OTEL_EXPORTER_OTLP_ENDPOINT`},
		{"JFAST over OTEL", file, "http://otel:4318", map[string]string{"JFAST_TELEMETRY_ENDPOINT": "http://deploy:4318"}, "http://deploy:4318/v1/traces", `"http://deploy:4318"  # env JFAST_TELEMETRY_ENDPOINT`},
	} {
		t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", tc.otel)
		p, out := app(tc.toml, tc.env)
		if got := p.endpoint(); got != tc.want {
			t.Errorf("%s: endpoint() = %q, want %q (\"\" lets the exporter read its variables)", tc.name, got, tc.want)
		}
		value, source, _ := strings.Cut(tc.shown, "  # ")
		if line := lineOf(out, "endpoint "); !strings.Contains(line, "= "+value+" ") || !strings.HasSuffix(line, "# "+source) {
			t.Errorf("%s: endpoint shown as %q, want %s with source %q", tc.name, line, value, source)
		}
		if line := lineOf(out, "service_name "); !strings.Contains(line, `= "jfast" `) || !strings.HasSuffix(line, "# default: app.name") {
			t.Errorf("%s: service_name shown as %q", tc.name, line)
		}
	}
}

// lineOf returns the first line of out that starts with prefix.
func lineOf(out, prefix string) string {
	for line := range strings.Lines(out) {
		if strings.HasPrefix(line, prefix) {
			return strings.TrimSpace(line)
		}
	}
	return ""
}
