package db

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/framework/resilience"
)

// Option configures the plugin in main, for what is code rather than
// configuration.
type Option func(*Plugin)

// WithMigrations gives the plugin its SQL migrations: files named
// 001_create_orders.sql, 002_... at the root of fsys, in tern's format (the
// up SQL, then optionally a line "---- create above / drop below ----" and
// the down SQL). With an embed.FS holding a migrations directory, pass
// fs.Sub(files, "migrations").
func WithMigrations(fsys fs.FS) Option {
	return func(p *Plugin) { p.migrations = fsys }
}

// Plugin is the db plugin: a PostgreSQL pool (pgx/v5 pgxpool) with a
// bounded ping, a connection breaker, optional per-tenant pools and
// embedded migrations. Get it in Routes with [From], or its pool with [Get].
type Plugin struct {
	cfg        Config
	migrations fs.FS

	log     *slog.Logger
	clock   resilience.Clock
	appName string
	tracer  pgx.QueryTracer      // nil unless a plugin observes dependencies (telemetry)
	held    prometheus.Histogram // jfast_db_acquisition_duration_seconds, of the main pool

	mu      sync.Mutex
	db      *DB
	tenants *tenantPools
	stopped bool
}

// New returns the db plugin with its defaults.
func New(opts ...Option) *Plugin {
	p := &Plugin{cfg: defaultConfig()}
	for _, o := range opts {
		o(p)
	}
	return p
}

// Name implements framework.Plugin.
func (p *Plugin) Name() string { return dependencyName }

// Config implements framework.Configurable.
func (p *Plugin) Config() any {
	p.cfg = defaultConfig()
	return &p.cfg
}

// Validate implements framework.Validator.
func (p *Plugin) Validate(v *framework.Validation) {
	p.cfg.validate(v, p.migrations != nil)
}

// ResolveDefaults implements framework.Resolver: a pool_max_conns in url is
// pool_size when the file and the environment leave pool_size unset (and the
// same for tenant_url_template and tenant_pool_size), so the pool has the size
// the connection string asks for and config says where it came from; the same
// for min_idle, max_conn_lifetime and max_conn_idle (urlSettings).
// application_name left unset is app.name where no connection string names
// the sessions (resolveApplicationName).
func (p *Plugin) ResolveDefaults(r *framework.Resolution) {
	p.cfg.resolveURLSettings(r)
	p.cfg.resolveApplicationName(r)
}

// Lacks implements framework.Provider: with only tenant_url_template there
// are per-tenant pools and no main pool, and the plugins that run on the
// main pool (the queue's postgres backend, the idempotency store, through
// framework.DBPool) are refused with the configuration instead of failing at
// Start. Neither url nor tenant_url_template set is Validate's own error.
func (p *Plugin) Lacks() (problem, fix string) {
	if p.cfg.URL != "" || p.cfg.TenantURLTemplate == "" {
		return "", ""
	}
	return "the db plugin has no main pool ([plugin.db] has only tenant_url_template, no url)", "set [plugin.db] url (or JFAST_DB_URL)"
}

var _ framework.Provider = (*Plugin)(nil)

// DeployKeys implements framework.DeployKeyer: the environment
// (JFAST_DB_URL, JFAST_DB_TENANT_URL_TEMPLATE) wins over the file.
func (p *Plugin) DeployKeys() []string { return []string{"url", "tenant_url_template"} }

// Start implements framework.Starter. It makes the pool without
// connecting: a server that is down does not fail the boot, it shows in
// /ready. With migrate_on_start it migrates up first, and then a server
// that cannot be reached does fail the boot.
func (p *Plugin) Start(ctx context.Context, app *framework.App) error {
	p.log = app.Logger().With(slog.String("plugin", dependencyName))
	p.clock = app.Clock()
	p.appName = app.Config().Name
	p.tracer = newQueryTracer(app)
	if p.cfg.MigrateOnStart {
		r, err := p.migrate(ctx, MigrateUp) // its errors do not say "db: migrate up" yet
		if err != nil {
			return fmt.Errorf("db: migrate_on_start: migrate up: %w", err)
		}
		p.log.Info("db: migrations", slog.Int("applied", len(r.Applied)), slog.Int("version", int(r.Current)))
	}
	if p.cfg.URL != "" {
		// The main pool's breaker is in the outbound-policy families every
		// plugin that calls out shares, as dependency "db" (the name its
		// problems, /ready and status card use). Its series is made here, so
		// the state reads 0 (closed) before the breaker first changes.
		clientMetrics := framework.NewClientMetrics()
		if err := clientMetrics.Register(app.Metrics()); err != nil {
			return err
		}
		dep := clientMetrics.BreakerFor(p.Name(), dependencyName)
		p.held = newHeldHistogram()
		d, err := p.open(p.cfg.URL, p.cfg.PoolSize, int32(p.cfg.MinIdle), "", dep.Transition)
		if err != nil {
			return err
		}
		dep.Follow(d.gate.breaker)
		p.mu.Lock()
		p.db = d
		p.mu.Unlock()
		if err := registerMetrics(app.Metrics(), d, p.held); err != nil {
			d.close()
			return err
		}
	}
	if p.cfg.TenantURLTemplate != "" {
		p.tenants = newTenantPools(p)
	}
	return nil
}

