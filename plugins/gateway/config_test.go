package gateway_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/jfasttest"
	"github.com/jfastframework/jfast/plugins/gateway"
	jhttp "github.com/jfastframework/jfast/plugins/http"
)

const enabled = "[plugins]\nenabled = [\"http\", \"gateway\"]\n[plugin.http.upstreams.orders]\nbase_url = \"http://127.0.0.1:1\"\n"

// Every rule of the table is refused at boot, naming the key and the fix.
func TestBadConfigRefusesToBoot(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, toml, key string
		words           []string
	}{
		{"overlapping routes", `
[plugin.gateway.routes.a]
prefix = "/api"
upstream = "orders"
[plugin.gateway.routes.b]
prefix = "/api/orders"
upstream = "orders"`, "plugin.gateway.routes.b.prefix", []string{"overlaps routes.a.prefix", "do not contain each other"}},
		{"same prefix twice", `
[plugin.gateway.routes.a]
prefix = "/api"
upstream = "orders"
[plugin.gateway.routes.b]
prefix = "/api"
upstream = "orders"`, "plugin.gateway.routes.b.prefix", []string{"overlaps"}},
		{"shadows /ready", `
[plugin.gateway.routes.a]
prefix = "/ready"
upstream = "orders"`, "plugin.gateway.routes.a.prefix", []string{"shadow", "/ready"}},
		{"shadows /metrics from below", `
[plugin.gateway.routes.a]
prefix = "/metrics/orders"
upstream = "orders"`, "plugin.gateway.routes.a.prefix", []string{"shadow", "/metrics"}},
		{"root shadows /live", `
[plugin.gateway.routes.a]
prefix = "/"
upstream = "orders"`, "plugin.gateway.routes.a.prefix", []string{"shadow", "/live"}},
		{"no prefix", `
[plugin.gateway.routes.a]
upstream = "orders"`, "plugin.gateway.routes.a.prefix", []string{"missing"}},
		{"trailing slash", `
[plugin.gateway.routes.a]
prefix = "/api/"
upstream = "orders"`, "plugin.gateway.routes.a.prefix", []string{"not end with one"}},
		{"pattern", `
[plugin.gateway.routes.a]
prefix = "/api/{id}"
upstream = "orders"`, "plugin.gateway.routes.a.prefix", []string{"plain path"}},
		{"no upstream", `
[plugin.gateway.routes.a]
prefix = "/api"`, "plugin.gateway.routes.a.upstream", []string{"missing"}},
		{"strip and rewrite", `
[plugin.gateway.routes.a]
prefix = "/api"
upstream = "orders"
strip_prefix = true
rewrite_prefix = "/v1"`, "plugin.gateway.routes.a.rewrite_prefix", []string{"strip_prefix"}},
		{"bad method", `
[plugin.gateway.routes.a]
prefix = "/api"
upstream = "orders"
methods = ["get"]`, "plugin.gateway.routes.a.methods", []string{`"get"`}},
		{"bad trusted proxy", `
[plugin.gateway]
trusted_proxies = ["10.0.0.0/33"]`, "plugin.gateway.trusted_proxies[0]", []string{"network"}},
		{"retry body size", `
[plugin.gateway]
max_retry_body_bytes = 0`, "plugin.gateway.max_retry_body_bytes", []string{"greater than zero"}},
		{"stream write timeout", `
[plugin.gateway]
stream_write_timeout = "0s"`, "plugin.gateway.stream_write_timeout", []string{"positive duration"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			errs := jfasttest.ConfigErrors(t, jfasttest.Options{
				TOML:    enabled + tc.toml,
				Plugins: []framework.Plugin{jhttp.New(), gateway.New()},
			})
			if !errs.Has(tc.key, tc.words...) {
				t.Fatalf("want an error for %s with %q, got:\n%v", tc.key, tc.words, errs)
			}
			e, _ := errs.For(tc.key)
			if e.Fix == "" {
				t.Errorf("%s: no fix given", tc.key)
			}
		})
	}
}

// A route naming an upstream the http plugin does not have fails the boot,
// naming the route's key and the upstreams that are configured.
func TestUnknownUpstreamFailsTheBoot(t *testing.T) {
	t.Parallel()
	app, err := jfasttest.New(t, jfasttest.Options{
		TOML: enabled + `
[plugin.gateway.routes.pay]
prefix = "/api/pay"
upstream = "payments"`,
		Plugins: []framework.Plugin{jhttp.New(), gateway.New()},
	})
	if err != nil {
		t.Fatal(err)
	}
	err = app.Start(context.Background())
	if err == nil {
		_ = app.Stop(context.Background())
		t.Fatal("the boot succeeded with a route to an unknown upstream")
	}
	var ces framework.ConfigErrors
	if !errors.As(err, &ces) || len(ces) != 1 {
		t.Fatalf("error = %v, want one ConfigError", err)
	}
	e := ces[0]
	if e.Key != "plugin.gateway.routes.pay.upstream" || !strings.Contains(e.Problem, "payments") ||
		!strings.Contains(e.Fix, "[plugin.http.upstreams.payments]") || !strings.Contains(e.Fix, "orders") {
		t.Fatalf("error = %+v", e)
	}
}

// The gateway cannot run without the http plugin.
func TestNeedsTheHTTPPlugin(t *testing.T) {
	t.Parallel()
	_, err := jfasttest.New(t, jfasttest.Options{
		TOML:    "[plugins]\nenabled = [\"gateway\"]\n",
		Plugins: []framework.Plugin{jhttp.New(), gateway.New()},
	})
	if err == nil || !strings.Contains(err.Error(), "http") {
		t.Fatalf("error = %v, want one naming the http plugin", err)
	}
}

// A route given by a chi pattern has rules of its own.
func TestBadPatternRefusesToBoot(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, toml, key string
		words           []string
	}{
		{"with prefix", `
[plugin.gateway.routes.a]
prefix = "/api"
pattern = "/api/{id}"
upstream = "orders"`, "plugin.gateway.routes.a.pattern", []string{"cannot be set with prefix"}},
		{"leading parameter", `
[plugin.gateway.routes.a]
pattern = "/{any}/x"
upstream = "orders"`, "plugin.gateway.routes.a.pattern", []string{"fixed segment"}},
		{"shadows /ready", `
[plugin.gateway.routes.a]
pattern = "/ready/{x}"
upstream = "orders"`, "plugin.gateway.routes.a.pattern", []string{"shadow", "/ready"}},
		{"with rewrite", `
[plugin.gateway.routes.a]
pattern = "/api/{id}"
upstream = "orders"
rewrite_prefix = "/v1"`, "plugin.gateway.routes.a.pattern", []string{"rewrite_prefix"}},
		{"critical", `
[plugin.gateway]
critical = true
[plugin.gateway.routes.a]
prefix = "/api"
upstream = "orders"`, "plugin.gateway.critical", []string{"out of rotation", "degraded"}},
		{"overlaps a prefix", `
[plugin.gateway.routes.a]
prefix = "/api"
upstream = "orders"
[plugin.gateway.routes.b]
pattern = "/api/orders/{id}"
upstream = "orders"`, "plugin.gateway.routes.b.pattern", []string{"overlaps routes.a.prefix"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			errs := jfasttest.ConfigErrors(t, jfasttest.Options{
				TOML:    enabled + tc.toml,
				Plugins: []framework.Plugin{jhttp.New(), gateway.New()},
			})
			if !errs.Has(tc.key, tc.words...) {
				t.Fatalf("want an error for %s with %q, got:\n%v", tc.key, tc.words, errs)
			}
		})
	}
}
