package idempotency

import (
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"time"

	"github.com/jfastframework/jfast/framework"
)

// The store names accepted by the store key.
const (
	StorePostgres = "postgres"
	StoreRedis    = "redis"
)

// The scopes accepted by the scope key and Opts.Scope: whose keys a key is.
const (
	// ScopeCaller gives every caller (Opts.Subject) a key space of its own:
	// two callers sending the same Idempotency-Key are two operations, and a
	// request whose caller is unknown is refused (500) without running.
	ScopeCaller = "caller"
	// ScopeGlobal shares one key space among all callers, identified or not:
	// for routes anonymous callers may use with keys they cannot guess from
	// each other (see docs/idempotency.md before choosing it).
	ScopeGlobal = "global"
)

// Defaults of the [plugin.idempotency] table. The lease has no constant: it
// defaults to LeaseFactor × app.request_timeout, at least app.request_timeout
// + 2s.
const (
	DefaultTTL             = 24 * time.Hour
	DefaultStoreTimeout    = 5 * time.Second
	DefaultTable           = "jfast_idempotency_keys"
	DefaultMaxRequestBody  = 1 << 20
	DefaultMaxResponseBody = 1 << 20
	DefaultRetryAfter      = time.Second
	DefaultSweepInterval   = time.Minute
	// LeaseFactor times app.request_timeout is the default lease: 2m with the
	// 30s default request_timeout.
	LeaseFactor = 4
)

// writeGrace is how long past its request deadline a request may still write
// its response (framework.WriteGrace; docs/framework.md, "Slow clients"). A
// lease must outlast it too, or a first request whose key was taken over could
// still send its response.
const writeGrace = framework.WriteGrace

// defaultLease is LeaseFactor × request_timeout, but at least request_timeout
// + 2s: under a 333ms request_timeout, the factor alone would not clear the
// write grace, and the second above it keeps a margin for a handler that runs
// late.
func defaultLease(requestTimeout time.Duration) time.Duration {
	return max(LeaseFactor*requestTimeout, requestTimeout+2*writeGrace)
}

// DefaultHeaders are the response headers stored and replayed by default:
// the ones that describe the stored body or the resource it created.
var DefaultHeaders = []string{"Content-Type", "Content-Language", "Content-Location", "Location", "ETag", "Last-Modified"}

