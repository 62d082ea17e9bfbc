package gateway

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"sync"

	"github.com/go-chi/chi/v5"

	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/framework/resilience"
	"github.com/jfastframework/jfast/internal/background"
	"github.com/jfastframework/jfast/readiness"
)

// Name is the plugin's name in [plugins] enabled and [plugin.gateway].
const Name = "gateway"

// Plugin proxies the routes of [plugin.gateway.routes] to the http plugin's
// upstreams. Make it with [New].
type Plugin struct {
	cfg Config

	mu      sync.Mutex
	routes  []*route // by name
	trusted []netip.Prefix
	log     *slog.Logger
	clock   resilience.Clock
	drain   context.Context // ends when the App starts draining or the plugin stops
	watch   background.Task // drain's: waits for the App to start draining
}

// New returns the gateway plugin with its defaults.
func New() *Plugin { return &Plugin{cfg: defaultConfig()} }

// Name implements framework.Plugin.
func (p *Plugin) Name() string { return Name }

// Config implements framework.Configurable.
func (p *Plugin) Config() any { return &p.cfg }

// Validate implements framework.Validator. That each route's upstream is
// configured is checked at Start, where the http plugin can be asked.
func (p *Plugin) Validate(v *framework.Validation) {
	v.RefuseCritical()
	p.cfg.validate(v)
}

// Dependencies implements framework.Dependent: the http plugin builds the
// upstreams' clients in its Start, so it starts first.
func (p *Plugin) Dependencies() []framework.Dependency {
	return []framework.Dependency{{Name: "http"}}
}

// Start implements framework.Starter: it takes each route's upstream from the
// http plugin (a route naming an upstream that is not configured fails the
// boot, naming the key) and registers the metrics. Nothing is sent: an
// upstream that is down does not fail the boot.
func (p *Plugin) Start(_ context.Context, app *framework.App) error {
	h, err := framework.Get[framework.HTTPUpstreams](app, "http")
	if err != nil {
		return fmt.Errorf("gateway: routes go to the http plugin's upstreams: %w", err)
	}
	m, err := newMetrics(app.Metrics())
	if err != nil {
		return fmt.Errorf("gateway: registering metrics: %w", err)
	}
	trusted := make([]netip.Prefix, 0, len(p.cfg.TrustedProxies))
	for _, s := range p.cfg.TrustedProxies {
		pr, _ := parseTrusted(s) // checked by Validate
		trusted = append(trusted, pr)
	}
	p.trusted = trusted
	p.log = app.Logger().With("plugin", Name)
	p.clock = app.Clock()

	var errs framework.ConfigErrors
	var routes []*route
	for _, n := range slices.Sorted(maps.Keys(p.cfg.Routes)) {
		rc := p.cfg.Routes[n]
		rt, err := p.newRoute(n, rc, h, m)
		if err != nil {
			problem, fix, _ := strings.Cut(strings.TrimPrefix(err.Error(), "http: "), ": ")
			errs = append(errs, framework.ConfigError{
				Key:     "plugin.gateway.routes." + n + ".upstream",
				Problem: fmt.Sprintf("names upstream '%s': %s", rc.Upstream, problem),
				Fix:     fix,
			})
			continue
		}
		routes = append(routes, rt)
	}
	if len(errs) > 0 {
		return errs
	}

	p.watch.Stop() // a watch of an earlier Start
	drain := p.watch.Go(func(ctx context.Context) {
		select {
		case <-app.Draining():
		case <-ctx.Done():
		}
	})
	p.mu.Lock()
	p.routes, p.drain = routes, drain
	p.mu.Unlock()
	return nil
}

// Stop implements framework.Stopper. It runs after the server drained, so no
// proxied request is in flight.
func (p *Plugin) Stop(context.Context) error {
	p.watch.Stop()
	return nil
}

// MountRoutes implements framework.RouteMounter: each route serves its prefix
// and everything under it, for its methods (GET, HEAD, POST, PUT, PATCH,
// DELETE and OPTIONS when none is listed), with its body limit. Any other
// method gets the framework's 405 problem, whose Allow lists the route's.
func (p *Plugin) MountRoutes(r chi.Router) {
	p.mu.Lock()
	routes := p.routes
	p.mu.Unlock()
	for _, rt := range routes {
		var h http.Handler = rt
		if n := rt.cfg.MaxBodyBytes; n > 0 {
			h = framework.MaxBodyBytes(n)(h)
		}
		patterns := []string{rt.cfg.Prefix, rt.cfg.Prefix + "/*"}
		if rt.cfg.Pattern != "" {
			patterns = []string{rt.cfg.Pattern}
		}
		methods := rt.cfg.Methods
		if len(methods) == 0 {
			methods = validMethods
		}
		for _, pattern := range patterns {
			for _, m := range methods {
				r.Method(m, pattern, h)
			}
		}
	}
}

// Check implements framework.Checker. It sends nothing: it lists each route's
// upstream breaker. A route whose breaker is not closed makes the check
// degraded (impaired), never unavailable: the other routes still work, and
// the replica is no better placed than another to reach that upstream, so
// taking it out of rotation would only lose the routes that work.
func (p *Plugin) Check(context.Context) readiness.Report {
	p.mu.Lock()
	routes := p.routes
	p.mu.Unlock()
	meta := make(map[string]any, len(routes))
	var suspended []string
	for _, rt := range routes {
		br := rt.breaker
		if rt.routeBreaker != nil {
			br = rt.routeBreaker(rt.template) // the route's own with breaker_key = "route"
		}
		s := br.Snapshot()
		key, path := rt.cfg.path()
		if key == "pattern" {
			path = rt.cfg.Pattern
		}
		meta[rt.name] = map[string]any{
			key:        path,
			"upstream": rt.cfg.Upstream,
			"breaker":  s.Meta(),
		}
		if d := s.Suspension("upstream '" + rt.cfg.Upstream + "'"); d != "" {
			suspended = append(suspended, "route '"+rt.name+"': "+d)
		}
	}
	m := map[string]any{"routes": meta}
	if len(suspended) > 0 {
		return readiness.Impaired(strings.Join(suspended, "; "), m)
	}
	return readiness.Passed(fmt.Sprintf("%d routes, every upstream breaker closed", len(routes)), m)
}

var (
	_ framework.LayeredPlugin = (*Plugin)(nil)
	_ framework.RouteMounter  = (*Plugin)(nil)
)
