package cache

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"runtime"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"golang.org/x/sync/singleflight"

	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/framework/resilience"
	"github.com/jfastframework/jfast/internal/redislog"
	"github.com/jfastframework/jfast/readiness"
)

// pluginName is the plugin's key in [plugins] enabled and its dependency name in
// errors and /ready.
const pluginName = "cache"

// breakerName names the breaker in its errors: "calls to 'redis' are suspended".
const breakerName = "redis"

// Config is the [plugin.cache] table.
type Config struct {
	// URL is where Redis is: redis://[user:password@]host:port[/db] or rediss://
	// for TLS. A master_name query parameter selects Sentinel, addr parameters
	// select Redis Cluster (see docs/cache.md). A query parameter jfast sets
	// itself (dial, read, write and pool timeouts, max_retries,
	// dialer_retries, context_timeout_enabled) is refused unless it has
	// jfast's value. It is a deploy key: JFAST_CACHE_URL wins over the file.
	// Defaults to "redis://127.0.0.1:6379/0".
	URL string `koanf:"url"`

	// CommandTimeout bounds every command end to end: waiting for a pooled
	// connection, dialing, writing and reading. Blocking commands (BLPOP,
	// BLMOVE, XREAD BLOCK, ...) get their own wait plus this on top.
	// Defaults to 1s.
	CommandTimeout time.Duration `koanf:"command_timeout"`

	// PoolSize is the most connections the client keeps per Redis node.
	// When neither the file nor the environment sets it, a pool_size query
	// parameter of url is in force; both set and different is refused at
	// boot. Defaults to 10 per CPU (runtime.GOMAXPROCS), go-redis's own
	// default.
	PoolSize int `koanf:"pool_size"`

	// KeyPrefix is put in front of every key the cache API, the rate limiter
	// and the token store use, so services can share a Redis. Defaults to
	// app.name + ":".
	KeyPrefix string `koanf:"key_prefix"`

	// BreakerConfig is the breaker_* keys of the breaker every command
	// goes through.
	resilience.BreakerConfig `koanf:",squash"`
}

// DefaultURL is the url used when none is configured: a local Redis, database 0.
const DefaultURL = "redis://127.0.0.1:6379/0"

// DefaultCommandTimeout is command_timeout's default (docs/design.md, "Per-dependency defaults"): Redis
// answers in well under a millisecond, and the rate limiter and the token store
// sit in front of every request, so this is also what the first requests of an
// outage wait, per command.
const DefaultCommandTimeout = time.Second

// Plugin is the cache plugin: one shared go-redis client behind a breaker and
// per-command deadlines, with the cache API, a rate limiter and a token store
// built on it. Make it with [New]; handlers get it with [From].
type Plugin struct {
	cfg    Config
	prefix string

	client  redis.UniversalClient
	breaker *resilience.Breaker
	hook    *hook
	log     *slog.Logger
	flight  singleflight.Group
	metrics *metrics

	// loggedOpens remembers, per fail-open component, the breaker opening
	// (Opens + 1) already logged, so an outage logs once per opening.
	loggedOpens [numComponents]atomic.Uint64
}

// New returns the cache plugin with its defaults.
func New() *Plugin {
	return &Plugin{cfg: defaultConfig()}
}

func defaultConfig() Config {
	return Config{
		URL:            DefaultURL,
		CommandTimeout: DefaultCommandTimeout,
		PoolSize:       10 * runtime.GOMAXPROCS(0),
		BreakerConfig:  resilience.DefaultBreakerConfig(),
	}
}

// From returns the cache plugin of app, or an error naming the fix when it is not
// enabled. Call it at boot, in Routes.
func From(app *framework.App) (*Plugin, error) {
	return framework.Get[*Plugin](app, pluginName)
}

// Name implements framework.Plugin.
func (p *Plugin) Name() string { return pluginName }

// Config implements framework.Configurable.
func (p *Plugin) Config() any {
	p.cfg = defaultConfig()
	return &p.cfg
}

// DeployKeys implements framework.DeployKeyer: the URL (with its credentials)
// depends on where the service runs.
func (p *Plugin) DeployKeys() []string { return []string{"url"} }