// Config is the [plugin.idempotency] table.
type Config struct {
	// Store is where keys and responses are kept: "postgres" (through the db
	// plugin's pool, an insert-on-conflict lock row) or "redis" (through the
	// cache plugin's client, SET NX with a lease). The chosen store's plugin
	// must be enabled. PostgreSQL is the default because a stored response
	// must outlive memory pressure: a Redis configured with an eviction policy
	// can drop a key and let a payment run twice. Defaults to "postgres".
	Store string `koanf:"store"`

	// Scope is whose key an Idempotency-Key is, for every guarded route that
	// does not set Opts.Scope. "caller": each caller (Opts.Subject) has its own
	// keys, so one caller can neither replay nor occupy another's, and a keyed
	// request with no subject is refused with 500 without running (fail
	// closed: the service cannot tell its callers apart). "global": one key
	// space shared by every caller, for anonymous routes whose keys are
	// unguessable; a caller who learns another's key gets its stored response.
	// Defaults to "caller".
	Scope string `koanf:"scope"`

	// TTL is how long a completed response is kept and replayed, counted from
	// the moment it was stored. A retry later than this runs the handler again.
	// Must be longer than lease. Defaults to 24h.
	TTL time.Duration `koanf:"ttl"`

	// Lease is how long a first request holds its key while it runs. A repeat
	// during the lease gets 409; after it, the key is taken over and the
	// handler runs again, so a crashed first request does not hold its key for
	// the whole TTL. It must be longer than app.request_timeout + 1s (the
	// request's write deadline): the request deadline stops a handler that
	// watches its context, but a handler that ignores it, a GC pause or a slow
	// store write can run past it, and a lease that ends while the first
	// request still runs, or can still write its response, lets a second one
	// start. Defaults to 4 × app.request_timeout (2m with the 30s default), at
	// least app.request_timeout + 2s.
	Lease time.Duration `koanf:"lease"`

	// StoreTimeout bounds every call to the store (take the key, store the
	// response, release the key, sweep). A store that does not answer in time
	// makes a guarded route answer 503 without running the handler. Five
	// seconds covers opening a new TLS connection on a busy server and still
	// answers well within the 30s request_timeout. Keep it above the store
	// plugin's own deadlines (the cache's command_timeout, the db's
	// ping_timeout): a call this deadline cuts first is not counted by the
	// store's breaker, which then never opens. Defaults to 5s.
	StoreTimeout time.Duration `koanf:"store_timeout"`

	// Table is the PostgreSQL table of the postgres store, optionally
	// schema-qualified ("payments.idempotency_keys"); each part is an
	// identifier of lowercase letters, digits and _ of at most 48 characters.
	// It is created at start when missing (and on first use when the
	// database was down at start). Defaults to "jfast_idempotency_keys".
	Table string `koanf:"table"`

	// KeyPrefix is put in front of every Redis key of the redis store.
	// Defaults to app.name + ":idempotency:".
	KeyPrefix string `koanf:"key_prefix"`

	// MaxRequestBody is the largest request body, in bytes, a guarded route
	// accepts with an Idempotency-Key: the body is read before the handler
	// runs, to hash it into the fingerprint. A larger body gets 413.
	// Defaults to 1048576 (1 MiB).
	MaxRequestBody int `koanf:"max_request_body"`

	// MaxResponseBody is the largest response body, in bytes, that is stored.
	// A larger response still reaches the first client, but the key is then
	// recorded as "done, response not kept": repeats get 409 and the handler
	// never runs again for that key. Defaults to 1048576 (1 MiB).
	MaxResponseBody int `koanf:"max_response_body"`

	// Headers are the response headers stored with the response and replayed
	// (canonical names, matched case-insensitively). Others (Set-Cookie,
	// X-Request-ID, Date) are not replayed. Defaults to ["Content-Type",
	// "Content-Language", "Content-Location", "Location", "ETag",
	// "Last-Modified"].
	Headers []string `koanf:"headers"`

	// RetryAfter is the Retry-After of the 409 a repeat gets while the first
	// request still runs: most first requests finish within a second, and the
	// retry then gets the stored response. Defaults to 1s.
	RetryAfter time.Duration `koanf:"retry_after"`

	// SweepInterval is how often the postgres store deletes expired rows
	// (at most 1000 per sweep, in the background, per process). Redis expires
	// its keys by itself. Defaults to 1m.
	SweepInterval time.Duration `koanf:"sweep_interval"`
}

func defaultConfig() Config {
	return Config{
		Store:           StorePostgres,
		Scope:           ScopeCaller,
		TTL:             DefaultTTL,
		StoreTimeout:    DefaultStoreTimeout,
		Table:           DefaultTable,
		MaxRequestBody:  DefaultMaxRequestBody,
		MaxResponseBody: DefaultMaxResponseBody,
		Headers:         append([]string(nil), DefaultHeaders...),
		RetryAfter:      DefaultRetryAfter,
		SweepInterval:   DefaultSweepInterval,
	}
}

func validScope(s string) bool { return s == ScopeCaller || s == ScopeGlobal }

