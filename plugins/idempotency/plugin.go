package idempotency

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/framework/resilience"
	"github.com/jfastframework/jfast/readiness"
)

const pluginName = "idempotency"

// Plugin is the idempotency plugin. Make it with New; in Routes, take it with
// From and wrap the routes it guards with Plugin.Middleware.
type Plugin struct {
	cfg Config

	app     *framework.App
	clock   resilience.Clock
	log     *slog.Logger
	store   store
	dep     string // the plugin behind the store: "db" or "cache"
	allowed []string
	metrics *metrics
	// settling makes a repeat wait for its first request's store write.
	settling settling

	// Background sweeps of the postgres store.
	base      context.Context
	cancel    context.CancelFunc
	sweeps    sync.WaitGroup
	sweeping  atomic.Bool
	lastSweep atomic.Int64  // App-clock UnixNano of the last sweep started
	releasing chan struct{} // bounds the background releases of failed claims
}

// New returns the idempotency plugin with its defaults.
func New() *Plugin {
	return &Plugin{cfg: defaultConfig(), releasing: make(chan struct{}, maxBackgroundReleases)}
}

// From returns the enabled idempotency plugin, or an error naming the fix.
func From(app *framework.App) (*Plugin, error) {
	return framework.Get[*Plugin](app, pluginName)
}

// Name implements framework.Plugin.
func (p *Plugin) Name() string { return pluginName }

// Config implements framework.Configurable.
func (p *Plugin) Config() any { return &p.cfg }

// Dependencies implements framework.Dependent: both stores' plugins are
// optional, for ordering; Validate refuses a store whose plugin is not
// enabled.
func (p *Plugin) Dependencies() []framework.Dependency {
	return []framework.Dependency{{Name: "db", Optional: true}, {Name: "cache", Optional: true}}
}

// Start implements framework.Starter. It finds the store's plugin and, for
// PostgreSQL, tries to create the table within store_timeout; a database that
// is down does not fail the start (the table is created on first use).
func (p *Plugin) Start(ctx context.Context, app *framework.App) error {
	p.app = app
	p.clock = app.Clock()
	p.log = app.Logger().With(slog.String("plugin", pluginName))
	p.allowed = p.cfg.allowed()
	switch p.cfg.Store {
	case StorePostgres:
		p.dep = "db"
		pp, err := framework.Get[framework.DBPool](app, "db")
		if err != nil {
			return fmt.Errorf(`idempotency: store "postgres" needs the db plugin (db.New() in the service's plugins, with [plugin.db] url), or set [plugin.idempotency] store = "redis": %w`, err)
		}
		if pp.Pool() == nil {
			return errors.New(`idempotency: store "postgres" needs the db plugin's main pool, and it has none: set [plugin.db] url`)
		}
		var ready func(context.Context) readiness.Report
		if c, ok := pp.(framework.Checker); ok {
			ready = c.Check
		}
		p.store = newPostgresStore(pp.Acquire, p.cfg.Table, ready)
	case StoreRedis:
		p.dep = "cache"
		cp, err := framework.Get[framework.Redis](app, "cache")
		if err != nil {
			return fmt.Errorf(`idempotency: store "redis" needs the cache plugin (cache.New() in the service's plugins, with [plugin.cache] url), or set [plugin.idempotency] store = "postgres": %w`, err)
		}
		client := cp.Client()
		if client == nil {
			return errors.New(`idempotency: store "redis" needs the cache plugin's client, and it has none`)
		}
		var ready func(context.Context) readiness.Report
		if c, ok := cp.(framework.Checker); ok {
			ready = c.Check
		}
		p.store = newRedisStore(client, p.cfg.KeyPrefix, p.cfg.TTL, ready)
	default:
		return fmt.Errorf("idempotency: unknown store %q", p.cfg.Store)
	}
	m, err := newMetrics(app.Metrics())
	if err != nil {
		return fmt.Errorf("idempotency: register metrics: %w", err)
	}
	p.metrics = m
	p.base, p.cancel = context.WithCancel(context.WithoutCancel(ctx))
	p.lastSweep.Store(p.clock.Now().UnixNano())

	// The table is made in the background: a start never waits on a
	// dependency, and a database that accepts connections but does not
	// answer would otherwise hold the boot for store_timeout.
	p.sweeps.Add(1)
	go func() {
		defer p.sweeps.Done()
		ectx, cancel := context.WithTimeout(p.base, p.cfg.StoreTimeout)
		defer cancel()
		if err := p.store.ensure(ectx); err != nil && p.base.Err() == nil {
			p.log.LogAttrs(p.base, slog.LevelWarn, "idempotency store not ready at start; the table is created on first use",
				slog.String("store", p.store.name()), slog.String("error", err.Error()))
		}
	}()
	return nil
}

