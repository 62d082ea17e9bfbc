package http

import (
	"context"
	"errors"
	"fmt"
	nethttp "net/http"
	"sort"
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
	clients   map[string]*ServiceClient
	names     []string // sorted
	wrappers  []TransportWrapper
	observers []CallObserver
}

// New returns the http plugin with its defaults.
func New() *Plugin { return &Plugin{} }

// From returns the http plugin of app, or an error when it is not enabled.
func From(app *framework.App) (*Plugin, error) { return framework.Get[*Plugin](app, name) }

// Client returns the client of the upstream configured as
// [plugin.http.upstreams.<upstream>]. Call it when mounting routes, not per
// request; an unknown name is an error, which fails the boot.
func Client(app *framework.App, upstream string) (*ServiceClient, error) {
	p, err := From(app)
	if err != nil {
		return nil, err
	}
	return p.Client(upstream)
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

// Name implements framework.Plugin.
func (p *Plugin) Name() string { return name }

// Config implements framework.Configurable.
func (p *Plugin) Config() any { return &p.cfg }

// DeployKeys implements framework.DeployKeyer: an upstream's address depends
// on where the service runs, and its configured headers often carry a
// credential that does (Authorization, X-Api-Key), so the environment wins for
// base_url and for every headers entry.
func (p *Plugin) DeployKeys() []string {
	return []string{"upstreams.*.base_url", "upstreams.*.headers.*"}
}

// Dependencies implements framework.Dependent: when the telemetry plugin is
// enabled it starts first, so it can add its TransportWrapper and CallObserver
// before the clients are built.
func (p *Plugin) Dependencies() []framework.Dependency {
	return []framework.Dependency{{Name: "telemetry", Optional: true}}
}

// Validate implements framework.Validator.
func (p *Plugin) Validate(v *framework.Validation) {
	for _, n := range sortedNames(p.cfg.Upstreams) {
		u := p.cfg.Upstreams[n]
		sub := v.Sub("upstreams." + n)
		if !validUpstreamName(n) {
			sub.Error("", "is not a valid upstream name", "use lowercase letters, digits, - and _ (it names the upstream in metrics and in JFAST_HTTP_UPSTREAMS__<NAME>__BASE_URL)")
		}
		for _, e := range u.problems() {
			sub.Error(e.key, e.problem, e.fix)
		}
		for _, h := range sortedHeaderNames(u.Headers) {
			if strings.Contains(h, "_") && validHeaderName(h) {
				// JFAST_..._HEADERS__X_API_KEY names the entry x_api_key, not
				// X-Api-Key: accepted, it would send a second header next to
				// the file's X-Api-Key instead of replacing it.
				sub.Error("headers."+h, `has "_" in its name; a JFAST_* variable keeps "_" as is, so JFAST_HTTP_UPSTREAMS__<NAME>__HEADERS__X_API_KEY names the header x_api_key, not X-Api-Key`,
					`write the header with "-" in the file (a name with "-" cannot come from the environment); a header whose name really has "_" can only be sent per call, with http.Header`)
			}
		}
	}
}

func validUpstreamName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

func sortedNames(m map[string]Upstream) []string {
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// AddTransportWrapper adds a [TransportWrapper] to every upstream's client. It
// is the telemetry seam and must be called before the plugin starts (the
// telemetry plugin calls it from its own Start, which runs first); afterwards
// it returns an error.
func (p *Plugin) AddTransportWrapper(w TransportWrapper) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.started {
		return errors.New("http: AddTransportWrapper after the http plugin started; call it from a plugin that starts before it")
	}
	p.wrappers = append(p.wrappers, w)
	return nil
}

// ObserveCalls adds a [CallObserver] to every upstream's client. Like
// AddTransportWrapper it must be called before the plugin starts.
func (p *Plugin) ObserveCalls(f CallObserver) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.started {
		return errors.New("http: ObserveCalls after the http plugin started; call it from a plugin that starts before it")
	}
	p.observers = append(p.observers, f)
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
	p.clients = make(map[string]*ServiceClient, len(p.cfg.Upstreams))
	p.names = sortedNames(p.cfg.Upstreams)
	for _, n := range p.names {
		u := p.cfg.Upstreams[n]
		u.Name = n
		c, err := newClient(u, opts...)
		if err != nil {
			for _, started := range p.clients {
				_ = started.Close()
			}
			return err
		}
		p.clients[n] = c
	}
	p.started = true
	return nil
}

// Stop implements framework.Stopper: it closes every client's idle
// connections. It runs after the server drained, so no call is in flight.
func (p *Plugin) Stop(context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.clients {
		_ = c.Close()
	}
	return nil
}

// Client returns the client of a configured upstream.
func (p *Plugin) Client(upstream string) (*ServiceClient, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if c, ok := p.clients[upstream]; ok {
		return c, nil
	}
	if !p.started {
		return nil, fmt.Errorf("http: the http plugin has not started; ask for upstream '%s' when mounting routes", upstream)
	}
	fix := "add a [plugin.http.upstreams." + upstream + "] table with its base_url"
	if len(p.names) > 0 {
		fix += "; configured upstreams: " + strings.Join(p.names, ", ")
	}
	return nil, fmt.Errorf("http: no upstream '%s' is configured: %s", upstream, fix)
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

// Check implements framework.Checker. It sends nothing: it lists every
// upstream's breaker in meta, and an open or half-open breaker makes the
// check fail, never critically (degraded, not unavailable): this service is
// still up, and taking it out of rotation because a dependency is down turns
// one outage into two.
func (p *Plugin) Check(context.Context) readiness.Report {
	p.mu.Lock()
	names, clients := p.names, p.clients
	p.mu.Unlock()
	upstreams := make(map[string]any, len(names))
	var suspended []string
	for _, n := range names {
		c := clients[n]
		s := c.pol.breaker.Snapshot()
		upstreams[n] = map[string]any{
			"breaker":   s.Meta(),
			"in_flight": c.pol.bulkhead.InFlight(),
		}
		switch s.State {
		case resilience.StateOpen:
			suspended = append(suspended, fmt.Sprintf("calls to '%s' are suspended for %.1fs", n, s.RetryAfter.Seconds()))
		case resilience.StateHalfOpen:
			suspended = append(suspended, fmt.Sprintf("calls to '%s' are suspended while a probe call is in flight", n))
		}
	}
	meta := map[string]any{"upstreams": upstreams}
	if len(suspended) > 0 {
		return readiness.Failed(strings.Join(suspended, "; "), false, meta)
	}
	return readiness.Passed(fmt.Sprintf("%d upstreams, every breaker closed", len(names)), meta)
}

var (
	_ framework.Configurable = (*Plugin)(nil)
	_ framework.Validator    = (*Plugin)(nil)
	_ framework.DeployKeyer  = (*Plugin)(nil)
	_ framework.Dependent    = (*Plugin)(nil)
	_ framework.Starter      = (*Plugin)(nil)
	_ framework.Stopper      = (*Plugin)(nil)
	_ framework.Checker      = (*Plugin)(nil)

	_ framework.HTTPInstrumentable = (*Plugin)(nil)
	_ framework.HTTPTransports     = (*Plugin)(nil)
)
