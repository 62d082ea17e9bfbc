package http_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/framework/resilience"
	"github.com/jfastframework/jfast/jfasttest"
	jhttp "github.com/jfastframework/jfast/plugins/http"
)

func TestConfigErrors(t *testing.T) {
	t.Parallel()
	const good = "[plugins]\nenabled = [\"http\"]\n[plugin.http.upstreams.billing]\nbase_url = \"http://billing:8010\"\n"
	cases := []struct {
		name string
		toml string // appended to the billing table
		key  string // the error's key, under plugin.http.upstreams.billing
	}{
		{"misspelt key", `read_timout = "5s"`, "read_timout"},
		{"zero connect_timeout", `connect_timeout = 0`, "connect_timeout"},
		{"negative read_timeout", `read_timeout = "-1s"`, "read_timeout"},
		{"empty write_timeout", `write_timeout = ""`, "write_timeout"},
		{"zero pool_timeout", `pool_timeout = "0s"`, "pool_timeout"},
		{"zero timeout", `timeout = 0`, "timeout"},
		{"zero attempts", `attempts = 0`, "attempts"},
		{"zero backoff_base", `backoff_base = 0`, "backoff_base"},
		{"zero backoff_max", `backoff_max = 0`, "backoff_max"},
		{"backoff_max below backoff_base", "backoff_base = \"1s\"\nbackoff_max = \"500ms\"", "backoff_max"},
		{"zero max_retry_after", `max_retry_after = 0`, "max_retry_after"},
		{"zero retry_budget_ratio", `retry_budget_ratio = 0`, "retry_budget_ratio"},
		{"retry_budget_ratio above 1", `retry_budget_ratio = 1.5`, "retry_budget_ratio"},
		{"zero retry_budget_min_per_second", `retry_budget_min_per_second = 0`, "retry_budget_min_per_second"},
		{"zero breaker_failures", `breaker_failures = 0`, "breaker_failures"},
		{"zero breaker_failure_rate", `breaker_failure_rate = 0`, "breaker_failure_rate"},
		{"breaker_failure_rate above 1", `breaker_failure_rate = 2`, "breaker_failure_rate"},
		{"zero breaker_window", `breaker_window = 0`, "breaker_window"},
		{"zero breaker_minimum_calls", `breaker_minimum_calls = 0`, "breaker_minimum_calls"},
		{"zero breaker_cool_down", `breaker_cool_down = 0`, "breaker_cool_down"},
		{"zero max_concurrent", `max_concurrent = 0`, "max_concurrent"},
		{"zero bulkhead_wait", `bulkhead_wait = 0`, "bulkhead_wait"},
		{"zero max_response_bytes", `max_response_bytes = 0`, "max_response_bytes"},
		{"negative max_response_bytes", `max_response_bytes = -1`, "max_response_bytes"},
		{"max_response_bytes not a number", `max_response_bytes = "10MiB"`, "max_response_bytes"},
		{"header name with _", `headers = { "X_Api_Key" = "a" }`, "headers.X_Api_Key"},
		{"one header twice", `headers = { "Authorization" = "a", "authorization" = "b" }`, "headers.authorization"},
		{"wrong type", `attempts = "two"`, "attempts"},
		{"bad header name", `headers = { "X Team" = "a" }`, "headers.X Team"},
		{"header value with a line break", `headers = { "X-Team" = "a\nb" }`, "headers.X-Team"},
		{"unknown retry_budget", `retry_budget = "tokens"`, "retry_budget"},
		{"retry_budget_max_tokens below one", `retry_budget_max_tokens = 0.5`, "retry_budget_max_tokens"},
		{"zero retry_budget_tokens_per_call", `retry_budget_tokens_per_call = 0`, "retry_budget_tokens_per_call"},
		{"retry_budget_tokens_per_call above 1", `retry_budget_tokens_per_call = 2`, "retry_budget_tokens_per_call"},
		{"throttle_k below 1", `throttle_k = 0.5`, "throttle_k"},
		{"zero throttle_window", `throttle_window = "0s"`, "throttle_window"},
		{"bad hedge_after", `hedge_after = "fast"`, "hedge_after"},
		{"zero max_hedges", `max_hedges = 0`, "max_hedges"},
		{"max_hedges no call reaches", "hedge_after = \"20ms\"\nmax_hedges = 1000000", "max_hedges"},
		{"unknown backoff_jitter", `backoff_jitter = "equal"`, "backoff_jitter"},
		{"unknown breaker_key", `breaker_key = "path"`, "breaker_key"},
		{"zero max_routes", `max_routes = 0`, "max_routes"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			jfasttest.ConfigErrors(t, jfasttest.Options{TOML: good + tc.toml + "\n", Plugins: []framework.Plugin{jhttp.New()}}).Only(t, "plugin.http.upstreams.billing."+tc.key)
		})
	}
	// The keys of the one policy vocabulary replaced retries and
	// total_timeout: the old ones are refused with the new key named.
	for old, want := range map[string]string{"retries = 2": "write attempts instead", `total_timeout = "5s"`: "write timeout instead"} {
		key, _, _ := strings.Cut(old, " ")
		e := jfasttest.ConfigErrors(t, jfasttest.Options{TOML: good + old + "\n", Plugins: []framework.Plugin{jhttp.New()}}).Only(t, "plugin.http.upstreams.billing."+key)
		if !strings.Contains(e.Problem, "was renamed") || !strings.HasPrefix(e.Fix, want) {
			t.Errorf("%s: %+v, want the new key named", old, e)
		}
	}
	urls := []struct{ name, url, key string }{
		{"missing base_url", "", "base_url"},
		{"relative base_url", `base_url = "/billing"`, "base_url"},
		{"base_url without scheme", `base_url = "billing:8010"`, "base_url"},
		{"ftp base_url", `base_url = "ftp://billing"`, "base_url"},
		{"base_url with credentials", `base_url = "http://u:secret@billing"`, "base_url"},
		{"base_url with a query", `base_url = "http://billing/?a=1"`, "base_url"},
		{"base_url with a port above 65535", `base_url = "http://billing:99999"`, "base_url"},
		{"base_url with port 0", `base_url = "http://billing:0"`, "base_url"},
	}
	for _, tc := range urls {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			toml := "[plugins]\nenabled = [\"http\"]\n[plugin.http.upstreams.billing]\nattempts = 2\n" + tc.url + "\n"
			e := jfasttest.ConfigErrors(t, jfasttest.Options{TOML: toml, Plugins: []framework.Plugin{jhttp.New()}}).Only(t, "plugin.http.upstreams.billing."+tc.key)
			if strings.Contains(e.Error(), "secret") {
				t.Errorf("the error repeats the credentials: %v", e)
			}
		})
	}
	shared := []struct{ name, toml, key string }{
		{"shared base_url", `base_url = "http://billing"`, "base_url"},
		{"shared forward_authorization", `forward_authorization = true`, "forward_authorization"},
		{"zero max_origins", `max_origins = 0`, "max_origins"},
		{"allow_hosts with a scheme", `allow_hosts = ["http://hooks.internal"]`, "allow_hosts"},
		{"allow_hosts with a port", `allow_hosts = ["hooks.internal:8080"]`, "allow_hosts"},
		{"propagate_to with a path", `propagate_to = ["https://hooks.example.com/x"]`, "propagate_to"},
		{"propagate_to without a scheme", `propagate_to = ["hooks.example.com"]`, "propagate_to"},
		{"shared policy key", `attempts = 0`, "attempts"},
		{"shared misspelt key", `allow_privat = true`, "allow_privat"},
	}
	for _, tc := range shared {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			toml := "[plugins]\nenabled = [\"http\"]\n[plugin.http.shared.webhooks]\n" + tc.toml + "\n"
			jfasttest.ConfigErrors(t, jfasttest.Options{TOML: toml, Plugins: []framework.Plugin{jhttp.New()}}).Only(t, "plugin.http.shared.webhooks."+tc.key)
		})
	}
	t.Run("a shared client's keys", func(t *testing.T) {
		t.Parallel()
		toml := "[plugins]\nenabled = [\"http\"]\n[plugin.http.shared.webhooks]\nmax_origins = 10\nallow_private = false\nallow_own_addresses = true\n" +
			"propagate_to = [\"https://hooks.example.com\", \"http://10.1.2.3:8080\"]\n" +
			"allow_hosts = [\"hooks.internal\", \"10.1.2.3\", \"10.1.0.0/16\", \"::1\"]\nretry_budget = \"bucket\"\nbreaker_key = \"route\"\n" +
			"headers = { \"User-Agent\" = \"orders-webhooks\" }\n"
		if _, err := jfasttest.New(t, jfasttest.Options{TOML: toml, Plugins: []framework.Plugin{jhttp.New()}}); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("critical refused", func(t *testing.T) {
		t.Parallel()
		e := jfasttest.ConfigErrors(t, jfasttest.Options{TOML: good + "[plugin.http]\ncritical = true\n", Plugins: []framework.Plugin{jhttp.New()}}).Only(t, "plugin.http.critical")
		if !strings.Contains(e.Error(), "out of rotation") || !strings.Contains(e.Error(), "degraded") {
			t.Errorf("the error does not give the reason: %v", e)
		}
	})
	t.Run("bad upstream name", func(t *testing.T) {
		t.Parallel()
		toml := "[plugins]\nenabled = [\"http\"]\n[plugin.http.upstreams.Billing]\nbase_url = \"http://billing\"\n"
		jfasttest.ConfigErrors(t, jfasttest.Options{TOML: toml, Plugins: []framework.Plugin{jhttp.New()}}).Only(t, "plugin.http.upstreams.Billing")
	})
	t.Run("every error at once", func(t *testing.T) {
		t.Parallel()
		toml := good + "read_timeout = 0\ntimeout = 0\nmax_concurrent = 0\n"
		if errs := jfasttest.ConfigErrors(t, jfasttest.Options{TOML: toml, Plugins: []framework.Plugin{jhttp.New()}}); len(errs) != 3 {
			t.Fatalf("errors:\n%v\nwant 3", errs)
		}
	})
	t.Run("the defaults are valid", func(t *testing.T) {
		t.Parallel()
		if _, err := jfasttest.New(t, jfasttest.Options{TOML: good, Plugins: []framework.Plugin{jhttp.New()}}); err != nil {
			t.Fatal(err)
		}
	})
}

// A name that breaks the name rule is refused in the words every named table
// shares: the noun, the rule, and the variable the name appears in.
func TestBadNamesInTheSharedWords(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ toml, key, problem, env string }{
		{"[plugin.http.upstreams.Billing]\nbase_url = \"http://127.0.0.1:1\"\n", "plugin.http.upstreams.Billing", "is not a valid upstream name", "JFAST_HTTP_UPSTREAMS__<NAME>__BASE_URL)"},
		{"[plugin.http.shared.Hooks]\n", "plugin.http.shared.Hooks", "is not a valid shared client name", "JFAST_HTTP_SHARED__<NAME>__*)"},
	} {
		e := jfasttest.ConfigErrors(t, jfasttest.Options{TOML: "[plugins]\nenabled = [\"http\"]\n" + tc.toml, Plugins: []framework.Plugin{jhttp.New()}}).Only(t, tc.key)
		if e.Problem != tc.problem || !strings.HasPrefix(e.Fix, "rename it: a name is "+framework.NameRule) || !strings.HasSuffix(e.Fix, tc.env) {
			t.Errorf("%s: %+v", tc.key, e)
		}
	}
}

