package framework

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/jfastframework/jfast/framework/resilience"
	"github.com/jfastframework/jfast/framework/statuspage"
	"github.com/jfastframework/jfast/readiness"
)

// Options are what a service's main compiles in. Plugins lists every plugin the
// binary carries; [plugins] enabled chooses which of them run.
type Options struct {
	// Plugins compiled into the service. The observability plugin is always
	// compiled in; it runs when enabled (it is by default).
	Plugins []Plugin

	// Routes mounts the service's routes. It runs once at boot, after the plugins
	// have started, and gets the App so handlers can take the clients they need
	// (asking for something not configured returns an error, which fails the boot).
	Routes func(app *App, r chi.Router) error

	// AdminRoutes mounts the service's routes for operators (pprof, a debug
	// page): on app.admin_listen when it is set, else on the public listener
	// beside Routes. It runs at boot, before Routes. Optional.
	AdminRoutes func(app *App, r chi.Router) error

	// ConfigFile is the configuration file. Empty means $JFAST_CONFIG, and without
	// it "jfast.toml" in the working directory when that file exists; no file at
	// all is allowed (defaults plus the environment).
	ConfigFile string

	// ConfigText, when not empty, is the TOML text used instead of any file
	// (tests and tools).
	ConfigText string

	// Environ is the environment to read JFAST_* variables from. Defaults to
	// os.Environ().
	Environ []string

	// LogOutput receives the logs. Defaults to os.Stderr.
	LogOutput io.Writer

	// StandIn says the plugins were built without the service's own options
	// (migrations, services registered in code): the jfast binary checking a
	// file for a service it is not. A rule that depends on what the service's
	// main compiled in then cannot be decided: it is listed by [App.Undecided]
	// instead of failing New (see [Validation.CompiledInError]).
	StandIn bool

	// Clock is the clock every breaker, budget, bulkhead and backoff of the
	// plugins uses. Defaults to the real clock; tests pass a resilience.TestClock.
	Clock resilience.Clock
}

// App is a jfast service: its configuration, its plugins, and its HTTP server.
// Build it with New, then Run it (or Start and Stop it).
type App struct {
	opts       Options
	configFile string
	cfg        AppConfig
	raw        *rawConfig
	compiled   map[string]Plugin
	plugins    []Plugin // enabled, in start order
	critical   map[string]bool
	enabled    []string       // [plugins] enabled as written
	tables     map[string]any // plugin name → its bound (and resolved) configuration
	computed   map[string]string
	undecided  ConfigErrors // rules a stand-in cannot decide (Options.StandIn)
	log        *slog.Logger
	logSources atomic.Pointer[[]LogSource]
	registry   *prometheus.Registry
	resil      *resilience.Registry
	status     *statuspage.Handler    // /status, when the admin listener serves it
	starting   atomic.Pointer[string] // the plugin whose Start is running

	inflight inflight // the requests being served
	limiter  *Limiter // the front door's ([app.overload]), nil when disabled

	mu       sync.Mutex
	started  []Plugin
	servers  []Server // serving, in start order
	ready    atomic.Pointer[readiness.Aggregator]
	router   http.Handler
	server   *http.Server
	listener net.Listener
	served   chan error
	stopped  bool

	// The admin listener's, when app.admin_listen is set.
	adminRouter   http.Handler
	adminServer   *http.Server
	adminListener net.Listener
	adminServed   chan error

	// draining is closed when Stop begins, before the server drains.
	draining chan struct{}
	// cancelRequests cancels every request's context (a shutdown cutting them).
	cancelRequests context.CancelCauseFunc
}

