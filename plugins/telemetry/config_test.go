package telemetry_test

import (
	"strings"
	"testing"

	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/jfasttest"
	"github.com/jfastframework/jfast/plugins/telemetry"
)

func configErrors(t *testing.T, toml string) map[string]string {
	t.Helper()
	errs := jfasttest.ConfigErrors(t, jfasttest.Options{
		TOML:    "[plugins]\nenabled = [\"observability\", \"telemetry\"]\n" + toml,
		Plugins: []framework.Plugin{telemetry.New()},
	})
	if len(errs) == 0 {
		t.Fatal("the configuration was accepted; want configuration errors")
	}
	out := map[string]string{}
	for _, e := range errs {
		out[e.Key] = e.Problem
	}
	return out
}

func TestConfigRefusedAtBoot(t *testing.T) {
	t.Parallel()
	errs := configErrors(t, `
[plugin.telemetry]
exporter = "jaeger"
endpoint = "ftp://collector:4318"
sample_ratio = 1.5
export_timeout = "0s"
batch_timeout = "-1s"
max_queue_size = 10
max_export_batch_size = 20
resource_attributes = { region = ["a", "b"] }
`)
	for _, key := range []string{"exporter", "endpoint", "sample_ratio", "export_timeout", "batch_timeout", "max_export_batch_size", "resource_attributes"} {
		if _, ok := errs["plugin.telemetry."+key]; !ok {
			t.Errorf("no error for plugin.telemetry.%s; got %v", key, errs)
		}
	}
	if p := errs["plugin.telemetry.resource_attributes"]; !strings.Contains(p, `"region"`) {
		t.Errorf("resource_attributes problem %q does not name the attribute", p)
	}
}

func TestConfigRefusesCredentialsInEndpoint(t *testing.T) {
	t.Parallel()
	errs := configErrors(t, "[plugin.telemetry]\nendpoint = \"http://user:hunter2@collector:4318\"\nmax_queue_size = 0\n")
	p, ok := errs["plugin.telemetry.endpoint"]
	if !ok || strings.Contains(p, "hunter2") {
		t.Errorf("endpoint error %q (present %v): must be refused without repeating the secret", p, ok)
	}
	if _, ok := errs["plugin.telemetry.max_queue_size"]; !ok {
		t.Errorf("max_queue_size = 0 accepted")
	}
}

func TestConfigUnknownKeySuggests(t *testing.T) {
	t.Parallel()
	_, err := jfasttest.New(t, jfasttest.Options{
		TOML:    "[plugins]\nenabled = [\"observability\", \"telemetry\"]\n[plugin.telemetry]\nsample_rate = 0.5\n",
		Plugins: []framework.Plugin{telemetry.New()},
	})
	if err == nil || !strings.Contains(err.Error(), "sample_ratio") {
		t.Errorf("err = %v, want the unknown key refused with a suggestion of sample_ratio", err)
	}
}

// An untraced path without its leading / is refused by its place in the
// list, as every list's entry is.
func TestConfigRefusesAPathWithoutSlash(t *testing.T) {
	t.Parallel()
	errs := configErrors(t, "[plugin.telemetry]\nuntraced_paths = [\"/live\", \"ready\"]\n")
	if p := errs["plugin.telemetry.untraced_paths[1]"]; p != `"ready" is not a path starting with /` || len(errs) != 1 {
		t.Errorf("errors %v; want plugin.telemetry.untraced_paths[1]: \"ready\" is not a path starting with /", errs)
	}
}