// open makes a lazy pool for dsn with its gate. onChange, when not nil,
// hears its breaker's transitions after they are logged (the main pool's
// metrics; tenant pools are not in the metrics, their number being unbounded
// over time).
func (p *Plugin) open(dsn string, size int, minIdle int32, tenant string, onChange func(resilience.StateChange)) (*DB, error) {
	pc, err := p.poolConfig(dsn, size, minIdle)
	if err != nil {
		return nil, err
	}
	logAttrs := []any{}
	if tenant != "" {
		logAttrs = append(logAttrs, slog.String("tenant", tenant))
	}
	opts := p.cfg.BreakerConfig.Opts(dependencyName, p.clock,
		resilience.LogStateChanges(p.log.With(logAttrs...), dependencyName, p.cfg.BreakerCoolDown, onChange))
	g := newGate(&opts, p.cfg.PingTimeout)
	tracer := heldTracer{inner: p.tracer}
	if tenant == "" && p.held != nil {
		tracer.held = p.held // the main pool times its acquisitions
		g.timed = true
	}
	pc.ConnConfig.Tracer = tracer // clears the slots the watchdog reads
	g.install(pc)
	live := pc.ConnConfig.Config.Copy() // the watchdog's liveness connection
	pool, err := pgxpool.NewWithConfig(context.Background(), pc)
	if err != nil {
		g.close()
		return nil, fmt.Errorf("db: make pool: %s", redactError(err))
	}
	g.startWatching(pool, live)
	return &DB{pool: pool, gate: g, commandTimeout: p.cfg.CommandTimeout}, nil
}

// poolConfig parses dsn and applies the plugin's settings. A negative
// minIdle leaves dsn's pool_min_idle_conns (a tenant pool's: min_idle is the
// main pool's).
func (p *Plugin) poolConfig(dsn string, size int, minIdle int32) (*pgxpool.Config, error) {
	pc, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("db: parse connection string: %s", redactError(err))
	}
	pc.MaxConns = int32(size)
	if minIdle >= 0 {
		pc.MinIdleConns = minIdle
	}
	pc.MaxConnLifetime = p.cfg.MaxConnLifetime
	pc.MaxConnIdleTime = p.cfg.MaxConnIdle
	p.applyConnConfig(pc.ConnConfig.Config.RuntimeParams)
	pc.ConnConfig.ConnectTimeout = p.cfg.ConnectTimeout
	if p.tracer != nil {
		pc.ConnConfig.Tracer = p.tracer
	}
	return pc, nil
}

func (p *Plugin) applyConnConfig(params map[string]string) {
	switch {
	case p.cfg.ApplicationName != "":
		params["application_name"] = p.cfg.ApplicationName
	case params["application_name"] == "" && p.appName != "":
		// The default is app.name, unless the connection string names one.
		params["application_name"] = p.appName
	}
	if p.cfg.SessionTimezone != "" {
		params["timezone"] = p.cfg.SessionTimezone
	}
}

// Stop implements framework.Stopper: it closes the pools. pgxpool waits for
// connections in use to come back, so Stop runs after the server drained;
// what would wait on a server that stopped answering (cancel requests and
// drains of broken connections, connects in progress) ends at once (see
// sockets.go), and a statement in flight on it is cut by the watchdog,
// which watches until the pool has closed (see DB.close).
func (p *Plugin) Stop(ctx context.Context) error {
	p.mu.Lock()
	p.stopped = true
	d := p.db
	p.mu.Unlock()
	done := make(chan struct{})
	go func() {
		defer close(done)
		if p.tenants != nil {
			p.tenants.closeAll()
		}
		if d != nil {
			d.close()
		}
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("db: close pools: connections still in use: %w", ctx.Err())
	}
}

// DB returns the main pool, or an error when url is not set.
func (p *Plugin) DB() (*DB, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.db == nil {
		if p.cfg.URL == "" {
			return nil, errors.New(`db: url is not set, only tenant_url_template: use db.Tenants, or set [plugin.db] url`)
		}
		return nil, errors.New("db: the plugin has not started")
	}
	return p.db, nil
}

// Acquire takes a connection from the main pool through the plugin's
// connection breaker and bounded ping (see [DB.Acquire]). Plugins that may not
// import this one (the queue's postgres backend, idempotency) reach it as a
// framework.DBPool, with framework.Get[framework.DBPool](app, "db").
func (p *Plugin) Acquire(ctx context.Context) (*pgxpool.Conn, error) {
	d, err := p.DB()
	if err != nil {
		return nil, err
	}
	c, _, err := d.acquire(ctx)
	return c, err
}

// Pool returns the main pool's *pgxpool.Pool (nil before Start or without
// url), for plugins and libraries that need the pool itself; see [DB.Pool].
func (p *Plugin) Pool() *pgxpool.Pool {
	d, err := p.DB()
	if err != nil {
		return nil
	}
	return d.pool
}

// From returns the db plugin of app, or an error when it is not enabled.
// Call it in Routes, at boot.
func From(app *framework.App) (*Plugin, error) {
	return framework.Get[*Plugin](app, dependencyName)
}

// Get returns the main pool of app's db plugin. Call it in Routes, at boot:
// an error (plugin not enabled, no url) fails the boot.
func Get(app *framework.App) (*DB, error) {
	return framework.GetVia(app, dependencyName, (*Plugin).DB)
}

var (
	_ framework.BackingServicePlugin = (*Plugin)(nil)
	_ framework.Checker              = (*Plugin)(nil)
	_ framework.Migrator             = (*Plugin)(nil)
	_ framework.DBPool               = (*Plugin)(nil)
)