func TestDefaults(t *testing.T) {
	t.Parallel()
	var u jhttp.Upstream
	u.SetDefaults()
	want := jhttp.Upstream{
		ConnectTimeout: 2 * time.Second, ReadTimeout: 5 * time.Second, WriteTimeout: 5 * time.Second,
		PoolTimeout: 5 * time.Second, MaxRetryAfter: 30 * time.Second, MaxResponseBytes: 10 << 20,
		PolicyConfig: resilience.PolicyConfig{
			Timeout: 10 * time.Second, Attempts: 3,
			BackoffBase: 100 * time.Millisecond, BackoffMax: 2 * time.Second,
			RetryBudgetRatio: 0.2, RetryBudgetMinPerSecond: 1,
			BreakerConfig: resilience.BreakerConfig{BreakerFailures: 5, BreakerFailureRate: 0.5, BreakerWindow: 30 * time.Second,
				BreakerMinimumCalls: 20, BreakerCoolDown: 15 * time.Second},
			MaxConcurrent: 50, BulkheadWait: 500 * time.Millisecond,
		},
	}
	if u.ConnectTimeout != want.ConnectTimeout || u.ReadTimeout != want.ReadTimeout || u.WriteTimeout != want.WriteTimeout ||
		u.PoolTimeout != want.PoolTimeout || u.Timeout != want.Timeout || u.Attempts != want.Attempts ||
		u.BackoffBase != want.BackoffBase || u.BackoffMax != want.BackoffMax || u.MaxRetryAfter != want.MaxRetryAfter ||
		u.RetryBudgetRatio != want.RetryBudgetRatio || u.RetryBudgetMinPerSecond != want.RetryBudgetMinPerSecond ||
		u.BreakerFailures != want.BreakerFailures || u.BreakerFailureRate != want.BreakerFailureRate ||
		u.BreakerWindow != want.BreakerWindow || u.BreakerMinimumCalls != want.BreakerMinimumCalls ||
		u.BreakerCoolDown != want.BreakerCoolDown || u.MaxConcurrent != want.MaxConcurrent ||
		u.BulkheadWait != want.BulkheadWait || u.MaxResponseBytes != want.MaxResponseBytes || u.ForwardAuthorization {
		t.Fatalf("defaults = %+v", u)
	}
	if u.RetryBudget != "window" || u.RetryBudgetMaxTokens != 10 || u.RetryBudgetTokensPerCall != 0.1 ||
		u.BackoffJitter != "full" || u.BreakerKey != "origin" || u.MaxRoutes != 100 {
		t.Fatalf("defaults = %+v", u)
	}
	var s jhttp.SharedConfig
	s.SetDefaults()
	if s.MaxOrigins != 1000 || s.AllowPrivate || len(s.AllowHosts) != 0 || s.Timeout != 10*time.Second || s.RetryBudget != "window" {
		t.Fatalf("shared defaults = %+v", s)
	}
}