// New loads and validates the configuration. It does no I/O beyond reading the
// file: a configuration error is returned as ConfigErrors, listing every problem.
func New(opts Options) (*App, error) {
	a := &App{opts: opts, compiled: map[string]Plugin{}, critical: map[string]bool{}, tables: map[string]any{}, computed: map[string]string{}, cfg: DefaultAppConfig(), draining: make(chan struct{}), resil: resilience.NewRegistry(opts.Clock)}
	compiled := slices.Clone(opts.Plugins)
	hasObservability := false
	for _, p := range compiled {
		if p.Name() == observabilityName {
			hasObservability = true
		}
	}
	if !hasObservability {
		compiled = append(compiled, &Observability{})
	}
	for _, p := range compiled {
		if _, dup := a.compiled[p.Name()]; dup {
			return nil, fmt.Errorf("framework: plugin %q is compiled in twice", p.Name())
		}
		a.compiled[p.Name()] = p
	}

	environ := opts.Environ
	if environ == nil {
		environ = os.Environ()
	}
	text := []byte(opts.ConfigText)
	a.configFile = "config"
	if len(text) == 0 {
		path, explicit := opts.ConfigFile, opts.ConfigFile != ""
		if !explicit {
			if p := lookupEnv(environ, "JFAST_CONFIG"); p != "" {
				path, explicit = p, true
			} else {
				path = "jfast.toml"
			}
		}
		var err error
		if text, err = readConfigFile(path, explicit); err != nil {
			return nil, err
		}
		a.configFile = path
	}

	a.raw = loadRaw(a.configFile, text, environ, a.isDeploy, a.holdsSecret)
	errs := a.raw.errs
	a.bind(&errs)
	if len(opts.ConfigText) == 0 && len(errs) > 0 {
		a.raw.locate(a.configFile, text, errs)
	}

	out := opts.LogOutput
	if out == nil {
		out = os.Stderr
	}
	a.log = newLogger(a.cfg, out, &a.logSources)
	// Warnings come first, and also when the configuration is invalid: an
	// ignored variable often explains the error that follows.
	for _, w := range a.raw.warnings {
		a.log.Warn("configuration: " + w)
	}
	if len(errs) > 0 {
		return nil, errs
	}
	a.registry = prometheus.NewRegistry()
	if a.cfg.Overload.Enabled {
		a.limiter = NewLimiter(a.cfg.Overload, opts.Clock)
		if sw := newSchedWait(); sw != nil {
			a.limiter.cpuWait = sw.p99
		}
		if q := newRunQueue(); q != nil {
			a.limiter.cpuBusy = q.busy
		}
		a.registry.MustRegister(newLimiterCollector(a.limiter))
	}
	return a, nil
}

func lookupEnv(environ []string, name string) string {
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok && k == name {
			return v
		}
	}
	return ""
}

// Start starts the plugins in order, mounts the routes and starts listening. A
// failed start stops what had started, in reverse. Start returns once the server
// accepts connections.
func (a *App) Start(ctx context.Context) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.server != nil {
		return errors.New("framework: app already started")
	}
	for _, p := range a.plugins {
		s, ok := p.(Starter)
		if !ok {
			a.started = append(a.started, p)
			continue
		}
		pctx, cancel := context.WithTimeout(ctx, a.cfg.StartTimeout)
		name := p.Name()
		a.starting.Store(&name)
		err := s.Start(pctx, a)
		a.starting.Store(nil)
		cancel()
		if err != nil {
			a.stopPlugins(context.Background())
			return fmt.Errorf("start plugin %s: %w", p.Name(), err)
		}
		a.started = append(a.started, p)
	}
	router, err := a.buildRouter()
	if err != nil {
		a.stopPlugins(context.Background())
		return err
	}
	a.router = router
	for _, p := range a.plugins {
		s, ok := p.(Server)
		if !ok {
			continue
		}
		if err := s.Serve(a); err != nil {
			a.shutdownServers(context.Background())
			a.stopPlugins(context.Background())
			return fmt.Errorf("serve plugin %s: %w", p.Name(), err)
		}
		a.servers = append(a.servers, s)
	}
	var admin http.Handler
	if a.adminListening() {
		if admin, err = a.buildAdminRouter(); err != nil {
			a.shutdownServers(context.Background())
			a.stopPlugins(context.Background())
			return err
		}
	}
	// A listen error is made while every listener still listens, so it
	// can name this process when one of them holds the port.
	ln, err := net.Listen("tcp", a.cfg.Listen)
	if err != nil {
		err = ListenError("app.listen", "JFAST_APP_LISTEN", a.cfg.Listen, err)
		a.shutdownServers(context.Background())
		a.stopPlugins(context.Background())
		return err
	}
	var adminLn net.Listener
	if admin != nil {
		if adminLn, err = net.Listen("tcp", a.cfg.AdminListen); err != nil {
			err = ListenError("app.admin_listen", "JFAST_APP_ADMIN_LISTEN", a.cfg.AdminListen, err)
			ln.Close()
			a.shutdownServers(context.Background())
			a.stopPlugins(context.Background())
			return err
		}
	}
	a.listener, a.adminListener, a.adminRouter = ln, adminLn, admin
	base, cancelRequests := context.WithCancelCause(context.Background())
	a.cancelRequests = cancelRequests
	a.server, a.served = a.serve(ln, router, base)
	if adminLn != nil {
		a.adminServer, a.adminServed = a.serve(adminLn, admin, base)
	}
	names := make([]string, len(a.plugins))
	for i, p := range a.plugins {
		names[i] = p.Name()
	}
	attrs := []any{slog.String("addr", ln.Addr().String()), slog.Any("plugins", names), slog.String("env", a.cfg.Env)}
	if adminLn != nil {
		attrs = append(attrs, slog.String("admin_addr", adminLn.Addr().String()))
	}
	a.log.Info("listening", attrs...)
	if adminLn != nil {
		a.warnAdminExposure(a.cfg.AdminListen)
	}
	return nil
}

