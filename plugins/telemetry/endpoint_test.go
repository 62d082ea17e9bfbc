package telemetry

import (
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
// exporter reads.
func TestEndpointPrecedence(t *testing.T) {
	app := func(env map[string]string) (*Plugin, *framework.App) {
		p := New()
		a, err := jfasttest.New(t, jfasttest.Options{
			TOML:    "[plugins]\nenabled = [\"telemetry\"]\n[plugin.telemetry]\nendpoint = \"http://file:4318\"\n",
			Plugins: []framework.Plugin{p},
			Env:     env,
		})
		if err != nil {
			t.Fatal(err)
		}
		return p, a
	}
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "")
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "")
	p, a := app(nil)
	if got := p.endpoint(a); got != "http://file:4318/v1/traces" {
		t.Errorf("file only: %q", got)
	}
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://otel:4318")
	if got := p.endpoint(a); got != "" {
		t.Errorf("OTEL_EXPORTER_OTLP_ENDPOINT set: %q, want \"\" (the exporter reads the variable)", got)
	}
	p, a = app(map[string]string{"JFAST_TELEMETRY_ENDPOINT": "http://deploy:4318"})
	if got := p.endpoint(a); got != "http://deploy:4318/v1/traces" {
		t.Errorf("JFAST_TELEMETRY_ENDPOINT set: %q, want it to win over OTEL_*", got)
	}
}