// Stop implements framework.Stopper: it waits for background sweeps and releases.
func (p *Plugin) Stop(ctx context.Context) error {
	if p.cancel == nil {
		return nil
	}
	p.cancel()
	if err := framework.Wait(ctx, &p.sweeps); err != nil {
		return fmt.Errorf("idempotency: stop: waiting for the sweep: %w", err)
	}
	return nil
}

// Check implements framework.Checker: the store answers (and, for PostgreSQL,
// the table exists). It is first the store plugin's own check (the db's, the
// cache's), so both entries report the one server alike.
//
// On PostgreSQL the table's query goes through the db breaker after the db's
// own check passed: when the breaker refuses it only because its half-open
// probe is another call's, the db's verdict stands (the server answered it),
// and the table is created on first use if it is still missing, as after a
// start with the database down.
func (p *Plugin) Check(ctx context.Context) readiness.Report {
	meta := map[string]any{"store": p.store.name(), "dependency": p.dep}
	err := p.store.check(ctx)
	if pg, ok := p.store.(*postgresStore); ok && pg.checkedFirst() && resilience.ProbeTaken(err) {
		err = nil
	}
	if err != nil {
		return readiness.Unreachable(fmt.Sprintf("idempotency store %s unavailable: guarded routes answer 503 (%s)", p.store.name(), scrub(err)), meta)
	}
	return readiness.Passed("idempotency store "+p.store.name()+" answered", meta)
}

// maybeSweep starts a background sweep of expired records when sweep_interval
// has passed on the App clock since the last one, and none is running.
func (p *Plugin) maybeSweep(now time.Time) {
	if p.cfg.Store != StorePostgres {
		return // Redis expires its keys by itself
	}
	last := p.lastSweep.Load()
	if now.UnixNano()-last < int64(p.cfg.SweepInterval) || !p.lastSweep.CompareAndSwap(last, now.UnixNano()) {
		return
	}
	if !p.sweeping.CompareAndSwap(false, true) {
		return
	}
	p.sweeps.Add(1)
	go func() {
		defer p.sweeps.Done()
		defer p.sweeping.Store(false)
		ctx, cancel := context.WithTimeout(p.base, p.cfg.StoreTimeout)
		defer cancel()
		n, err := p.store.sweep(ctx, now)
		if err != nil {
			p.log.LogAttrs(ctx, slog.LevelWarn, "idempotency sweep failed", slog.String("error", scrub(err)))
			return
		}
		if n > 0 {
			p.metrics.swept.Add(float64(n))
		}
	}()
}

// maxBackgroundReleases bounds the releases of failed claims in flight: during
// an outage they would all fail anyway, and the goroutines must not pile up.
const maxBackgroundReleases = 16

// releaseLater releases, in the background, a claim whose answer the store did
// not give in time: the claim may still have reached the store, and would
// then hold the key for a whole lease although the handler never ran. When
// the store is down this fails too, and the key stays held for its lease.
func (p *Plugin) releaseLater(c claim) {
	select {
	case p.releasing <- struct{}{}:
	default:
		return
	}
	p.sweeps.Add(1)
	go func() {
		defer p.sweeps.Done()
		defer func() { <-p.releasing }()
		ctx, cancel := context.WithTimeout(p.base, p.cfg.StoreTimeout)
		defer cancel()
		_ = p.store.release(ctx, c.Key, c.Token)
	}()
}

var (
	_ framework.LayeredPlugin = (*Plugin)(nil)
	_ framework.Resolver      = (*Plugin)(nil)
)