// Validate implements framework.Validator.
func (p *Plugin) Validate(v *framework.Validation) {
	if _, err := parseURL(p.cfg.URL); err != nil {
		v.Error("url", err.Error(), `set url = "redis://host:6379/0" (or rediss:// for TLS), or JFAST_CACHE_URL`)
	}
	v.Deadline("command_timeout", p.cfg.CommandTimeout)
	v.Positive("pool_size", p.cfg.PoolSize)
	if n, ok := urlPoolSize(p.cfg.URL); ok {
		v.AgreesWithURL("pool_size", p.cfg.PoolSize, "url", urlPoolParam, n)
	}
	if p.cfg.CommandTimeout > 0 {
		for _, o := range urlOverrides(p.cfg) {
			fix := fmt.Sprintf("remove %s from %s (or from %s)", o.param, v.Key("url"), urlEnv)
			if o.timeout {
				fix += "; to give commands longer, set " + v.Key("command_timeout")
			}
			v.Error("url", fmt.Sprintf("sets %s=%s, but jfast sets %s to %s: the url's value cannot be in force", o.param, o.value, o.param, o.jfast), fix)
		}
	}
	p.cfg.BreakerConfig.Validate(v)
}

// urlEnv is the variable that sets url (a deploy key).
const urlEnv = "JFAST_CACHE_URL"

// ResolveDefaults implements framework.Resolver: key_prefix defaults to
// app.name + ":", and a pool_size query parameter of url is pool_size when the
// file and the environment leave the key unset.
func (p *Plugin) ResolveDefaults(r *framework.Resolution) {
	if n, ok := urlPoolSize(p.cfg.URL); ok && !r.IsSet("pool_size") {
		p.cfg.PoolSize = n
		r.FromURL("pool_size", "url", urlPoolParam)
	}
	if !r.IsSet("key_prefix") {
		p.cfg.KeyPrefix = r.App().Name + ":"
		r.Computed("key_prefix", `default: app.name + ":"`)
	}
}

// Start implements framework.Starter. It builds the client without connecting:
// Redis being down does not fail the boot; commands fail (fast, once the breaker
// opens) until it is back.
func (p *Plugin) Start(_ context.Context, app *framework.App) error {
	p.prefix = p.cfg.KeyPrefix
	p.log = app.Logger().With(slog.String("plugin", pluginName))
	// go-redis's own lines (pool and pub/sub messages) go through the
	// service's logger; channels and the queue's redis backend share this
	// plugin's client.
	redislog.Use(p.log)
	// The breaker is in the outbound-policy families every plugin that
	// calls out shares, as dependency "redis" (its name in its errors and
	// the status page's card). Its series is made here, so the state reads
	// 0 (closed) before the breaker first changes.
	clientMetrics := framework.NewClientMetrics()
	if err := clientMetrics.Register(app.Metrics()); err != nil {
		return fmt.Errorf("cache: register metrics: %w", err)
	}
	dep := clientMetrics.BreakerFor(pluginName, breakerName)
	p.breaker = resilience.NewBreaker(p.cfg.BreakerConfig.Opts(breakerName, app.Clock(),
		resilience.LogStateChanges(p.log, pluginName, p.cfg.BreakerCoolDown, dep.Transition)))
	dep.Follow(p.breaker)
	client, err := newClient(p.cfg)
	if err != nil {
		return fmt.Errorf("cache: %w", err) // already refused by Validate; kept for safety
	}
	addTraceHook(app, client)
	p.client = client
	p.metrics = newMetrics(p)
	p.hook = &hook{timeout: p.cfg.CommandTimeout, breaker: p.breaker, metrics: &p.metrics.commands}
	client.AddHook(p.hook)
	if err := p.metrics.register(app.Metrics()); err != nil {
		_ = client.Close()
		return fmt.Errorf("cache: register metrics: %w", err)
	}
	return nil
}

// Stop implements framework.Stopper: it closes the pool.
func (p *Plugin) Stop(context.Context) error {
	if p.client == nil {
		return nil
	}
	if err := p.client.Close(); err != nil && !errors.Is(err, redis.ErrClosed) {
		return fmt.Errorf("cache: close redis client: %w", err)
	}
	return nil
}

// Client returns the shared go-redis client, for plugins and handlers that need
// raw Redis (the queue, idempotency). Every command on it goes through the
// plugin's breaker and deadlines; keys are not prefixed (use [Plugin.Key]).
func (p *Plugin) Client() redis.UniversalClient { return p.client }

// KeyPrefix returns key_prefix.
func (p *Plugin) KeyPrefix() string { return p.prefix }