// The environment wins for base_url (a deploy key), with a WARNING; the file
// wins for the rest.
func TestBaseURLFromEnvironment(t *testing.T) {
	t.Parallel()
	up := newUpstream(t, status(200))
	toml := "[plugins]\nenabled = [\"http\"]\n[plugin.http.upstreams.billing]\nbase_url = \"http://billing:8010\"\nattempts = 2\n"
	var client *jhttp.ServiceClient
	svc := jfasttest.Start(t, jfasttest.Options{
		TOML:    toml,
		Plugins: []framework.Plugin{jhttp.New()},
		Env:     map[string]string{"JFAST_HTTP_UPSTREAMS__BILLING__BASE_URL": up.URL, "JFAST_HTTP_UPSTREAMS__BILLING__ATTEMPTS": "6"},
		Routes: func(app *framework.App, _ chi.Router) error {
			var err error
			client, err = jhttp.Client(app, "billing")
			return err
		},
	})
	if got := client.Upstream().BaseURL; got != up.URL {
		t.Errorf("base_url = %q, want the environment's %q", got, up.URL)
	}
	if got := client.Upstream().Attempts; got != 2 {
		t.Errorf("attempts = %d, want the file's 2", got)
	}
	if !strings.Contains(svc.Logs(), "WARN") || !strings.Contains(svc.Logs(), "plugin.http.upstreams.billing.base_url") {
		t.Errorf("no WARNING naming the disagreement:\n%s", svc.Logs())
	}
	if _, err := client.Get(context.Background(), "/x"); err != nil || up.hits.Load() != 1 {
		t.Fatalf("the call did not reach the environment's upstream: %v", err)
	}
}