// serve serves h on ln until the server is shut down; the channel gets
// Serve's error (nil after a shutdown). Every request's context descends from
// base, which a shutdown cancels for the requests it cuts.
func (a *App) serve(ln net.Listener, h http.Handler, base context.Context) (*http.Server, chan error) {
	srv := &http.Server{
		// A request framed two ways is refused (framing.go).
		Handler:           refuseAmbiguousFraming(h),
		ReadHeaderTimeout: a.cfg.ReadHeaderTimeout,
		IdleTimeout:       a.cfg.IdleTimeout,
		ErrorLog:          slog.NewLogLogger(a.log.Handler(), slog.LevelWarn),
		BaseContext:       func(net.Listener) context.Context { return base },
		ConnContext:       framingContext,
		// "OPTIONS *" reaches the handler too, to be counted (framing.go).
		DisableGeneralOptionsHandler: true,
	}
	served := make(chan error, 1)
	go func() {
		err := srv.Serve(framingListener{ln})
		if errors.Is(err, http.ErrServerClosed) {
			err = nil
		}
		served <- err
	}()
	return srv, served
}

// buildRouter returns the service's handler: the framework's middleware
// (serveRequest) around a chi router holding the plugins' middleware and every
// route.
func (a *App) buildRouter() (http.Handler, error) {
	r := chi.NewRouter()
	for _, p := range a.plugins {
		if m, ok := p.(Middlewarer); ok {
			r.Use(m.Middleware())
		}
	}
	setProblemHandlers(r)

	ready := readiness.NewAggregator(a.cfg.ReadinessTimeout)
	ready.SetLogger(a.log)
	for _, p := range a.plugins {
		if c, ok := p.(Checker); ok {
			ready.Add(readiness.Check{Name: p.Name(), Critical: a.critical[p.Name()], Run: c.Check})
		}
	}
	a.ready.Store(ready)
	r.Method(http.MethodGet, "/live", readiness.LiveHandler())
	r.Method(http.MethodGet, "/ready", a.readyHandler(ready))
	for _, p := range a.plugins {
		if m, ok := p.(RouteMounter); ok {
			m.MountRoutes(r)
		}
	}
	exempt := []string{"/live", "/ready"}
	if !a.adminListening() {
		before := routeSet(r)
		if err := a.mountAdmin(r); err != nil {
			return nil, err
		}
		for route := range routeSet(r) {
			if !before[route] {
				exempt = append(exempt, route)
			}
		}
	}
	if a.opts.Routes != nil {
		if err := a.opts.Routes(a, r); err != nil {
			return nil, fmt.Errorf("mount routes: %w", err)
		}
	}
	s := a.serveRequest(r)
	if a.limiter != nil {
		front, err := newFrontDoor(a.limiter, r, a.cfg.Overload, exempt, a.log)
		if err != nil {
			return nil, err
		}
		s.front = front
	}
	return s, nil
}

