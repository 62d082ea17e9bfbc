package grpc_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/framework/resilience"
	"github.com/jfastframework/jfast/jfasttest"
	jgrpc "github.com/jfastframework/jfast/plugins/grpc"
)

// inventoryTable is a valid [plugin.grpc.upstreams.inventory] table; tests
// append keys to it.
const inventoryTable = "[plugins]\nenabled = [\"grpc\"]\n[plugin.grpc.upstreams.inventory]\ntarget = \"inventory:9000\"\ninsecure = true\nidempotent_methods = [\"/shop.Inventory/GetStock\"]\n"

func TestConfigErrors(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		toml string // appended to the inventory table
		key  string // the error's key, under plugin.grpc.upstreams.inventory
	}{
		{"misspelt key", `timout = "1s"`, "timout"},
		{"zero timeout", `timeout = 0`, "timeout"},
		{"negative stream_timeout", `stream_timeout = "-1s"`, "stream_timeout"},
		{"zero attempts", `attempts = 0`, "attempts"},
		{"method without its service", `idempotent_methods = ["GetStock"]`, "idempotent_methods"},
		{"method twice", `idempotent_methods = ["/shop.Inventory/GetStock", "/shop.Inventory/GetStock"]`, "idempotent_methods"},
		{"restart_streams not a method", `restart_streams = ["/shop.Inventory"]`, "restart_streams"},
		{"restart_streams with one attempt", "attempts = 1\nrestart_streams = [\"/shop.Inventory/Export\"]", "restart_streams"},
		{"unknown code", `retryable_codes = ["UNAVAILBLE"]`, "retryable_codes"},
		{"code in Go's spelling", `retryable_codes = ["Unavailable"]`, "retryable_codes"},
		{"DEADLINE_EXCEEDED retried", `retryable_codes = ["UNAVAILABLE", "DEADLINE_EXCEEDED"]`, "retryable_codes"},
		{"no retryable code", `retryable_codes = []`, "retryable_codes"},
		{"zero backoff_base", `backoff_base = 0`, "backoff_base"},
		{"backoff_max below backoff_base", "backoff_base = \"1s\"\nbackoff_max = \"500ms\"", "backoff_max"},
		{"retry_budget_ratio above 1", `retry_budget_ratio = 1.5`, "retry_budget_ratio"},
		{"retry_budget unknown", `retry_budget = "leaky"`, "retry_budget"},
		{"retry_budget_max_tokens below 1", `retry_budget_max_tokens = 0.5`, "retry_budget_max_tokens"},
		{"retry_budget_tokens_per_call above 1", `retry_budget_tokens_per_call = 2.0`, "retry_budget_tokens_per_call"},
		{"zero retry_budget_min_per_second", `retry_budget_min_per_second = 0`, "retry_budget_min_per_second"},
		{"zero breaker_failures", `breaker_failures = 0`, "breaker_failures"},
		{"zero breaker_cool_down", `breaker_cool_down = 0`, "breaker_cool_down"},
		{"zero max_concurrent", `max_concurrent = 0`, "max_concurrent"},
		{"zero bulkhead_wait", `bulkhead_wait = 0`, "bulkhead_wait"},
		{"compression unknown", `compression = "zstd"`, "compression"},
		{"insecure with ca_file", `server_name = "inventory.internal"`, "insecure"},
		{"upper-case metadata key", `headers = { "X-Api-Key" = "k" }`, "headers.X-Api-Key"},
		{"metadata key with _", `headers = { "x_api_key" = "k" }`, "headers.x_api_key"},
		{"reserved metadata key", `headers = { "grpc-timeout" = "1S" }`, "headers.grpc-timeout"},
		{"binary metadata key", `headers = { "trace-bin" = "AAA" }`, "headers.trace-bin"},
		{"metadata value with a line break", `headers = { "x-team" = "a\nb" }`, "headers.x-team"},
		{"wrong type", `attempts = "three"`, "attempts"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			table := inventoryTable
			if strings.HasPrefix(tc.toml, "idempotent_methods") {
				table = strings.Replace(table, "idempotent_methods = [\"/shop.Inventory/GetStock\"]\n", "", 1)
			}
			jfasttest.ConfigErrors(t, jfasttest.Options{TOML: table + tc.toml + "\n", Plugins: []framework.Plugin{jgrpc.New()}}).Only(t, "plugin.grpc.upstreams.inventory."+tc.key)
		})
	}
	targets := []struct{ name, target string }{
		{"missing target", ""},
		{"target without a port", `target = "inventory"`},
		{"target with an unknown scheme", `target = "http:///inventory:9000"`},
		{"target with a space", `target = "inventory :9000"`},
	}
	for _, tc := range targets {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			toml := "[plugins]\nenabled = [\"grpc\"]\n[plugin.grpc.upstreams.inventory]\nattempts = 1\ninsecure = true\n" + tc.target + "\n"
			jfasttest.ConfigErrors(t, jfasttest.Options{TOML: toml, Plugins: []framework.Plugin{jgrpc.New()}}).Only(t, "plugin.grpc.upstreams.inventory.target")
		})
	}
	t.Run("critical refused", func(t *testing.T) {
		t.Parallel()
		e := jfasttest.ConfigErrors(t, jfasttest.Options{TOML: "[plugins]\nenabled = [\"grpc\"]\n[plugin.grpc]\ncritical = true\n", Plugins: []framework.Plugin{jgrpc.New()}}).Only(t, "plugin.grpc.critical")
		if !strings.Contains(e.Error(), "out of rotation") || !strings.Contains(e.Error(), "degraded") {
			t.Errorf("the error does not give the reason: %v", e)
		}
		if _, err := jfasttest.New(t, jfasttest.Options{TOML: "[plugins]\nenabled = [\"grpc\"]\n[plugin.grpc]\ncritical = false\n", Plugins: []framework.Plugin{jgrpc.New()}}); err != nil {
			t.Errorf("critical = false: %v", err)
		}
	})
	t.Run("bad listen", func(t *testing.T) {
		t.Parallel()
		jfasttest.ConfigErrors(t, jfasttest.Options{TOML: "[plugins]\nenabled = [\"grpc\"]\n[plugin.grpc.server]\nlisten = \"9000\"\n", Plugins: []framework.Plugin{jgrpc.New()}}).Only(t, "plugin.grpc.server.listen")
	})
	t.Run("unreadable ca_file", func(t *testing.T) {
		t.Parallel()
		toml := "[plugins]\nenabled = [\"grpc\"]\n[plugin.grpc.upstreams.inventory]\nattempts = 1\ntarget = \"inventory:9000\"\nca_file = \"" + filepath.Join(t.TempDir(), "none.pem") + "\"\n"
		jfasttest.ConfigErrors(t, jfasttest.Options{TOML: toml, Plugins: []framework.Plugin{jgrpc.New()}}).Only(t, "plugin.grpc.upstreams.inventory.ca_file")
	})
	t.Run("ca_file without a certificate", func(t *testing.T) {
		t.Parallel()
		path := filepath.Join(t.TempDir(), "ca.pem")
		if err := os.WriteFile(path, []byte("not a certificate"), 0o600); err != nil {
			t.Fatal(err)
		}
		toml := "[plugins]\nenabled = [\"grpc\"]\n[plugin.grpc.upstreams.inventory]\nattempts = 1\ntarget = \"inventory:9000\"\nca_file = \"" + path + "\"\n"
		jfasttest.ConfigErrors(t, jfasttest.Options{TOML: toml, Plugins: []framework.Plugin{jgrpc.New()}}).Only(t, "plugin.grpc.upstreams.inventory.ca_file")
	})
}

