package grpc

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"google.golang.org/grpc"

	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/framework/resilience"
	"github.com/jfastframework/jfast/readiness"
)

// name is the plugin's name in [plugins] enabled and [plugin.grpc].
const name = "grpc"

// Plugin keeps one [ServiceClient] per configured upstream and the channel
// pool they share for the life of the process, and serves gRPC when
// [plugin.grpc.server] listen is set. Get it with [From], a client with
// [Client], the server to register services on with [Server].
type Plugin struct {
	cfg Config

	mu      sync.Mutex
	started bool
	pool    *Pool
	clients framework.Named[*ServiceClient]
	server  *server // nil when listen is empty
}

// upstreamsTable is [plugin.grpc.upstreams], in the words of its errors.
var upstreamsTable = framework.NamedTable{
	Plugin: name, Key: "upstreams", Noun: "upstream", Nouns: "upstreams",
	Needs: "with its target (or instances)", DeployKey: "target",
}

// New returns the grpc plugin with its defaults.
func New() *Plugin { return &Plugin{} }

// From returns the grpc plugin of app, or an error when it is not enabled.
func From(app *framework.App) (*Plugin, error) { return framework.Get[*Plugin](app, name) }

// Client returns the client of the upstream configured as
// [plugin.grpc.upstreams.<upstream>]. Call it when mounting routes, not per
// request; an unknown name is an error, which fails the boot.
func Client(app *framework.App, upstream string) (*ServiceClient, error) {
	return framework.GetNamed(app, name, (*Plugin).Client, upstream)
}

// Server returns what the service registers its gRPC services on, from
// Options.Routes:
//
//	srv, err := grpc.Server(app)
//	if err != nil {
//		return err
//	}
//	shoppb.RegisterInventoryServer(srv, inventory)
//
// It is an error when [plugin.grpc.server] listen is not set.
func Server(app *framework.App) (grpc.ServiceRegistrar, error) {
	return framework.GetVia(app, name, (*Plugin).Server)
}

// Name implements framework.Plugin.
func (p *Plugin) Name() string { return name }

// Config implements framework.Configurable.
func (p *Plugin) Config() any { return &p.cfg }

// DeployKeys implements framework.DeployKeyer: where an upstream is, how it
// is secured and the credentials its headers carry depend on where the
// service runs, and so does the address the server listens on.
func (p *Plugin) DeployKeys() []string {
	return []string{
		"upstreams.*.target", "upstreams.*.instances", "upstreams.*.insecure", "upstreams.*.ca_file", "upstreams.*.server_name",
		"upstreams.*.headers.*", "server.listen",
	}
}

// SecretKeys implements framework.SecretKeyer: every configured metadata
// value is masked, whatever its key (a partner's x-partner-auth is as secret
// as an authorization), as the http plugin's headers are.
func (p *Plugin) SecretKeys() []string { return []string{"upstreams.*.headers.*"} }

// Dependencies implements framework.Dependent: when the telemetry plugin is
// enabled it starts first, so its tracer provider exists when the channels
// and the server are built.
func (p *Plugin) Dependencies() []framework.Dependency {
	return []framework.Dependency{{Name: "telemetry", Optional: true}}
}

// Validate implements framework.Validator.
func (p *Plugin) Validate(v *framework.Validation) {
	v.RefuseCritical()
	framework.ValidateNamed(v, upstreamsTable, p.cfg.Upstreams, func(u Upstream) []framework.ConfigError { return u.problems() })
	if l := p.cfg.Server.Listen; l != "" {
		if problem := checkListen(l); problem != "" {
			v.Sub("server").Error("listen", problem, `set an address such as "127.0.0.1:9000", in the file or in JFAST_GRPC_SERVER__LISTEN, or remove it to serve no gRPC`)
		}
		v.Sub("server").Listens("listen", l)
	}
}

