package llm_test

import (
	"strings"
	"testing"

	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/jfasttest"
	"github.com/jfastframework/jfast/plugins/llm"
)

// primaryTable is a valid [plugin.llm.providers.primary] table; tests append
// keys to it.
const primaryTable = "[plugins]\nenabled = [\"llm\"]\n[plugin.llm.providers.primary]\nbase_url = \"https://api.example.com/v1\"\nmodel = \"m\"\n"

// Every rule of a provider's table refuses the boot naming the key, the
// rule and the fix.
func TestConfigErrors(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		toml string // appended to the primary table
		key  string // the error's key, under plugin.llm.providers.primary
	}{
		{"misspelt key", `read_gapp = "1s"`, "read_gapp"},
		{"zero connect_timeout", `connect_timeout = 0`, "connect_timeout"},
		{"zero read_gap", `read_gap = 0`, "read_gap"},
		{"negative timeout", `timeout = "-1s"`, "timeout"},
		{"read_gap above timeout", "read_gap = \"3m\"\ntimeout = \"1m\"", "read_gap"},
		{"zero attempts", `attempts = 0`, "attempts"},
		{"zero backoff_base", `backoff_base = 0`, "backoff_base"},
		{"backoff_max below backoff_base", "backoff_base = \"2s\"\nbackoff_max = \"1s\"", "backoff_max"},
		{"zero max_retry_after", `max_retry_after = 0`, "max_retry_after"},
		{"retry_budget_ratio above 1", `retry_budget_ratio = 1.5`, "retry_budget_ratio"},
		{"zero retry_budget_min_per_second", `retry_budget_min_per_second = 0`, "retry_budget_min_per_second"},
		{"zero breaker_failures", `breaker_failures = 0`, "breaker_failures"},
		{"zero max_concurrent", `max_concurrent = 0`, "max_concurrent"},
		{"zero bulkhead_wait", `bulkhead_wait = 0`, "bulkhead_wait"},
		{"unknown fallback", `fallback = "backup"`, "fallback"},
		{"fallback to itself", `fallback = "primary"`, "fallback"},
		{"api key with a line break", `api_key = "sk-1\n"`, "api_key"},
		{"proxy with an ftp scheme", `proxy = "ftp://proxy:21"`, "proxy"},
		{"proxy without a host", `proxy = "http://"`, "proxy"},
		{"proxy with a path", `proxy = "http://proxy:3128/x"`, "proxy"},
		{"address_guard with a proxy", "address_guard = true\nproxy = \"http://proxy:3128\"", "address_guard"},
		{"allow_hosts with a scheme", `allow_hosts = ["https://models.internal"]`, "allow_hosts"},
		{"hedge_after: not hedged", `hedge_after = "20ms"`, "hedge_after"},
		{"max_hedges: not hedged", `max_hedges = 2`, "max_hedges"},
		{"max_hedges at its default: not hedged", `max_hedges = 1`, "max_hedges"},
		{"empty hedge_after: not hedged", `hedge_after = ""`, "hedge_after"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			errs := jfasttest.ConfigErrors(t, jfasttest.Options{TOML: primaryTable + c.toml + "\n", Plugins: []framework.Plugin{llm.New()}})
			e, ok := errs.For("plugin.llm.providers.primary." + c.key)
			if !ok {
				t.Fatalf("no error for %s:\n%v", c.key, errs)
			}
			if e.Problem == "" || e.Fix == "" {
				t.Fatalf("error without a problem or a fix: %+v", e)
			}
		})
	}
}