// routeSet is every "METHOD /pattern" r routes.
func routeSet(r *chi.Mux) map[string]bool {
	set := map[string]bool{}
	_ = chi.Walk(r, func(method, route string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
		set[method+" "+route] = true
		return nil
	})
	return set
}

// serveRequest wraps a router in the framework's middleware.
func (a *App) serveRequest(mux *chi.Mux) *serveRequest {
	return &serveRequest{mux: mux, timeout: a.cfg.RequestTimeout, maxBody: a.cfg.MaxBodyBytes, log: a.log, sources: &a.logSources, inflight: &a.inflight}
}

var probeMethods = []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete, http.MethodOptions}

// allowedMethods lists the methods routed for path, for the Allow header of a 405.
func allowedMethods(r chi.Router, path string) []string {
	var allow []string
	for _, m := range probeMethods {
		if r.Match(chi.NewRouteContext(), m, path) {
			allow = append(allow, m)
		}
	}
	return allow
}

// errShutdown is the cause of the context of a request a shutdown cut.
var errShutdown = errors.New("the server shut down before the request finished")

// Stop drains the server: it stops accepting, and in-flight requests have
// app.shutdown_timeout to finish. Requests still running then are cut: each is
// logged (method, path, request ID, how long it ran), its context is cancelled
// with the cause errShutdown and its connection closed. Then the plugins stop
// in reverse start order, each Stop with a context of its own bounded by
// app.plugin_stop_timeout, so neither a request that never finishes nor a
// plugin slow to stop leaves the others an expired context. ctx bounds
// everything. Stop is safe to call more than once.
func (a *App) Stop(ctx context.Context) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.stopped {
		return nil
	}
	a.stopped = true
	close(a.draining)
	if d := a.cfg.DrainDelay; d > 0 && a.server != nil {
		// /ready answers 503 from now on (readyHandler), while every route
		// still answers: callers that choose by readiness leave first.
		a.log.Info("draining: /ready answers 503 while callers stop choosing this instance", slog.Duration("drain_delay", d))
		_ = a.Clock().Sleep(ctx, d) // ctx done: go on with the stop
	}
	var errs []error
	// Every Server (gRPC) drains at the same time as the HTTP server, within
	// the same shutdown_timeout.
	drain, cancel := context.WithTimeout(ctx, a.cfg.ShutdownTimeout)
	defer cancel()
	servers := make(chan []error, 1)
	go func() { servers <- a.shutdownServers(drain) }()
	if a.server != nil {
		a.log.Info("shutting down", slog.Duration("drain_timeout", a.cfg.ShutdownTimeout), slog.Duration("plugin_stop_timeout", a.cfg.PluginStopTimeout))
		var adminErr error
		var wg sync.WaitGroup
		if a.adminServer != nil {
			wg.Go(func() { adminErr = a.adminServer.Shutdown(drain) })
		}
		err := a.server.Shutdown(drain)
		wg.Wait()
		if err = cmp.Or(err, adminErr); err != nil {
			errs = append(errs, fmt.Errorf("drain requests: %w", err))
			a.cut()
			_ = a.server.Close()
			if a.adminServer != nil {
				_ = a.adminServer.Close()
			}
		}
		if err := <-a.served; err != nil {
			errs = append(errs, err)
		}
		if a.adminServer != nil {
			if err := <-a.adminServed; err != nil {
				errs = append(errs, fmt.Errorf("admin listener: %w", err))
			}
		}
	}
	errs = append(errs, <-servers...)
	errs = append(errs, a.stopPlugins(ctx)...)
	return errors.Join(errs...)
}

// cut logs the requests still running when the drain ran out of time and
// cancels their contexts.
func (a *App) cut() {
	cut := a.inflight.list(time.Now())
	for _, r := range cut {
		a.log.Warn("shutdown cut a request still running",
			slog.String("method", r.method), slog.String("path", r.path),
			slog.String("request_id", r.id), slog.Duration("running", r.running))
	}
	if len(cut) > 0 {
		a.log.Warn("shutdown cut requests", slog.Int("count", len(cut)), slog.Duration("drain_timeout", a.cfg.ShutdownTimeout))
	}
	a.cancelRequests(errShutdown)
}

