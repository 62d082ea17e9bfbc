package http

import (
	"context"
	"fmt"
	"maps"
	nethttp "net/http"
	"slices"
	"strings"
	"sync"

	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/framework/resilience"
	"github.com/jfastframework/jfast/readiness"
)

// name is the plugin's name in [plugins] enabled and [plugin.http].
const name = "http"

// Plugin keeps one [ServiceClient] per configured upstream for the life of
// the process. Get it with [From], or a client directly with [Client].
type Plugin struct {
	cfg Config

	mu        sync.Mutex
	started   bool
	clients   framework.Named[*ServiceClient]
	shared    framework.Named[*SharedClient]
	wrappers  []TransportWrapper
	observers []CallObserver
}

// The tables of named clients, in the words of their errors.
var (
	upstreamsTable = framework.NamedTable{
		Plugin: name, Key: "upstreams", Noun: "upstream", Nouns: "upstreams",
		Needs: "with its base_url", DeployKey: "base_url",
	}
	sharedTable = framework.NamedTable{
		Plugin: name, Key: "shared", Noun: "shared client", Nouns: "shared clients",
	}
)

// New returns the http plugin with its defaults.
func New() *Plugin { return &Plugin{} }

// From returns the http plugin of app, or an error when it is not enabled.
func From(app *framework.App) (*Plugin, error) { return framework.Get[*Plugin](app, name) }

// Client returns the client of the upstream configured as
// [plugin.http.upstreams.<upstream>]. Call it when mounting routes, not per
// request; an unknown name is an error, which fails the boot.
func Client(app *framework.App, upstream string) (*ServiceClient, error) {
	return framework.GetNamed(app, name, (*Plugin).Client, upstream)
}

// Transport returns the RoundTripper of the upstream configured as
// [plugin.http.upstreams.<upstream>]: the upstream's policies for an SDK or a
// reverse proxy (see [ServiceClient.Transport]). Call it at boot.
func Transport(app *framework.App, upstream string) (nethttp.RoundTripper, error) {
	c, err := Client(app, upstream)
	if err != nil {
		return nil, err
	}
	return c.Transport(), nil
}

// HTTPClient returns an *http.Client over the RoundTripper of the upstream
// configured as [plugin.http.upstreams.<upstream>], which never follows
// redirects (see [ServiceClient.HTTPClient]). Call it at boot.
func HTTPClient(app *framework.App, upstream string) (*nethttp.Client, error) {
	c, err := Client(app, upstream)
	if err != nil {
		return nil, err
	}
	return c.HTTPClient(), nil
}

// Shared returns the shared client configured as [plugin.http.shared.<name>],
// for calls by absolute URL. Call it at boot; an unknown name is an error.
func Shared(app *framework.App, shared string) (*SharedClient, error) {
	return framework.GetNamed(app, name, (*Plugin).Shared, shared)
}

// Name implements framework.Plugin.
func (p *Plugin) Name() string { return name }

// Config implements framework.Configurable.
func (p *Plugin) Config() any { return &p.cfg }

// DeployKeys implements framework.DeployKeyer: an upstream's address depends
// on where the service runs, and its configured headers often carry a
// credential that does (Authorization, X-Api-Key), so the environment wins for
// base_url and for every headers entry.
func (p *Plugin) DeployKeys() []string {
	return []string{"upstreams.*.base_url", "upstreams.*.instances", "upstreams.*.headers.*", "shared.*.headers.*"}
}

// SecretKeys implements framework.SecretKeyer: every configured header value
// is masked, whatever the header is called (a partner's X-Partner-Auth is as
// secret as an Authorization).
func (p *Plugin) SecretKeys() []string {
	return []string{"upstreams.*.headers.*", "shared.*.headers.*"}
}

// Dependencies implements framework.Dependent: when the telemetry plugin is
// enabled it starts first, so it can add its TransportWrapper and CallObserver
// before the clients are built.
func (p *Plugin) Dependencies() []framework.Dependency {
	return []framework.Dependency{{Name: "telemetry", Optional: true}}
}

