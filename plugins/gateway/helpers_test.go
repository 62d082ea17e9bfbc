package gateway_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/jfasttest"
	"github.com/jfastframework/jfast/plugins/gateway"
	jhttp "github.com/jfastframework/jfast/plugins/http"
)

// upstream is a real HTTP server on loopback that counts its requests.
type upstream struct {
	*httptest.Server
	hits atomic.Int64
	last atomic.Pointer[http.Request]
}

func newUpstream(t testing.TB, h http.HandlerFunc) *upstream {
	t.Helper()
	u := &upstream{}
	u.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.hits.Add(1)
		u.last.Store(r)
		h(w, r)
	}))
	t.Cleanup(u.Close)
	return u
}

// gatewayService starts a service with the http and gateway plugins and the
// given TOML (which names the upstreams and routes).
func gatewayService(t testing.TB, toml string, opts ...func(*jfasttest.Options)) *jfasttest.Service {
	t.Helper()
	o := jfasttest.Options{
		TOML:    "[plugins]\nenabled = [\"http\", \"gateway\"]\n" + toml,
		Plugins: gatewayPlugins(),
	}
	for _, f := range opts {
		f(&o)
	}
	return jfasttest.Start(t, o)
}

// gatewayPlugins are the plugins a gateway compiles in.
func gatewayPlugins() []framework.Plugin { return []framework.Plugin{jhttp.New(), gateway.New()} }

// problemOf decodes a problem+json body.
func problemOf(t testing.TB, r jfasttest.Response) map[string]any {
	t.Helper()
	if ct := r.Header.Get("Content-Type"); ct != "application/problem+json" {
		t.Fatalf("Content-Type = %q, want application/problem+json (status %d, body %s)", ct, r.Status, r.Body)
	}
	var p map[string]any
	if err := json.Unmarshal(r.Body, &p); err != nil {
		t.Fatalf("problem body: %v: %s", err, r.Body)
	}
	return p
}

// metric returns the value of the counter (or the sample count of the
// histogram) name with the given label pairs, 0 when absent.
func metric(t testing.TB, reg *prometheus.Registry, name string, labels ...string) float64 {
	t.Helper()
	return jfasttest.Metric(t, reg, name, labels...)
}

// upstreamTOML is an [plugin.http.upstreams.<name>] table for base with the
// extra keys given.
func upstreamTOML(name, base string, keys ...string) string {
	return "[plugin.http.upstreams." + name + "]\nbase_url = \"" + base + "\"\n" + strings.Join(keys, "\n") + "\n"
}