// otelOptions returns otelgrpc's options when the telemetry plugin is
// enabled and exports, else nil.
func otelOptions(app *framework.App) []otelgrpc.Option {
	t, err := framework.Get[framework.Tracing](app, "telemetry")
	if err != nil {
		return nil // tracing is optional
	}
	tp := t.TracerProvider()
	if tp == nil {
		return nil
	}
	return []otelgrpc.Option{
		otelgrpc.WithTracerProvider(tp),
		otelgrpc.WithPropagators(t.Propagator()),
		// The plugin's own Prometheus metrics count calls; otelgrpc's
		// would only duplicate them.
		otelgrpc.WithMeterProvider(metricnoop.NewMeterProvider()),
	}
}

// Start implements framework.Starter: it builds the channel pool, every
// upstream's client and, when listen is set, the gRPC server. No connection
// is made: an upstream that is down does not fail the boot.
func (p *Plugin) Start(_ context.Context, app *framework.App) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	shared, err := framework.AppClientOptions(app, name, newMetricSet)
	if err != nil {
		return err
	}
	otel := otelOptions(app)
	var base []grpc.DialOption
	if otel != nil {
		base = append(base, grpc.WithStatsHandler(otelgrpc.NewClientHandler(otel...)))
	}
	p.pool = NewPool(base...)
	opts := []ClientOption{withShared(shared), WithPool(p.pool)}
	p.clients, err = framework.BuildNamed(p.cfg.Upstreams, func(n string, u Upstream) (*ServiceClient, error) {
		u.Name = n
		return newClient(u, opts...)
	})
	if err != nil {
		p.stopDiscovery()
		_ = p.pool.Close()
		return err
	}
	if p.cfg.Server.Listen != "" {
		s, err := newServer(app, p.cfg.Server, otel)
		if err != nil {
			p.stopDiscovery()
			_ = p.pool.Close()
			return err
		}
		p.server = s
	}
	p.started = true
	return nil
}

// stopDiscovery ends every client's resolutions (discover = true).
func (p *Plugin) stopDiscovery() {
	for _, c := range p.clients.All() {
		c.stopDiscovery()
	}
}

// Serve implements framework.Server: once the routes (and the services
// registered from them) are in place, the gRPC server listens.
func (p *Plugin) Serve(app *framework.App) error {
	s := p.grpcServer()
	if s == nil {
		return nil
	}
	return s.serve(app)
}

// Shutdown implements framework.Server: GracefulStop (calls in flight
// finish, new ones are refused) within ctx, app.shutdown_timeout, then Stop.
func (p *Plugin) Shutdown(ctx context.Context) error {
	s := p.grpcServer()
	if s == nil {
		return nil
	}
	return s.shutdown(ctx)
}

// grpcServer returns the gRPC server, or nil when listen is empty or
// before Start built it.
func (p *Plugin) grpcServer() *server {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.server
}

// Stop implements framework.Stopper: it closes every channel. It runs after
// the HTTP and gRPC servers drained, so no handler's call is in flight.
func (p *Plugin) Stop(context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.server != nil {
		p.server.stop() // a server that never served (a later start failed)
	}
	for _, c := range p.clients.All() {
		c.closed.Store(true)
		c.stopDiscovery()
		c.endWatch()
	}
	if p.pool != nil {
		return p.pool.Close()
	}
	return nil
}

// Client returns the client of a configured upstream.
func (p *Plugin) Client(upstream string) (*ServiceClient, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.clients.Lookup(upstreamsTable, upstream, p.started)
}

// Server returns what services are registered on; see the package function
// [Server].
func (p *Plugin) Server() (grpc.ServiceRegistrar, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.started {
		return nil, fmt.Errorf("grpc: the grpc plugin has not started; register gRPC services when mounting routes")
	}
	if p.server == nil {
		return nil, fmt.Errorf(`grpc: [plugin.grpc.server] listen is not set: set it (such as "127.0.0.1:9000", or JFAST_GRPC_SERVER__LISTEN) to serve gRPC`)
	}
	return p.server.registrar(), nil
}