// Validate implements framework.Validator.
func (p *Plugin) Validate(v *framework.Validation) {
	v.RefuseCritical()
	framework.ValidateNamed(v, upstreamsTable, p.cfg.Upstreams, func(u Upstream) []framework.ConfigError {
		return append(u.problems(), headerProblems(u.Headers)...)
	})
	framework.ValidateNamed(v, sharedTable, p.cfg.Shared, func(s SharedConfig) []framework.ConfigError {
		return sharedVariables(append(s.problems(), headerProblems(s.Headers)...))
	})
}

// sharedVariables makes the problems a shared client's keys share with an
// upstream's name the shared client's variables (JFAST_HTTP_SHARED__…),
// not an upstream's.
func sharedVariables(l []framework.ConfigError) []framework.ConfigError {
	r := strings.NewReplacer("JFAST_HTTP_UPSTREAMS__", "JFAST_HTTP_SHARED__")
	for i := range l {
		l[i].Problem, l[i].Fix = r.Replace(l[i].Problem), r.Replace(l[i].Fix)
	}
	return l
}

// headerProblems are the problems of a client's configured headers that
// its own checks do not see.
func headerProblems(headers map[string]string) []framework.ConfigError {
	var l framework.Problems
	for _, h := range slices.Sorted(maps.Keys(headers)) {
		if strings.Contains(h, "_") && validHeaderName(h) {
			// JFAST_..._HEADERS__X_API_KEY names the entry x_api_key, not
			// X-Api-Key: accepted, it would send a second header next to
			// the file's X-Api-Key instead of replacing it.
			l.Error("headers."+h, `has "_" in its name; a JFAST_* variable keeps "_" as is, so JFAST_HTTP_UPSTREAMS__<NAME>__HEADERS__X_API_KEY names the header x_api_key, not X-Api-Key`,
				`write the header with "-" in the file or in the variable (JFAST_HTTP_UPSTREAMS__<NAME>__HEADERS__X-API-KEY, which env(1), Docker and Kubernetes can set, though a shell's export cannot); a header whose name really has "_" can only be sent per call, with http.Header`)
		}
	}
	return l
}

// AddTransportWrapper adds a [TransportWrapper] to every upstream's client. It
// is the telemetry seam and must be called before the plugin starts (the
// telemetry plugin calls it from its own Start, which runs first); afterwards
// it returns an error.
func (p *Plugin) AddTransportWrapper(w TransportWrapper) error {
	return p.beforeStart("AddTransportWrapper", func() { p.wrappers = append(p.wrappers, w) })
}

// ObserveCalls adds a [CallObserver] to every upstream's client. Like
// AddTransportWrapper it must be called before the plugin starts.
func (p *Plugin) ObserveCalls(f CallObserver) error {
	return p.beforeStart("ObserveCalls", func() { p.observers = append(p.observers, f) })
}

// beforeStart runs add, under the plugin's lock, when the plugin has not
// started; once it has, it returns an error naming method: Start hands the
// wrappers and observers to the clients it builds, so one added later would
// reach none of them.
func (p *Plugin) beforeStart(method string, add func()) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.started {
		return fmt.Errorf("http: %s after the http plugin started; call it from a plugin that starts before it", method)
	}
	add()
	return nil
}

// Start implements framework.Starter: it builds every upstream's client. No
// connection is made: an upstream that is down does not fail the boot.
func (p *Plugin) Start(_ context.Context, app *framework.App) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	set := newMetricSet()
	if err := set.register(app.Metrics()); err != nil {
		return fmt.Errorf("http: registering metrics: %w", err)
	}
	opts := []ClientOption{WithClock(app.Clock()), WithLogger(app.Logger()), withMetricSet(set)}
	for _, w := range p.wrappers {
		opts = append(opts, WithTransportWrapper(w))
	}
	for _, f := range p.observers {
		opts = append(opts, WithCallObserver(f))
	}
	var err error
	p.clients, err = framework.BuildNamed(p.cfg.Upstreams, func(n string, u Upstream) (*ServiceClient, error) {
		u.Name = n
		return newClient(u, opts...)
	})
	if err == nil {
		p.shared, err = framework.BuildNamed(p.cfg.Shared, func(n string, s SharedConfig) (*SharedClient, error) {
			s.Name = n
			return newSharedClient(s, opts...)
		})
	}
	if err != nil {
		p.closeAllLocked()
		return err
	}
	p.started = true
	return nil
}