// TestRetryingWithoutAnAllowListIsABootError: attempts above 1 with no method
// allowed to repeat is refused, with a fix that names both ways out; it is
// never read as "retry nothing" nor as "retry every unary method".
func TestRetryingWithoutAnAllowListIsABootError(t *testing.T) {
	t.Parallel()
	toml := "[plugins]\nenabled = [\"grpc\"]\n[plugin.grpc.upstreams.inventory]\ntarget = \"inventory:9000\"\ninsecure = true\n"
	e := jfasttest.ConfigErrors(t, jfasttest.Options{TOML: toml, Plugins: []framework.Plugin{jgrpc.New()}}).Only(t, "plugin.grpc.upstreams.inventory.attempts")
	if !strings.Contains(e.Fix, "idempotent_methods") || !strings.Contains(e.Fix, "attempts = 1") {
		t.Fatalf("fix = %q, want it to name idempotent_methods and attempts = 1", e.Fix)
	}
	if _, err := jfasttest.New(t, jfasttest.Options{TOML: toml + "attempts = 1\n", Plugins: []framework.Plugin{jgrpc.New()}}); err != nil {
		t.Fatalf("attempts = 1 with no list: %v", err)
	}
	if _, err := jgrpc.NewClient(jgrpc.Upstream{Target: "inventory:9000", Insecure: true}); err == nil || !strings.Contains(err.Error(), "attempts") {
		t.Fatalf("NewClient with the default attempts and no list: err = %v, want the same refusal", err)
	}
}

func TestDefaults(t *testing.T) {
	t.Parallel()
	var u jgrpc.Upstream
	u.SetDefaults()
	want := jgrpc.Upstream{
		StreamTimeout:  30 * time.Second,
		RetryableCodes: []string{"UNAVAILABLE"},
		PolicyConfig: resilience.PolicyConfig{Timeout: time.Second, Attempts: 3, BackoffBase: 50 * time.Millisecond, BackoffMax: 200 * time.Millisecond,
			RetryBudgetRatio: 0.2, RetryBudgetMinPerSecond: 1,
			BreakerConfig: resilience.BreakerConfig{BreakerFailures: 5, BreakerFailureRate: 0.5, BreakerWindow: 30 * time.Second,
				BreakerMinimumCalls: 20, BreakerCoolDown: 15 * time.Second},
			MaxConcurrent: 50, BulkheadWait: 500 * time.Millisecond},
	}
	if !equalUpstreams(u, want) {
		t.Fatalf("defaults = %+v\nwant %+v", u, want)
	}
}

func equalUpstreams(a, b jgrpc.Upstream) bool {
	return strings.Join(a.RetryableCodes, ",") == strings.Join(b.RetryableCodes, ",") &&
		a.Timeout == b.Timeout && a.StreamTimeout == b.StreamTimeout && a.Attempts == b.Attempts &&
		a.BackoffBase == b.BackoffBase && a.BackoffMax == b.BackoffMax &&
		a.RetryBudgetRatio == b.RetryBudgetRatio && a.RetryBudgetMinPerSecond == b.RetryBudgetMinPerSecond &&
		a.BreakerConfig == b.BreakerConfig && a.MaxConcurrent == b.MaxConcurrent && a.BulkheadWait == b.BulkheadWait &&
		a.Insecure == b.Insecure && a.Compression == b.Compression && len(a.IdempotentMethods) == 0 && len(a.Headers) == 0
}