// A configured header is a deploy key: the environment wins over the file,
// with a WARNING that names the key and never the values; a header the file
// does not set can come from the environment alone.
func TestHeadersFromEnvironment(t *testing.T) {
	t.Parallel()
	up := newUpstream(t, status(200))
	toml := `[plugins]
enabled = ["http"]
[plugin.http.upstreams.billing]
base_url = "` + up.URL + `"
[plugin.http.upstreams.billing.headers]
authorization = "Bearer file-token"
X-Team = "orders"
`
	var client *jhttp.ServiceClient
	svc := jfasttest.Start(t, jfasttest.Options{
		TOML:    toml,
		Plugins: []framework.Plugin{jhttp.New()},
		Env: map[string]string{
			"JFAST_HTTP_UPSTREAMS__BILLING__HEADERS__AUTHORIZATION": "Bearer env-token",
			"JFAST_HTTP_UPSTREAMS__BILLING__HEADERS__COOKIE":        "session=env-cookie",
		},
		Routes: func(app *framework.App, _ chi.Router) error {
			var err error
			client, err = jhttp.Client(app, "billing")
			return err
		},
	})
	if _, err := client.Get(context.Background(), "/x"); err != nil {
		t.Fatal(err)
	}
	h := up.request(0).Header
	if got := h.Values("Authorization"); len(got) != 1 || got[0] != "Bearer env-token" {
		t.Errorf("Authorization = %q, want only the environment's", got)
	}
	if got := h.Get("Cookie"); got != "session=env-cookie" {
		t.Errorf("Cookie = %q, want the environment's", got)
	}
	if got := h.Get("X-Team"); got != "orders" {
		t.Errorf("X-Team = %q, want the file's", got)
	}
	logs := svc.Logs()
	var warned bool
	for _, line := range strings.Split(logs, "\n") {
		if strings.Contains(line, "WARN") && strings.Contains(line, "plugin.http.upstreams.billing.headers.authorization") &&
			strings.Contains(line, "JFAST_HTTP_UPSTREAMS__BILLING__HEADERS__AUTHORIZATION") && strings.Contains(line, "deploy key") {
			warned = true
		}
	}
	if !warned {
		t.Errorf("no WARNING naming the disagreement on headers.authorization:\n%s", logs)
	}
	for _, secret := range []string{"file-token", "env-token", "env-cookie"} {
		if strings.Contains(logs, secret) {
			t.Errorf("the logs print the header value %q:\n%s", secret, logs)
		}
	}
}