func (p *Plugin) closeAllLocked() {
	for _, c := range p.clients.All() {
		_ = c.Close()
	}
	for _, c := range p.shared.All() {
		_ = c.Close()
	}
}

// Stop implements framework.Stopper: it closes every client's idle
// connections. It runs after the server drained, so no call is in flight.
func (p *Plugin) Stop(context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closeAllLocked()
	return nil
}

// Client returns the client of a configured upstream.
func (p *Plugin) Client(upstream string) (*ServiceClient, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.clients.Lookup(upstreamsTable, upstream, p.started)
}

// Shared returns a configured shared client.
func (p *Plugin) Shared(name string) (*SharedClient, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.shared.Lookup(sharedTable, name, p.started)
}

// SharedTransport implements framework.HTTPTransports: the RoundTripper of
// a configured shared client, for plugins that cannot import this package.
func (p *Plugin) SharedTransport(name string) (nethttp.RoundTripper, error) {
	c, err := p.Shared(name)
	if err != nil {
		return nil, err
	}
	return c.Transport(), nil
}

// UpstreamTransport implements framework.HTTPTransports: the RoundTripper of
// a configured upstream, for plugins that cannot import this package.
func (p *Plugin) UpstreamTransport(upstream string) (nethttp.RoundTripper, error) {
	c, err := p.Client(upstream)
	if err != nil {
		return nil, err
	}
	return c.Transport(), nil
}

// ProxiedUpstream implements framework.HTTPUpstreams: what a reverse proxy
// (the gateway) needs of [plugin.http.upstreams.<upstream>], found in one
// lookup. An unknown name is the error of [Plugin.Client].
func (p *Plugin) ProxiedUpstream(upstream string) (framework.ProxiedUpstream, error) {
	c, err := p.Client(upstream)
	if err != nil {
		return framework.ProxiedUpstream{}, err
	}
	return framework.ProxiedUpstream{Transport: c.Transport(), BaseURL: c.up.BaseURL, Breaker: c.Breaker(), Bulkhead: c.pol.bulkhead, Timeout: c.up.Timeout,
		RouteBreaker: func(route string) *resilience.Breaker { return c.breakerFor(c.pol, route) }}, nil
}

// Check implements framework.Checker. It sends nothing: it lists every
// upstream's breaker in meta (and, with breaker_key = "route", the route
// breakers that are not closed). An open breaker reports the upstream
// unreachable (the failures that opened it said so), never critical
// (critical = true is refused: every replica sees the same upstream down, so
// all would leave rotation together); a half-open one is
// impaired (degraded): the next call probes, and with no check of its own the
// plugin cannot know sooner. An upstream with instances is unreachable when
// every instance is ejected, by its breaker or its health check (the calls
// still go to those failing only their check, but the upstream is as good
// as down), or none is resolved; some ejected are named in the detail and
// leave the check passing, and so are those whose breaker is half-open (not
// ejected: each lets one call probe it). Shared clients are listed (origins held, breakers
// not closed) but never fail the check: one of the many hosts a webhook sender
// calls being down says nothing about this service.
func (p *Plugin) Check(context.Context) readiness.Report {
	p.mu.Lock()
	clients, shared := p.clients, p.shared
	p.mu.Unlock()
	upstreams := make(map[string]any, clients.Len())
	var suspended []string
	open := false
	suspend := func(what string, s resilience.BreakerSnapshot) {
		open = open || s.State == resilience.StateOpen
		if d := s.Suspension(what); d != "" {
			suspended = append(suspended, d)
		}
	}
	var ejected []string // instances ejected or half-open while others serve: said, not a failure
	for n, c := range clients.All() {
		if set := c.pol.instances; set != nil {
			entry, skipped, all := instancesMeta(set)
			entry["in_flight"] = c.pol.bulkhead.InFlight()
			switch {
			case all == 0:
				open = true
				suspended = append(suspended, fmt.Sprintf("upstream '%s': %v", n, noInstance(set)))
			case skipped == all: // by breakers, health checks, or both
				open = true
				suspended = append(suspended, "every instance of '"+n+"' is ejected: "+ejectedDetail(set))
			case skipped > 0:
				ejected = append(ejected, "instances of '"+n+"' ejected: "+ejectedDetail(set))
			}
			if d := halfOpenDetail(set); d != "" {
				ejected = append(ejected, "instances of '"+n+"' half-open, the next call to each probing it: "+d)
			}
			upstreams[n] = entry
			continue
		}
		s := c.pol.breaker.Snapshot()
		entry := map[string]any{
			"breaker":   s.Meta(),
			"in_flight": c.pol.bulkhead.InFlight(),
		}
		suspend("'"+n+"'", s)
		if c.routes != nil {
			held, notClosed := c.notClosed()
			routes := make(map[string]any, len(notClosed))
			for _, route := range slices.Sorted(maps.Keys(notClosed)) {
				routes[route] = notClosed[route].Meta()
				suspend("'"+n+"' on "+route, notClosed[route])
			}
			entry["routes_held"] = held
			entry["routes"] = routes
		}
		upstreams[n] = entry
	}
	meta := map[string]any{"upstreams": upstreams}
	if shared.Len() > 0 {
		sm := make(map[string]any, shared.Len())
		for n, c := range shared.All() {
			held, open := c.notClosedOrigins()
			origins := make(map[string]any, len(open))
			for _, o := range slices.Sorted(maps.Keys(open)) {
				origins[o] = open[o].Meta()
			}
			sm[n] = map[string]any{"origins_held": held, "max_origins": c.cfg.MaxOrigins, "suspended": origins}
		}
		meta["shared"] = sm
	}
	switch {
	case open:
		return readiness.Unreachable(strings.Join(append(suspended, ejected...), "; "), meta)
	case len(suspended) > 0:
		return readiness.Impaired(strings.Join(append(suspended, ejected...), "; "), meta)
	case len(ejected) > 0:
		return readiness.Passed(fmt.Sprintf("%d upstreams, every one available; %s", clients.Len(), strings.Join(ejected, "; ")), meta)
	}
	return readiness.Passed(fmt.Sprintf("%d upstreams, every breaker closed", clients.Len()), meta)
}

