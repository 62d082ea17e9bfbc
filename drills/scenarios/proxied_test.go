package scenarios_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/jfastframework/jfast/drills"
	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/jfasttest"
)

// --- a dependency behind a fault proxy ---------------------------------------

// httpUpstream starts a local HTTP server answering with h and returns its
// address (host:port); it closes when the test ends.
func httpUpstream(t *testing.T, h http.Handler) string {
	t.Helper()
	up := httptest.NewServer(h)
	t.Cleanup(up.Close)
	return strings.TrimPrefix(up.URL, "http://")
}

// proxied is an App whose dependency is reached through a fault proxy:
// Options.Plugins and the part of the config after [app] and [plugins]
// (made from the proxy's address), and the routes that use the dependency
// (nil when a plugin mounts them); /plain, a route that touches no
// dependency, is mounted after them.
type proxied struct {
	plugins []framework.Plugin
	toml    func(proxyAddr string) string
	routes  func(app *framework.App, r chi.Router) error
}

// start starts a fault proxy in front of addr and the App, named "drill"
// with p's plugins enabled. The proxy passes again before the App stops (a
// drill that failed half way leaves no blackhole for the App's shutdown) and
// closes after it.
func (p proxied) start(t *testing.T, addr string) (*jfasttest.Service, *drills.Proxy) {
	t.Helper()
	proxy, err := drills.StartProxy(addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { proxy.Close() })
	names := make([]string, len(p.plugins))
	for i, pl := range p.plugins {
		names[i] = `"` + pl.Name() + `"`
	}
	svc := jfasttest.Start(t, jfasttest.Options{
		TOML:    "[app]\nname = \"drill\"\n[plugins]\nenabled = [" + strings.Join(names, ", ") + "]\n" + p.toml(proxy.Addr()),
		Plugins: p.plugins,
		Routes: func(app *framework.App, r chi.Router) error {
			if p.routes != nil {
				if err := p.routes(app, r); err != nil {
					return err
				}
			}
			r.Method(http.MethodGet, "/plain", framework.Handler(okRoute))
			return nil
		},
	})
	t.Cleanup(func() { proxy.Pass() })
	return svc, proxy
}

// proxiedDrill is the drill of a route that calls a dependency behind a
// fault proxy: the route answers 503 naming the dependency (under nameKey,
// as its problem says) within deadline while the fault lasts, and 200 again
// after give.
type proxiedDrill struct {
	dependency, route, nameKey, nameValue, check string
	deadline                                     time.Duration
}

func (d proxiedDrill) drill(svc *jfasttest.Service, fault string, take, give func() error) *drills.Drill {
	return &drills.Drill{
		Dependency: d.dependency, Fault: fault, BaseURL: svc.URL,
		Route: d.route, Other: "/plain", Want: http.StatusServiceUnavailable,
		NameKey: d.nameKey, NameValue: d.nameValue, Check: d.check,
		Deadline: d.deadline,
		Take:     take, Give: give,
	}
}