// What the environment cannot express is refused at boot rather than sent
// wrong: a variable names a header in lower case with "_" kept, so it can
// neither spell X-Api-Key nor override a capitalised entry of the file.
func TestHeaderEnvironmentMismatchRefused(t *testing.T) {
	t.Parallel()
	cases := []struct{ name, file, env, key string }{
		{"a dash the environment cannot spell", `"X-Api-Key" = "dev-key"`, "JFAST_HTTP_UPSTREAMS__BILLING__HEADERS__X_API_KEY", "headers.x_api_key"},
		{"a capitalised entry in the file", `Authorization = "Bearer dev-key"`, "JFAST_HTTP_UPSTREAMS__BILLING__HEADERS__AUTHORIZATION", "headers.authorization"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			toml := "[plugins]\nenabled = [\"http\"]\n[plugin.http.upstreams.billing]\nbase_url = \"http://billing:8010\"\n[plugin.http.upstreams.billing.headers]\n" + tc.file + "\n"
			errs := jfasttest.ConfigErrors(t, jfasttest.Options{TOML: toml, Plugins: []framework.Plugin{jhttp.New()},
				Env: map[string]string{tc.env: "prod-key"}})
			errs.Only(t, "plugin.http.upstreams.billing."+tc.key)
			if strings.Contains(errs.Error(), "dev-key") || strings.Contains(errs.Error(), "prod-key") {
				t.Errorf("the error prints a header value: %v", errs)
			}
		})
	}
}

// A shared client's header errors name its own variables
// (JFAST_HTTP_SHARED__<NAME>__HEADERS__…), as an upstream's name
// JFAST_HTTP_UPSTREAMS__…: the fix must be one the operator can follow.
func TestSharedHeaderErrorsNameTheSharedVariable(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, file, env, key string }{
		{"a dash the environment cannot spell", `"X-Api-Key" = "dev-key"`, "JFAST_HTTP_SHARED__WEB__HEADERS__X_API_KEY", "headers.x_api_key"},
		{"a capitalised entry in the file", `Authorization = "Bearer dev-key"`, "JFAST_HTTP_SHARED__WEB__HEADERS__AUTHORIZATION", "headers.authorization"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			toml := "[plugins]\nenabled = [\"http\"]\n[plugin.http.shared.web]\n[plugin.http.shared.web.headers]\n" + tc.file + "\n"
			errs := jfasttest.ConfigErrors(t, jfasttest.Options{TOML: toml, Plugins: []framework.Plugin{jhttp.New()},
				Env: map[string]string{tc.env: "prod-key"}})
			errs.Only(t, "plugin.http.shared.web."+tc.key)
			if strings.Contains(errs.Error(), "UPSTREAMS") {
				t.Errorf("the error does not name the shared client's variable: %v", errs)
			}
		})
	}
}