// maxListed bounds the breakers /ready lists for one client.
const maxListed = 20

// namedBreaker is a breaker and what /ready calls it.
type namedBreaker struct {
	key string
	br  *resilience.Breaker
}

// notClosed returns the snapshots of the breakers not closed (at most
// maxListed), by key. Snapshot can log a transition, so it is taken outside
// the lock of the map the breakers came from.
func notClosed(brs []namedBreaker) map[string]resilience.BreakerSnapshot {
	open := map[string]resilience.BreakerSnapshot{}
	for _, e := range brs {
		if s := e.br.Snapshot(); s.State != resilience.StateClosed && len(open) < maxListed {
			open[e.key] = s
		}
	}
	return open
}

// routeBreakers returns the route breakers held, keyed by origin and route.
func (c *core) routeBreakers() []namedBreaker {
	var brs []namedBreaker
	c.routes.each(func(key string, br *resilience.Breaker) { brs = append(brs, namedBreaker{key, br}) })
	return brs
}

// notClosed returns how many route breakers are held and those not closed,
// by route.
func (c *ServiceClient) notClosed() (int, map[string]resilience.BreakerSnapshot) {
	brs := c.routeBreakers()
	for i := range brs {
		brs[i].key = strings.TrimPrefix(brs[i].key, c.origin+" ")
	}
	return len(brs), notClosed(brs)
}

// notClosedOrigins returns how many origins are held and the breakers not
// closed, by origin (and route, with breaker_key = "route").
func (c *SharedClient) notClosedOrigins() (int, map[string]resilience.BreakerSnapshot) {
	var brs []namedBreaker
	c.origins.each(func(origin string, p *policy) { brs = append(brs, namedBreaker{origin, p.breaker}) })
	held := len(brs)
	if c.routes != nil {
		for _, e := range c.routeBreakers() {
			brs = append(brs, namedBreaker{strings.Replace(e.key, " ", "", 1), e.br}) // "http://a:80/pay/{id}"
		}
	}
	return held, notClosed(brs)
}

var (
	_ framework.ClientPlugin = (*Plugin)(nil)
	_ framework.Dependent    = (*Plugin)(nil)
	_ framework.Stopper      = (*Plugin)(nil)

	_ framework.HTTPInstrumentable = (*Plugin)(nil)
	_ framework.HTTPTransports     = (*Plugin)(nil)

	_ framework.ConditionalKeys = SharedConfig{}
)