// shutdownServers drains every serving plugin at once, within ctx.
func (a *App) shutdownServers(ctx context.Context) []error {
	errs := make([]error, len(a.servers))
	var wg sync.WaitGroup
	for i, s := range a.servers {
		wg.Go(func() {
			if err := s.Shutdown(ctx); err != nil {
				errs[i] = fmt.Errorf("shut down plugin %s: %w", s.Name(), err)
			}
		})
	}
	wg.Wait()
	a.servers = nil
	return slices.DeleteFunc(errs, func(err error) bool { return err == nil })
}

func (a *App) stopPlugins(ctx context.Context) []error {
	if a.status != nil {
		a.status.Close() // no more readings taken on the calls' path
	}
	var errs []error
	for i := len(a.started) - 1; i >= 0; i-- {
		p := a.started[i]
		s, ok := p.(Stopper)
		if !ok {
			continue
		}
		pctx, cancel := context.WithTimeout(ctx, a.cfg.PluginStopTimeout)
		err := s.Stop(pctx)
		cancel()
		if err != nil {
			a.log.Error("stop plugin", slog.String("plugin", p.Name()), slog.String("error", err.Error()))
			errs = append(errs, fmt.Errorf("stop plugin %s: %w", p.Name(), err))
		}
	}
	a.started = nil
	return errs
}

// Run starts the App, serves until ctx is done (Main cancels it on SIGINT and
// SIGTERM), then stops gracefully.
func (a *App) Run(ctx context.Context) error {
	if err := a.Start(ctx); err != nil {
		return err
	}
	var serveErr error
	select {
	case <-ctx.Done():
	case serveErr = <-a.served:
		a.served <- serveErr // Stop reads it again
	}
	return errors.Join(serveErr, a.Stop(context.WithoutCancel(ctx)))
}

// Draining returns a channel that is closed when the App begins to stop, before
// the server waits for in-flight requests. A response that streams for as long
// as the client stays (server-sent events, a long poll) ends when it closes, so
// the drain does not wait out app.shutdown_timeout on it and the client
// reconnects to another replica.
func (a *App) Draining() <-chan struct{} { return a.draining }

// Config returns the validated [app] table.
func (a *App) Config() AppConfig { return a.cfg }

// Logger returns the service's logger; records logged with a request's context
// carry its request ID.
func (a *App) Logger() *slog.Logger { return a.log }

// AddLogSource registers f to add attributes from a context to every log record.
// Plugins call it from Start.
func (a *App) AddLogSource(f LogSource) {
	for {
		old := a.logSources.Load()
		var next []LogSource
		if old != nil {
			next = slices.Clone(*old)
		}
		next = append(next, f)
		if a.logSources.CompareAndSwap(old, &next) {
			return
		}
	}
}

// Clock is the clock plugins build their breakers, budgets and timers on.
//
// Asked during a plugin's Start, it returns a clock that tells the same time
// and also enters every breaker, retry budget and bulkhead built on it in
// [App.Resilience] under the plugin's name: a plugin that builds them on the
// clock it was handed (they all do) shows them on the status page without
// handing them over.
func (a *App) Clock() resilience.Clock {
	if p := a.starting.Load(); p != nil {
		return a.resil.Clock(*p)
	}
	if a.opts.Clock == nil {
		return resilience.RealClock()
	}
	return a.opts.Clock
}

// Resilience is the index of every breaker, retry budget and bulkhead the
// plugins built on [App.Clock] during their Start: what the status page reads.
func (a *App) Resilience() *resilience.Registry { return a.resil }

// Metrics is the registry /metrics serves; plugins register their collectors
// in it. The observability plugin's Go runtime and process collectors are
// kept apart, and /metrics serves them beside it.
func (a *App) Metrics() *prometheus.Registry { return a.registry }

// Enabled reports whether the named plugin runs.
func (a *App) Enabled(name string) bool { return a.Plugin(name) != nil }

// Plugin returns the enabled plugin with that name, or nil.
func (a *App) Plugin(name string) Plugin {
	for _, p := range a.plugins {
		if p.Name() == name {
			return p
		}
	}
	return nil
}

