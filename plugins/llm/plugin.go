package llm

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/readiness"
)

// name is the plugin's name in [plugins] enabled and [plugin.llm].
const name = "llm"

// Plugin keeps one [Client] per configured provider for the life of the
// process. Get a client with [Provider].
type Plugin struct {
	cfg Config

	mu      sync.Mutex
	started bool
	clients framework.Named[*Client]
}

// providersTable is [plugin.llm.providers], in the words of its errors.
var providersTable = framework.NamedTable{
	Plugin: name, Key: "providers", Noun: "provider", Nouns: "providers",
	Needs: "with its base_url and model", DeployKey: "base_url",
}

// New returns the llm plugin with its defaults.
func New() *Plugin { return &Plugin{} }

// From returns the llm plugin of app, or an error when it is not enabled.
func From(app *framework.App) (*Plugin, error) { return framework.Get[*Plugin](app, name) }

// Provider returns the client of the provider configured as
// [plugin.llm.providers.<provider>]. Call it when mounting routes, not per
// request; an unknown name is an error, which fails the boot.
func Provider(app *framework.App, provider string) (*Client, error) {
	return framework.GetNamed(app, name, (*Plugin).Client, provider)
}

// Name implements framework.Plugin.
func (p *Plugin) Name() string { return name }

// Config implements framework.Configurable.
func (p *Plugin) Config() any { return &p.cfg }

// DeployKeys implements framework.DeployKeyer: where a provider is and the
// key it takes depend on where the service runs.
func (p *Plugin) DeployKeys() []string {
	return []string{"providers.*.base_url", "providers.*.api_key", "providers.*.proxy"}
}

// SecretKeys implements framework.SecretKeyer: a provider's API key, and its
// proxy's URL (which may carry credentials), are masked in `jfast config`,
// in boot errors and in every log line.
func (p *Plugin) SecretKeys() []string { return []string{"providers.*.api_key", "providers.*.proxy"} }

// Dependencies implements framework.Dependent: when the telemetry plugin is
// enabled it starts first, so its tracer provider exists when the clients
// are built.
func (p *Plugin) Dependencies() []framework.Dependency {
	return []framework.Dependency{{Name: "telemetry", Optional: true}}
}

// Validate implements framework.Validator.
func (p *Plugin) Validate(v *framework.Validation) {
	framework.ValidateNamed(v, providersTable, p.cfg.Providers, func(pc ProviderConfig) []framework.ConfigError { return pc.problems() })
	sub := v.Sub("providers")
	for _, n := range slices.Sorted(maps.Keys(p.cfg.Providers)) {
		refuseHedgingKeys(sub.Sub(n), p.cfg.Providers[n])
	}
	for _, e := range fallbackProblems(p.cfg.Providers) {
		sub.Error(e.Key, e.Problem, e.Fix)
	}
}

// Start implements framework.Starter: it builds every provider's client and
// links the fallbacks. Nothing is sent: a provider that is down does not
// fail the boot.
func (p *Plugin) Start(_ context.Context, app *framework.App) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	shared, err := framework.AppClientOptions(app, name, newMetricSet)
	if err != nil {
		return err
	}
	opts := []ClientOption{withShared(shared)}
	if t, err := framework.Get[framework.Tracing](app, "telemetry"); err == nil {
		if tp := t.TracerProvider(); tp != nil {
			opts = append(opts, WithTracerProvider(tp))
		}
	}
	p.clients, err = framework.BuildNamed(p.cfg.Providers, func(n string, pc ProviderConfig) (*Client, error) {
		pc.Name = n
		return newClient(pc, opts...)
	})
	if err != nil {
		return err
	}
	for n, c := range p.clients.All() {
		if fb := p.cfg.Providers[n].Fallback; fb != "" {
			c.fallback, _ = p.clients.Get(fb)
		}
	}
	p.started = true
	return nil
}

// Stop implements framework.Stopper: it closes every client's idle
// connections. It runs after the servers drained, so no handler's call is in
// flight.
func (p *Plugin) Stop(context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.clients.All() {
		_ = c.Close()
	}
	return nil
}

// Client returns the client of a configured provider.
func (p *Plugin) Client(provider string) (*Client, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.clients.Lookup(providersTable, provider, p.started)
}

// Check implements framework.Checker. It sends nothing (a request to a
// model costs money and counts against its rate limit): it lists every
// provider's breaker, its calls in flight and its fallback. An open or
// half-open breaker is reported impaired — degraded, never unavailable,
// even with [plugin.llm] critical = true: every replica shares the
// provider, so taking them out of rotation would turn a model outage into
// an outage of the whole service.
func (p *Plugin) Check(context.Context) readiness.Report {
	p.mu.Lock()
	clients := p.clients
	p.mu.Unlock()
	providers := make(map[string]any, clients.Len())
	var suspended []string
	for n, c := range clients.All() {
		s := c.Breaker().Snapshot()
		entry := map[string]any{
			"breaker":   s.Meta(),
			"model":     c.cfg.Model,
			"in_flight": c.Bulkhead().InFlight(),
		}
		if c.fallback != nil {
			entry["fallback"] = c.fallback.cfg.Name
		}
		providers[n] = entry
		if d := s.Suspension("model provider '" + n + "'"); d != "" {
			suspended = append(suspended, d)
		}
	}
	meta := map[string]any{"providers": providers}
	if len(suspended) > 0 {
		return readiness.Impaired(strings.Join(suspended, "; "), meta)
	}
	return readiness.Passed(fmt.Sprintf("%d providers, every breaker closed", clients.Len()), meta)
}

var (
	_ framework.ClientPlugin    = (*Plugin)(nil)
	_ framework.Dependent       = (*Plugin)(nil)
	_ framework.Stopper         = (*Plugin)(nil)
	_ framework.ConditionalKeys = ProviderConfig{}
)