// Addr returns the address the gRPC server listens on ("127.0.0.1:9000",
// with the port chosen when listen ends in ":0"), or "" when it does not
// serve.
func (p *Plugin) Addr() string {
	s := p.grpcServer()
	if s == nil || !s.serving.Load() {
		return ""
	}
	return s.addr()
}

// Channels returns how many gRPC channels the plugin's pool holds.
func (p *Plugin) Channels() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.pool == nil {
		return 0
	}
	return p.pool.Len()
}

// Check implements framework.Checker. It sends nothing: it lists every
// upstream's breaker and its channel's connectivity state in meta (with
// instances, each instance's), and the server's address. An upstream with
// instances is unreachable only when every instance's breaker is open; an
// ejected instance is named in the detail and the check passes, and so is
// one whose breaker is half-open (not ejected: the next call to it probes
// it). As the http client's: an open breaker reports the
// upstream unreachable, never critical (critical = true is refused: every
// replica sees the same upstream down), a half-open one impaired (the next
// call probes).
func (p *Plugin) Check(context.Context) readiness.Report {
	p.mu.Lock()
	clients, srv := p.clients, p.server
	p.mu.Unlock()
	upstreams := make(map[string]any, clients.Len())
	var suspended, ejected []string
	open := false
	for n, c := range clients.All() {
		if c.multi {
			each, out, halfOpen, skipped := c.instancesMeta()
			m := map[string]any{"instances": each, "in_flight": c.policy.Bulkhead().InFlight()}
			upstreams[n] = m
			if c.found != nil {
				st := c.found.State()
				m["discover"] = st.Discover
				if !st.Resolved.IsZero() {
					m["resolved"] = st.Resolved
				}
				if st.Error != "" {
					m["resolve_error"] = st.Error
				}
			}
			switch {
			case len(each) == 0:
				open = true
				suspended = append(suspended, "'"+n+"' has no instance: "+c.noInstance().Error())
			case len(out) == len(each):
				open = true
				suspended = append(suspended, "every instance of '"+n+"' is ejected: "+strings.Join(out, ", "))
			case len(out) > 0:
				ejected = append(ejected, "instances of '"+n+"' ejected: "+strings.Join(out, ", "))
			}
			if len(halfOpen) > 0 {
				ejected = append(ejected, "instances of '"+n+"' half-open, the next call to each probing it: "+strings.Join(halfOpen, ", "))
			}
			if len(skipped) > 0 {
				ejected = append(ejected, "instances of '"+n+"' not connected (not serving, or their connection lost), skipped while another is: "+strings.Join(skipped, ", "))
			}
			continue
		}
		s := c.breaker.Snapshot()
		upstreams[n] = map[string]any{
			"breaker":   s.Meta(),
			"channel":   strings.ToLower(c.State().String()),
			"in_flight": c.policy.Bulkhead().InFlight(),
		}
		open = open || s.State == resilience.StateOpen
		if d := s.Suspension("'" + n + "'"); d != "" {
			suspended = append(suspended, d)
		}
	}
	meta := map[string]any{"upstreams": upstreams}
	if srv != nil {
		meta["server"] = map[string]any{"listen": srv.addr()}
	}
	switch {
	case open:
		return readiness.Unreachable(strings.Join(suspended, "; "), meta)
	case len(suspended) > 0:
		return readiness.Impaired(strings.Join(suspended, "; "), meta)
	}
	if len(ejected) > 0 {
		return readiness.Passed(fmt.Sprintf("%d upstreams, every one available; %s", clients.Len(), strings.Join(ejected, "; ")), meta)
	}
	return readiness.Passed(fmt.Sprintf("%d upstreams, every breaker closed", clients.Len()), meta)
}

var (
	_ framework.ClientPlugin = (*Plugin)(nil)
	_ framework.Dependent    = (*Plugin)(nil)
	_ framework.Server       = (*Plugin)(nil)
	_ framework.Stopper      = (*Plugin)(nil)
)