var identPart = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,47}$`)

// validTable reports whether t is an identifier or schema.identifier that can be
// put in SQL unquoted.
func validTable(t string) bool {
	parts := strings.Split(t, ".")
	if len(parts) > 2 {
		return false
	}
	for _, p := range parts {
		if !identPart.MatchString(p) {
			return false
		}
	}
	return true
}

// defaultTTL is DefaultTTL, or twice lease when DefaultTTL is not longer
// than it.
func defaultTTL(lease time.Duration) time.Duration {
	if DefaultTTL > lease {
		return DefaultTTL
	}
	return 2 * lease
}

// ResolveDefaults implements framework.Resolver: lease defaults to
// LeaseFactor × app.request_timeout (at least app.request_timeout + 2s), ttl
// to 2 × lease when 24h is not longer than it, and key_prefix to app.name +
// ":idempotency:".
func (p *Plugin) ResolveDefaults(r *framework.Resolution) {
	c := &p.cfg
	if !r.IsSet("lease") && c.Lease == 0 {
		rt := r.App().RequestTimeout
		c.Lease = defaultLease(rt)
		if c.Lease == LeaseFactor*rt {
			r.Computed("lease", fmt.Sprintf("default: %d × app.request_timeout", LeaseFactor))
		} else {
			r.Computed("lease", "default: app.request_timeout + 2s")
		}
	}
	if !r.IsSet("ttl") && c.TTL > 0 && c.TTL <= c.Lease {
		// A lease of a day or more (app.request_timeout of 6h or more):
		// the default ttl must still outlast it.
		c.TTL = defaultTTL(c.Lease)
		r.Computed("ttl", "default: 2 × lease, as 24h is not longer than the lease")
	}
	if c.KeyPrefix == "" {
		c.KeyPrefix = r.App().Name + ":idempotency:"
		r.Computed("key_prefix", `default: app.name + ":idempotency:"`)
	}
}

// Validate implements framework.Validator.
func (p *Plugin) Validate(v *framework.Validation) {
	c := &p.cfg
	switch c.Store {
	case StorePostgres:
		v.RequirePlugin("store", "db", `store "postgres" keeps its keys in the db plugin's database`, `set [plugin.idempotency] store = "redis" (with the cache plugin)`)
	case StoreRedis:
		v.RequirePlugin("store", "cache", `store "redis" keeps its keys in the cache plugin's Redis`, `set [plugin.idempotency] store = "postgres" (with the db plugin)`)
	default:
		v.Error("store", fmt.Sprintf("must be %q or %q, got %q", StorePostgres, StoreRedis, c.Store),
			`set store = "postgres" (with the db plugin) or store = "redis" (with the cache plugin)`)
	}
	if !validScope(c.Scope) {
		v.Error("scope", fmt.Sprintf("must be %q or %q, got %q", ScopeCaller, ScopeGlobal, c.Scope),
			`remove it (each caller has its own keys), or set scope = "global" for routes only anonymous callers with unguessable keys use`)
	}
	rt := v.App().RequestTimeout
	v.Deadline("ttl", c.TTL)
	v.Deadline("lease", c.Lease)
	v.Deadline("store_timeout", c.StoreTimeout)
	v.Deadline("retry_after", c.RetryAfter)
	v.Deadline("sweep_interval", c.SweepInterval)
	if c.Lease > 0 && rt > 0 && c.Lease <= rt+writeGrace {
		v.Error("lease", fmt.Sprintf("must be longer than app.request_timeout + 1s (%s), got %s: a lease that ends while the first request may still run or write its response lets a second one run",
			framework.FormatDuration(rt+writeGrace), framework.FormatDuration(c.Lease)),
			fmt.Sprintf("set lease = %q or remove it (the default is %d × app.request_timeout, at least app.request_timeout + 2s)", framework.FormatDuration(defaultLease(rt)), LeaseFactor))
	}
	if c.TTL > 0 && c.Lease > 0 && c.TTL <= c.Lease {
		v.Error("ttl", fmt.Sprintf("must be longer than lease (%s), got %s: a key would expire while its first request runs",
			framework.FormatDuration(c.Lease), framework.FormatDuration(c.TTL)),
			fmt.Sprintf("set ttl = %q or remove it (the default is 24h, or 2 × lease when that is not longer)", framework.FormatDuration(defaultTTL(c.Lease))))
	}
	if !validTable(c.Table) {
		v.Error("table", fmt.Sprintf("%q is not an identifier or schema.identifier (lowercase letters, digits and _, starting with a letter or _, at most 48 per part)", c.Table),
			fmt.Sprintf("set table = %q", DefaultTable))
	}
	v.Positive("max_request_body", c.MaxRequestBody)
	v.Positive("max_response_body", c.MaxResponseBody)
	for i, h := range c.Headers {
		if h == "" || strings.ContainsAny(h, " \t:\r\n") {
			v.Error(fmt.Sprintf("headers[%d]", i), fmt.Sprintf("%q is not a header name", h), `list header names such as "Content-Type"`)
		}
	}
}

// allowed returns the canonical header names of the allow-list.
func (c *Config) allowed() []string {
	out := make([]string, 0, len(c.Headers))
	for _, h := range c.Headers {
		out = append(out, http.CanonicalHeaderKey(h))
	}
	return out
}
