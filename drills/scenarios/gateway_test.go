package scenarios_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/jfastframework/jfast/drills"
	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/jfasttest"
	"github.com/jfastframework/jfast/plugins/gateway"
	jhttp "github.com/jfastframework/jfast/plugins/http"
)

// --- an upstream behind the gateway ----------------------------------------

// gatewayService starts a gateway App whose route /api/billing proxies to the
// upstream "billing", a local server behind a fault proxy; /plain is a route
// of the gateway's own.
func gatewayService(t *testing.T) (*jfasttest.Service, *drills.Proxy) {
	t.Helper()
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"paid":true}`)
	}))
	t.Cleanup(up.Close)
	p, err := drills.StartProxy(strings.TrimPrefix(up.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	toml := `[app]
name = "drill"
[plugins]
enabled = ["http", "gateway"]
[plugin.http.upstreams.billing]
base_url = "http://` + p.Addr() + `"
connect_timeout = "300ms"
read_timeout = "300ms"
total_timeout = "1s"
retries = 1
breaker_failures = 3
breaker_cool_down = "` + coolDown + `"
[plugin.gateway.routes.billing]
prefix = "/api/billing"
upstream = "billing"
strip_prefix = true
`
	svc := jfasttest.Start(t, jfasttest.Options{
		TOML:    toml,
		Plugins: []framework.Plugin{jhttp.New(), gateway.New()},
		Routes: func(_ *framework.App, r chi.Router) error {
			r.Method(http.MethodGet, "/plain", framework.Handler(okRoute))
			return nil
		},
	})
	t.Cleanup(func() { p.Pass() })
	return svc, p
}

func gatewayDrill(svc *jfasttest.Service, fault string, take, give func() error) *drills.Drill {
	return &drills.Drill{
		Dependency: "gateway", Fault: fault, BaseURL: svc.URL,
		Route: "/api/billing/invoice", Other: "/plain", Want: http.StatusServiceUnavailable,
		NameKey: "dependency", NameValue: "billing", Check: "gateway",
		Deadline: time.Second + margin, // the upstream's total_timeout
		Take:     take, Give: give,
	}
}

// TestDrillGatewayUpstreamBlackhole: the upstream behind the gateway keeps
// its socket open and answers nothing; each proxied GET (and its retry) is
// cut at total_timeout with a 503 problem naming the upstream and the route,
// until the breaker opens and the gateway answers at once; /ready degraded;
// after the proxy passes again the same App proxies again.
func TestDrillGatewayUpstreamBlackhole(t *testing.T) {
	svc, p := gatewayService(t)
	run(t, gatewayDrill(svc, "upstream blackhole (proxy)", p.Blackhole, p.Pass))
}

// TestDrillGatewayUpstreamReset: every connection to the upstream reset,
// old and new: each proxied GET fails at once with a 503 problem.
func TestDrillGatewayUpstreamReset(t *testing.T) {
	svc, p := gatewayService(t)
	run(t, gatewayDrill(svc, "upstream reset (proxy)", p.Reset, p.Pass))
}