// Key returns key with key_prefix in front, as the cache API stores it.
func (p *Plugin) Key(key string) string { return p.prefix + key }

// Breaker returns the breaker every Redis command goes through.
func (p *Plugin) Breaker() *resilience.Breaker { return p.breaker }

// CommandTimeout returns command_timeout, for plugins that read Redis through
// [Plugin.Client] outside the command hook (pub/sub) and bound those reads
// themselves.
func (p *Plugin) CommandTimeout() time.Duration { return p.cfg.CommandTimeout }

// Check implements framework.Checker: a PING bounded by the readiness context
// and command_timeout, with the breaker state and pool stats in meta.
//
// The PING goes through the breaker, so an open one answers at once, and a
// half-open one takes it as its probe. When the probe is another call's (a
// request's command, another plugin's check on this client), the PING goes to
// Redis outside the breaker: the check must say whether Redis answers, not
// that something else asked first, and one PING per poll is no load on a
// Redis that is coming back. Its answer is the check's alone; the probe's
// decides the breaker.
func (p *Plugin) Check(ctx context.Context) readiness.Report {
	err := p.client.Ping(ctx).Err()
	if resilience.ProbeTaken(err) {
		err = p.hook.outside(ctx, func(ctx context.Context) error { return p.client.Ping(ctx).Err() })
	}
	meta := p.readyMeta()
	if err == nil {
		return readiness.Passed("redis answered PING", meta)
	}
	var ue *UnavailableError
	if errors.As(err, &ue) && errors.Is(ue.Err, resilience.ErrOpen) {
		return readiness.Unreachable(ue.Error(), meta) // opened by failures to reach redis
	}
	if ctx.Err() != nil {
		return readiness.Unreachable("redis unreachable: no answer to PING within the readiness timeout", meta)
	}
	return readiness.Unreachable(errorDetail(err), meta)
}

// errorDetail is err's text with "redis unreachable" in front when it is not
// there already.
func errorDetail(err error) string {
	var ue *UnavailableError
	if errors.As(err, &ue) {
		return ue.Error()
	}
	return "redis unreachable: " + err.Error()
}

func (p *Plugin) readyMeta() map[string]any {
	s := p.breaker.Snapshot()
	ps := p.client.PoolStats()
	return map[string]any{
		"breaker": s.Meta(),
		"pool": map[string]any{
			"total":    ps.TotalConns,
			"idle":     ps.IdleConns,
			"hits":     ps.Hits,
			"misses":   ps.Misses,
			"timeouts": ps.Timeouts,
		},
	}
}

// parseURL checks the url and returns it parsed. Its errors never contain the
// password.
func parseURL(raw string) (*url.URL, error) {
	if raw == "" {
		return nil, errors.New("must not be empty")
	}
	u, err := url.Parse(raw)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // url.Error repeats the whole URL, password included
		}
		return nil, fmt.Errorf("is not a valid URL: %v", err)
	}
	if u.Scheme != "redis" && u.Scheme != "rediss" {
		return nil, fmt.Errorf("must be a redis:// or rediss:// URL, got scheme %q", u.Scheme)
	}
	if u.Host == "" {
		return nil, errors.New("must name a host, as in redis://host:6379/0")
	}
	if _, _, err := buildOptions(raw, u, defaultConfig()); err != nil {
		return nil, err
	}
	if s := u.Query().Get(urlPoolParam); s != "" {
		if n, err := strconv.Atoi(s); err != nil || n < 1 {
			// go-redis reads 0 (and less) as its own default: never what
			// a URL that names a size means.
			return nil, fmt.Errorf("has %s=%s: must be a whole number of at least 1", urlPoolParam, s)
		}
	}
	return u, nil
}

var (
	_ framework.BackingServicePlugin = (*Plugin)(nil)
	_ framework.Checker              = (*Plugin)(nil)
	_ framework.RevocationProvider   = (*Plugin)(nil)
)

// urlPoolParam is the url's query parameter go-redis reads as the pool size.
const urlPoolParam = "pool_size"

// urlPoolSize returns the pool_size query parameter of raw, and whether it
// has one that is a size (parseURL reports one that is not).
func urlPoolSize(raw string) (int, bool) {
	u, err := url.Parse(raw)
	if err != nil {
		return 0, false
	}
	n, err := strconv.Atoi(u.Query().Get(urlPoolParam))
	if err != nil || n < 1 {
		return 0, false
	}
	return n, true
}