// Asking for an upstream that is not configured fails the boot, naming it.
func TestUnknownUpstreamFailsBoot(t *testing.T) {
	t.Parallel()
	toml := "[plugins]\nenabled = [\"http\"]\n[plugin.http.upstreams.billing]\nbase_url = \"http://127.0.0.1:1\"\n"
	app, err := jfasttest.New(t, jfasttest.Options{
		TOML:    toml,
		Plugins: []framework.Plugin{jhttp.New()},
		Routes: func(app *framework.App, _ chi.Router) error {
			_, err := jhttp.Client(app, "biling")
			return err
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	err = app.Start(context.Background())
	if err == nil {
		_ = app.Stop(context.Background())
		t.Fatal("the boot succeeded with an unknown upstream")
	}
	if !strings.Contains(err.Error(), "biling") || !strings.Contains(err.Error(), "billing") {
		t.Errorf("err = %v, want it to name the unknown and the configured upstreams", err)
	}
}

// A full service: a route calls an upstream; what travels from the inbound
// request, how failures render, /ready and /metrics.
func TestPluginInService(t *testing.T) {
	t.Parallel()
	s := newSwitchable(200)
	up := newUpstream(t, s.handle)
	clk := jfasttest.NewClock()
	toml := `[plugins]
enabled = ["observability", "http"]
[plugin.http.upstreams.billing]
base_url = "` + up.URL + `"
forward_authorization = true
breaker_failures = 1
attempts = 1
[plugin.http.upstreams.catalog]
base_url = "http://127.0.0.1:1"
`
	svc := jfasttest.Start(t, jfasttest.Options{
		TOML:    toml,
		Plugins: []framework.Plugin{jhttp.New()},
		Clock:   clk,
		Routes: func(app *framework.App, r chi.Router) error {
			billing, err := jhttp.Client(app, "billing")
			if err != nil {
				return err
			}
			r.Method(http.MethodGet, "/orders/{id}", framework.Handler(func(w http.ResponseWriter, r *http.Request) error {
				ctx := r.Context()
				if tok := r.Header.Get("X-Test-Bearer"); tok != "" {
					ctx = framework.ContextWithBearerToken(ctx, tok) // what the auth plugin does
				}
				resp, err := billing.Get(ctx, "/invoices/"+chi.URLParam(r, "id"))
				if err != nil {
					return err
				}
				return framework.JSON(w, http.StatusOK, map[string]int{"upstream_status": resp.StatusCode})
			}))
			return nil
		},
	})

	// The request ID of the inbound request travels; a Basic credential does not.
	res := svc.Get(t, "/orders/7", "X-Request-ID", "abc-123", "Authorization", "Basic YWxpY2U6cGFzc3dvcmQ=")
	if res.Status != 200 {
		t.Fatalf("GET /orders/7: %d %s", res.Status, res.Body)
	}
	r := up.request(0)
	if r.URL.Path != "/invoices/7" || r.Header.Get("X-Request-ID") != "abc-123" {
		t.Errorf("upstream saw %s with X-Request-ID %q", r.URL.Path, r.Header.Get("X-Request-ID"))
	}
	if got := r.Header.Get("Authorization"); got != "" {
		t.Errorf("Authorization %q reached the upstream from a Basic caller", got)
	}
	// A verified bearer travels to a forward_authorization upstream.
	svc.Get(t, "/orders/8", "X-Test-Bearer", "tok-9")
	if got := up.request(1).Header.Get("Authorization"); got != "Bearer tok-9" {
		t.Errorf("Authorization = %q, want the caller's bearer", got)
	}

	ready := readyBody(t, svc)
	if ready.Status != "ok" || !ready.Checks["http"].Healthy {
		t.Fatalf("/ready = %+v, want ok", ready)
	}

	// A 503 opens billing's breaker (breaker_failures = 1).
	s.status.Store(503)
	if res := svc.Get(t, "/orders/9"); res.Status != 200 {
		t.Fatalf("a 503 from the upstream is a response: %d %s", res.Status, res.Body)
	}
	// Now the call fails fast: 503 problem+json naming the upstream, with Retry-After.
	res = svc.Get(t, "/orders/10")
	if res.Status != 503 || !strings.HasPrefix(res.Header.Get("Content-Type"), "application/problem+json") || res.Header.Get("Retry-After") != "15" {
		t.Fatalf("open breaker: %d %q Retry-After %q: %s", res.Status, res.Header.Get("Content-Type"), res.Header.Get("Retry-After"), res.Body)
	}
	var body map[string]any
	if err := json.Unmarshal(res.Body, &body); err != nil || body["dependency"] != "billing" || body["upstream"] != "billing" || body["status"] != float64(503) {
		t.Fatalf("problem body = %s", res.Body)
	}

	// /ready: degraded (200), the http check failed but not critically, with
	// every upstream's breaker in meta.
	ready = readyBody(t, svc)
	http_ := ready.Checks["http"]
	if ready.Status != "degraded" || http_.Healthy || http_.Critical || !strings.Contains(http_.Detail, "billing") {
		t.Fatalf("/ready = %+v, want degraded naming billing", ready)
	}
	ups := http_.Meta["upstreams"].(map[string]any)
	billing := ups["billing"].(map[string]any)["breaker"].(map[string]any)
	catalog := ups["catalog"].(map[string]any)["breaker"].(map[string]any)
	if billing["state"] != "open" || billing["retry_after"] != float64(15) || billing["opens"] != float64(1) {
		t.Errorf("billing breaker = %v", billing)
	}
	if catalog["state"] != "closed" {
		t.Errorf("catalog breaker = %v", catalog)
	}

	// Metrics on /metrics.
	metrics := svc.Get(t, "/metrics").String()
	for _, want := range []string{
		`jfast_client_calls_total{dependency="billing",outcome="response",plugin="http"} 3`,
		`jfast_client_calls_total{dependency="billing",outcome="circuit_open",plugin="http"} 1`,
		`jfast_client_attempts_total{dependency="billing",plugin="http"} 3`,
		`jfast_client_breaker_state{dependency="billing",plugin="http"} 1`,
		`jfast_client_breaker_transitions_total{dependency="billing",from="closed",plugin="http",to="open"} 1`,
		`jfast_http_client_call_duration_seconds_count{upstream="billing"} 3`,
		`jfast_http_client_body_read_duration_seconds_count{upstream="billing"} 3`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}

	// After the cool-down a good probe closes it and /ready is ok again.
	clk.Advance(15 * time.Second)
	s.status.Store(200)
	if res := svc.Get(t, "/orders/11"); res.Status != 200 {
		t.Fatalf("probe: %d %s", res.Status, res.Body)
	}
	if ready := readyBody(t, svc); ready.Status != "ok" {
		t.Fatalf("/ready after recovery = %+v", ready)
	}
}

type readyReport struct {
	Status string `json:"status"`
	Checks map[string]struct {
		Healthy  bool           `json:"healthy"`
		Status   string         `json:"status"`
		Detail   string         `json:"detail"`
		Critical bool           `json:"critical"`
		Meta     map[string]any `json:"meta"`
	} `json:"checks"`
}

func readyBody(t *testing.T, svc *jfasttest.Service) readyReport {
	t.Helper()
	res := svc.Get(t, "/ready")
	if res.Status != 200 {
		t.Fatalf("/ready answered %d: %s", res.Status, res.Body)
	}
	var r readyReport
	if err := json.Unmarshal(res.Body, &r); err != nil {
		t.Fatalf("/ready body %s: %v", res.Body, err)
	}
	return r
}

func TestSeamAfterStartRefused(t *testing.T) {
	t.Parallel()
	p := jhttp.New()
	toml := "[plugins]\nenabled = [\"http\"]\n"
	svc := jfasttest.Start(t, jfasttest.Options{TOML: toml, Plugins: []framework.Plugin{p}})
	_ = svc
	if err := p.AddTransportWrapper(func(_ string, rt http.RoundTripper) http.RoundTripper { return rt }); err == nil {
		t.Error("AddTransportWrapper after start was accepted")
	}
	if err := p.ObserveCalls(nil); err == nil {
		t.Error("ObserveCalls after start was accepted")
	}
}

// An upstream can come from the environment alone, and a shape key the file
// does not set can too.
func TestUpstreamFromEnvironmentOnly(t *testing.T) {
	t.Parallel()
	up := newUpstream(t, status(200))
	var client *jhttp.ServiceClient
	jfasttest.Start(t, jfasttest.Options{
		TOML:    "[plugins]\nenabled = [\"http\"]\n",
		Plugins: []framework.Plugin{jhttp.New()},
		Env: map[string]string{
			"JFAST_HTTP_UPSTREAMS__BILLING__BASE_URL": up.URL,
			"JFAST_HTTP_UPSTREAMS__BILLING__ATTEMPTS": "5",
		},
		Routes: func(app *framework.App, _ chi.Router) error {
			var err error
			client, err = jhttp.Client(app, "billing")
			return err
		},
	})
	u := client.Upstream()
	if u.BaseURL != up.URL || u.Attempts != 5 || u.Timeout != jhttp.DefaultTimeout {
		t.Fatalf("upstream = %+v, want the environment's base_url and retries, defaults otherwise", u)
	}
}

// The seam as the telemetry plugin will use it: found on app.Plugin("http")
// through an interface of standard-library types only, called from its own
// Start, which runs before the http plugin's.
type httpSeam interface {
	AddTransportWrapper(func(upstream string, rt http.RoundTripper) http.RoundTripper) error
	ObserveCalls(func(ctx context.Context, upstream, method string) (context.Context, func(status, attempts int, err error))) error
}

var _ httpSeam = jhttp.New()

type fakeTelemetry struct{ calls, attempts atomic.Int64 }

func (f *fakeTelemetry) Name() string { return "telemetry" }

func (f *fakeTelemetry) Start(_ context.Context, app *framework.App) error {
	seam, ok := app.Plugin("http").(httpSeam)
	if !ok {
		return errors.New("the http plugin offers no seam")
	}
	if err := seam.AddTransportWrapper(func(upstream string, rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(r *http.Request) (*http.Response, error) {
			f.attempts.Add(1)
			r = r.Clone(r.Context())
			r.Header.Set("Traceparent", "00-"+upstream)
			return rt.RoundTrip(r)
		})
	}); err != nil {
		return err
	}
	return seam.ObserveCalls(func(ctx context.Context, _, _ string) (context.Context, func(int, int, error)) {
		f.calls.Add(1)
		return ctx, nil
	})
}

func TestTelemetrySeamThroughThePlugin(t *testing.T) {
	t.Parallel()
	up := newUpstream(t, status(200))
	tel := &fakeTelemetry{}
	var client *jhttp.ServiceClient
	jfasttest.Start(t, jfasttest.Options{
		// http listed first: the optional dependency still starts telemetry first.
		TOML:    "[plugins]\nenabled = [\"http\", \"telemetry\"]\n[plugin.http.upstreams.billing]\nbase_url = \"" + up.URL + "\"\n",
		Plugins: []framework.Plugin{jhttp.New(), tel},
		Routes: func(app *framework.App, _ chi.Router) error {
			var err error
			client, err = jhttp.Client(app, "billing")
			return err
		},
	})
	if _, err := client.Get(context.Background(), "/x"); err != nil {
		t.Fatal(err)
	}
	if tel.calls.Load() != 1 || tel.attempts.Load() != 1 || up.request(0).Header.Get("Traceparent") != "00-billing" {
		t.Fatalf("calls %d, attempts %d, traceparent %q", tel.calls.Load(), tel.attempts.Load(), up.request(0).Header.Get("Traceparent"))
	}
}

// Another plugin (a gateway) reaches an upstream's policies through
// framework.HTTPTransports, without importing this package, and proxies with
// httputil.ReverseProxy: the request's ID travels, and an unknown
// upstream is an error naming the configured ones.
func TestTransportsForOtherPlugins(t *testing.T) {
	t.Parallel()
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request, _ int) {
		_, _ = w.Write([]byte("proxied " + r.URL.Path))
	})
	svc := jfasttest.Start(t, jfasttest.Options{
		TOML:    "[plugins]\nenabled = [\"http\"]\n[plugin.http.upstreams.billing]\nbase_url = \"" + up.URL + "\"\n",
		Plugins: []framework.Plugin{jhttp.New()},
		Routes: func(app *framework.App, r chi.Router) error {
			transports, ok := app.Plugin("http").(framework.HTTPTransports)
			if !ok {
				return errors.New("the http plugin offers no transports")
			}
			if _, err := transports.UpstreamTransport("biling"); err == nil || !strings.Contains(err.Error(), "billing") {
				return fmt.Errorf("unknown upstream: err = %v, want one naming the configured upstreams", err)
			}
			rt, err := transports.UpstreamTransport("billing")
			if err != nil {
				return err
			}
			target, _ := url.Parse(up.URL)
			r.Handle("/proxy/*", &httputil.ReverseProxy{
				Rewrite: func(pr *httputil.ProxyRequest) {
					pr.SetURL(target)
					pr.Out.URL.Path = strings.TrimPrefix(pr.In.URL.Path, "/proxy")
				},
				Transport: rt,
			})
			return nil
		},
	})
	resp := svc.Get(t, "/proxy/invoices/7") // no inbound ID: the service makes one
	if resp.Status != 200 || resp.String() != "proxied /invoices/7" {
		t.Fatalf("proxied: %d %q", resp.Status, resp)
	}
	if got, want := up.request(0).Header.Get("X-Request-Id"), resp.Header.Get("X-Request-Id"); got == "" || got != want {
		t.Errorf("X-Request-Id at the upstream = %q, want the request's own %q", got, want)
	}
}

// A fix that points at the environment names the upstream's own variable.
func TestFixNamesTheUpstreamsVariable(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ toml, key, env string }{
		{"[plugin.http.upstreams.billing]\ntimeout = \"3s\"\n", "plugin.http.upstreams.billing.base_url", "JFAST_HTTP_UPSTREAMS__BILLING__BASE_URL"},
		{"[plugin.http.upstreams.billing]\nbase_url = \"http://billing:8010\"\ninstances = [\"http://10.0.0.7:8010/api\"]\n", "plugin.http.upstreams.billing.instances[0]", "JFAST_HTTP_UPSTREAMS__BILLING__INSTANCES"},
	} {
		e := jfasttest.ConfigErrors(t, jfasttest.Options{TOML: "[plugins]\nenabled = [\"http\"]\n" + tc.toml, Plugins: []framework.Plugin{jhttp.New()}}).Only(t, tc.key)
		if !strings.HasSuffix(e.Fix, tc.env) {
			t.Errorf("%s: fix %q, want it to end with %s", tc.key, e.Fix, tc.env)
		}
	}
}