// Plugins returns the enabled plugins in start order.
func (a *App) Plugins() []Plugin { return slices.Clone(a.plugins) }

// ConfigName names the configuration the App read, for messages: the file's path,
// or a phrase when there is no file (text given in Options, or only defaults and
// the environment).
func (a *App) ConfigName() string {
	if a.configFile == "" || (a.configFile == "config" && a.opts.ConfigText != "") {
		return "the configuration"
	}
	if _, err := os.Stat(a.configFile); err != nil {
		return "the configuration (no file: defaults and the environment)"
	}
	return a.configFile
}

// Critical reports whether [plugin.<name>] critical is true.
func (a *App) Critical(name string) bool { return a.critical[name] }

// Get returns the enabled plugin called name as a T (its own type, or one of
// the contracts of contracts.go), or an error that names the fix: the plugin
// to enable, or the contract the enabled one does not offer. Plugin packages
// wrap it in their typed accessors; plugins find each other with it.
func Get[T Plugin](a *App, name string) (T, error) {
	var zero T
	p := a.Plugin(name)
	if p == nil {
		return zero, fmt.Errorf("plugin %q is not enabled; add %q to [plugins] enabled", name, name)
	}
	t, ok := p.(T)
	if !ok {
		return zero, fmt.Errorf("plugin %q is a %T, which is not a %v", name, p, reflect.TypeFor[T]())
	}
	return t, nil
}

// GetVia returns what get, an accessor of the enabled plugin called name
// (a P), returns, or Get's error when there is no such plugin: the plugin
// packages' functions of the App (db.Get, grpc.Server) are this.
func GetVia[P Plugin, T any](a *App, name string, get func(P) (T, error)) (T, error) {
	p, err := Get[P](a, name)
	if err != nil {
		var zero T
		return zero, err
	}
	return get(p)
}

// GetNamed is [GetVia] for an accessor by name (the http plugin's Client of
// an upstream, the storage plugin's Disk): it returns get(p, key).
func GetNamed[P Plugin, T any](a *App, name string, get func(P, string) (T, error), key string) (T, error) {
	return GetVia(a, name, func(p P) (T, error) { return get(p, key) })
}

// Addr is the address the server listens on (useful with port 0).
func (a *App) Addr() string { return a.addrOf(&a.listener) }

// AdminAddr is the address the admin listener listens on (app.admin_listen,
// useful with port 0), or "" without one.
func (a *App) AdminAddr() string { return a.addrOf(&a.adminListener) }

// addrOf is the address of *l, one of a's listeners, read under a.mu; ""
// while it is nil (not listening yet, or no such listener).
func (a *App) addrOf(l *net.Listener) string {
	a.mu.Lock()
	defer a.mu.Unlock()
	if *l == nil {
		return ""
	}
	return (*l).Addr().String()
}

// AdminRouter returns the admin listener's router once started, or nil
// without app.admin_listen (tests drive it without a socket).
func (a *App) AdminRouter() http.Handler {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.adminRouter
}

// Router returns the router once started (tests drive it without a socket).
func (a *App) Router() http.Handler {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.router
}

// Sources tells, for every key the file or the environment set, where it came from
// ("file" or "env JFAST_..."); keys absent from it hold their defaults.
func (a *App) Sources() map[string]string {
	out := map[string]string{}
	for k, src := range a.raw.sources {
		out[k] = src.String()
	}
	return out
}

// Readiness returns the aggregator /ready runs, so a plugin can answer a
// health protocol of its own (gRPC health) from the same checks. It is nil
// until Start has mounted the routes: a [Server] takes it in Serve.
func (a *App) Readiness() *readiness.Aggregator { return a.ready.Load() }

// ReadyTimeout is app.readiness_timeout.
func (a *App) ReadyTimeout() time.Duration { return a.cfg.ReadinessTimeout }

// Undecided returns the rules that could not be decided because the plugins are
// stand-ins ([Options].StandIn): each depends on what the service's main compiled
// in, so only the service's own check can say whether it holds. It is empty in a
// service's own binary, where such a rule is an error like any other.
func (a *App) Undecided() ConfigErrors { return slices.Clone(a.undecided) }
