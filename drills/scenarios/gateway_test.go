package scenarios_test

import (
	"net/http"
	"testing"
	"time"

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
	return proxied{
		plugins: []framework.Plugin{jhttp.New(), gateway.New()},
		toml: func(addr string) string {
			return billingTOML(addr) + `[plugin.gateway.routes.billing]
prefix = "/api/billing"
upstream = "billing"
strip_prefix = true
`
		},
	}.start(t, httpUpstream(t, http.HandlerFunc(paid)))
}

var gatewayDrill = proxiedDrill{
	dependency: "gateway", route: "/api/billing/invoice",
	nameKey: "dependency", nameValue: "billing", check: "gateway",
	deadline: time.Second + margin, // the upstream's timeout
}.drill

// TestDrillGatewayUpstreamBlackhole: the upstream behind the gateway keeps
// its socket open and answers nothing; each proxied GET (and its retry) is
// cut at timeout with a 503 problem naming the upstream and the route,
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