// hedge_after and max_hedges are refused whenever the file or the
// environment sets them, at the default value too, and once each.
func TestHedgingKeysRefusedWhenSet(t *testing.T) {
	t.Parallel()
	for name, o := range map[string]jfasttest.Options{
		"file":         {TOML: primaryTable + "max_hedges = 1\nhedge_after = \"\"\n"},
		"environment":  {TOML: primaryTable, Env: map[string]string{"JFAST_LLM_PROVIDERS__PRIMARY__MAX_HEDGES": "1", "JFAST_LLM_PROVIDERS__PRIMARY__HEDGE_AFTER": ""}},
		"other values": {TOML: primaryTable + "max_hedges = 3\nhedge_after = \"p95\"\n"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			o.Plugins = []framework.Plugin{llm.New()}
			errs := jfasttest.ConfigErrors(t, o)
			for _, key := range []string{"hedge_after", "max_hedges"} {
				n := 0
				for _, e := range errs {
					if e.Key == "plugin.llm.providers.primary."+key {
						n++
					}
				}
				if n != 1 || !errs.Has("plugin.llm.providers.primary."+key, "not hedged", "remove it") {
					t.Errorf("%d errors for %s, want one saying it is not hedged:\n%v", n, key, errs)
				}
			}
		})
	}
}

// A table without base_url or model, a base_url that is not http(s) or
// carries credentials, a bad provider name and a loop of fallbacks are
// refused; the credentials are not repeated.
func TestConfigErrorsOfTheTable(t *testing.T) {
	t.Parallel()
	errs := jfasttest.ConfigErrors(t, jfasttest.Options{TOML: `
[plugins]
enabled = ["llm"]
[plugin.llm.providers.empty]
attempts = 2
[plugin.llm.providers.creds]
base_url = "https://user:S3NTllm@api.example.com/v1"
model = "m"
[plugin.llm.providers.ftp]
base_url = "ftp://api.example.com/v1"
model = "m"
[plugin.llm.providers.Bad]
base_url = "https://api.example.com/v1"
model = "m"
[plugin.llm.providers.a]
base_url = "https://a.example.com/v1"
model = "m"
fallback = "b"
[plugin.llm.providers.b]
base_url = "https://b.example.com/v1"
model = "m"
fallback = "a"
`, Plugins: []framework.Plugin{llm.New()}})
	for key, words := range map[string][]string{
		"plugin.llm.providers.empty.base_url": {"missing", "JFAST_LLM_PROVIDERS__EMPTY__BASE_URL"},
		"plugin.llm.providers.empty.model":    {"missing"},
		"plugin.llm.providers.creds.base_url": {"credentials", "api_key"},
		"plugin.llm.providers.ftp.base_url":   {"http or https"},
		"plugin.llm.providers.Bad":            {"lowercase"},
		"plugin.llm.providers.a.fallback":     {"back to", "break the loop"},
		"plugin.llm.providers.b.fallback":     {"back to"},
	} {
		if !errs.Has(key, words...) {
			t.Errorf("no error for %s with %q:\n%v", key, words, errs)
		}
	}
	if strings.Contains(errs.Error(), "S3NTllm") {
		t.Errorf("the errors repeat the URL's password:\n%v", errs)
	}
}

// The defaults boot, and are what docs/llm.md says.
func TestDefaults(t *testing.T) {
	t.Parallel()
	var d llm.ProviderConfig
	d.SetDefaults()
	if d.ConnectTimeout.String() != "5s" || d.ReadGap.String() != "30s" || d.Timeout.String() != "2m0s" || d.Attempts != 3 ||
		d.BackoffBase.String() != "500ms" || d.BackoffMax.String() != "8s" || d.MaxRetryAfter.String() != "30s" ||
		d.RetryBudgetRatio != 0.2 || d.RetryBudgetMinPerSecond != 2 || d.MaxConcurrent != 50 || d.BulkheadWait.String() != "500ms" ||
		d.BreakerFailures != 5 || d.BreakerCoolDown.String() != "15s" {
		t.Fatalf("defaults %+v", d)
	}
	if errs := jfasttest.ConfigErrors(t, jfasttest.Options{TOML: primaryTable, Plugins: []framework.Plugin{llm.New()}}); len(errs) != 0 {
		t.Fatalf("the defaults are refused: %v", errs)
	}
}
