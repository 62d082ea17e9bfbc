package db

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
	_ "time/tzdata" // session_timezone is checked against the tz database where the host has none

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/framework/resilience"
)

// Config is the [plugin.db] table.
type Config struct {
	// URL is the PostgreSQL connection string, as a URL
	// (postgres://user:password@host:5432/dbname?sslmode=require) or as
	// key=value pairs. It is a deploy key: JFAST_DB_URL wins over the file.
	// Its password never appears in a log line, an error or /ready.
	// Required unless tenant_url_template is set. Defaults to "".
	URL string `koanf:"url"`

	// PoolSize is the most connections the pool opens. Zero is refused:
	// some drivers read it as "no limit", which is never what a service
	// wants in front of a server with max_connections. When neither the
	// file nor the environment sets it, a pool_max_conns in url is in
	// force; both set and different is refused at boot. Defaults to 10.
	PoolSize int `koanf:"pool_size"`

	// MinIdle is how many idle connections the pool keeps open, made in the
	// background (a server that is down does not delay the boot). Unset, a
	// pool_min_idle_conns in url is in force; set in both, the two must
	// agree. Defaults to 0.
	MinIdle int `koanf:"min_idle"`

	// ConnectTimeout bounds opening one connection: TCP, TLS, startup and
	// authentication, on every host of a multi-host url together (pgconn
	// alone gives each host its own). Ten seconds covers TLS and SCRAM on a busy server
	// and still leaves the request time to answer 503 on its own within
	// the 30 s request_timeout. Defaults to 10s.
	ConnectTimeout time.Duration `koanf:"connect_timeout"`

	// PingTimeout bounds the SELECT 1 sent on an idle connection before it
	// is handed out. A connection whose ping does not answer in time is
	// terminated and another is tried. Defaults to 2s.
	PingTimeout time.Duration `koanf:"ping_timeout"`

	// CommandTimeout, when positive, is the deadline of every statement
	// sent through the plugin (db.DB, its transactions, a connection from
	// DB.Acquire), on top of the caller's context.
	// Zero leaves statements bounded by the caller's context only (the
	// request's request_timeout, a job's timeout): migrations and reports
	// legitimately run for minutes. Defaults to 0 (off).
	CommandTimeout time.Duration `koanf:"command_timeout"`

	// MaxConnLifetime closes a connection this long after it was opened,
	// so connections follow a failover or a PgBouncer restart. Unset, a
	// pool_max_conn_lifetime in url (or tenant_url_template) is in force.
	// Defaults to 1h.
	MaxConnLifetime time.Duration `koanf:"max_conn_lifetime"`

	// MaxConnIdle closes a connection idle for this long. Unset, a
	// pool_max_conn_idle_time in url (or tenant_url_template) is in force.
	// Defaults to 30m.
	MaxConnIdle time.Duration `koanf:"max_conn_idle"`

	// SessionTimezone is the TimeZone of every session, an IANA name such
	// as "UTC" or "Europe/Madrid", checked at boot. Empty keeps the
	// server's setting. Defaults to "".
	SessionTimezone string `koanf:"session_timezone"`

	// ApplicationName is the application_name of every session, shown in
	// pg_stat_activity. An application_name in the connection string is
	// kept when this key is not set. Defaults to app.name.
	ApplicationName string `koanf:"application_name"`

	// BreakerConfig is the breaker_* keys of the connection breaker, which
	// counts connection attempts and bounded pings (docs/resilience.md).
	resilience.BreakerConfig `koanf:",squash"`

	// TenantURLTemplate, when set, is the connection string of a tenant's
	// database with {tenant} where the tenant's name goes, e.g.
	// "postgres://app@db:5432/tenant_{tenant}". It is a deploy key
	// (JFAST_DB_TENANT_URL_TEMPLATE). Defaults to "" (no tenants).
	TenantURLTemplate string `koanf:"tenant_url_template"`

	// MaxTenantPools is how many tenant pools stay open; the least recently
	// used one is closed to make room for another. Defaults to 8.
	MaxTenantPools int `koanf:"max_tenant_pools"`

	// TenantPoolSize is the pool_size of each tenant pool, kept small
	// because max_tenant_pools of them may be open at once. A
	// pool_max_conns in tenant_url_template is in force when the key is not
	// set, as for pool_size. Defaults to 4.
	TenantPoolSize int `koanf:"tenant_pool_size"`

	// MigrateOnStart runs the embedded migrations (see WithMigrations) up
	// at boot, under a PostgreSQL advisory lock so replicas booting
	// together migrate once. With it on, the boot needs the database: it
	// fails when the server cannot be reached within app.start_timeout.
	// Defaults to false.
	MigrateOnStart bool `koanf:"migrate_on_start"`

	// MigrationsTable is the table recording the schema version,
	// schema-qualified. Defaults to "public.schema_version".
	MigrationsTable string `koanf:"migrations_table"`
}

func defaultConfig() Config {
	return Config{
		PoolSize:        10,
		ConnectTimeout:  10 * time.Second,
		PingTimeout:     2 * time.Second,
		MaxConnLifetime: time.Hour,
		MaxConnIdle:     30 * time.Minute,
		BreakerConfig:   resilience.DefaultBreakerConfig(),
		MaxTenantPools:  8,
		TenantPoolSize:  4,
		MigrationsTable: "public.schema_version",
	}
}

// tenantPlaceholder is what tenant_url_template must contain.
const tenantPlaceholder = "{tenant}"

var qualifiedIdent = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)?$`)

// validate reports every problem of c; hasMigrations says whether the
// service compiled migrations in.
func (c *Config) validate(v *framework.Validation, hasMigrations bool) {
	switch {
	case c.URL == "" && c.TenantURLTemplate == "":
		v.Error("url", "is not set", `set url = "postgres://user@host:5432/dbname" or the environment variable JFAST_DB_URL`)
	case c.URL != "":
		if _, err := pgxpool.ParseConfig(c.URL); err != nil {
			v.Error("url", "is not a valid PostgreSQL connection string: "+parseReason(c.URL, err),
				`use the form "postgres://user:password@host:5432/dbname"`)
		}
	}
	c.validateURLSettings(v)
	if c.PoolSize <= 0 {
		v.Error("pool_size", fmt.Sprintf("must be at least 1, got %d: a pool without a limit is never meant, it lets one burst exhaust the server's max_connections", c.PoolSize),
			"set pool_size = 10, below the server's max_connections divided by the number of processes")
	}
	if c.MinIdle < 0 || (c.PoolSize > 0 && c.MinIdle > c.PoolSize) {
		v.Error("min_idle", fmt.Sprintf("must be between 0 and pool_size (%d), got %d", c.PoolSize, c.MinIdle), "set min_idle = 0, or a number no larger than pool_size")
	}
	v.Deadline("connect_timeout", c.ConnectTimeout)
	v.Deadline("ping_timeout", c.PingTimeout)
	if c.CommandTimeout < 0 {
		v.Error("command_timeout", fmt.Sprintf("must be zero (off) or a positive duration, got %s", c.CommandTimeout),
			`remove it to leave statements bounded by the request's deadline, or set a duration such as "5s"`)
	}
	v.Deadline("max_conn_lifetime", c.MaxConnLifetime)
	v.Deadline("max_conn_idle", c.MaxConnIdle)
	if c.SessionTimezone != "" {
		if strings.HasPrefix(c.SessionTimezone, "right/") {
			// Zone files with leap seconds, which a host may have: PostgreSQL
			// refuses every connection that asks for one.
			v.Error("session_timezone", fmt.Sprintf("%q counts leap seconds, which PostgreSQL refuses (every connection would fail)", c.SessionTimezone),
				fmt.Sprintf("set %q instead", strings.TrimPrefix(c.SessionTimezone, "right/")))
		} else if _, err := time.LoadLocation(c.SessionTimezone); err != nil || c.SessionTimezone == "Local" {
			v.Error("session_timezone", fmt.Sprintf("%q is not a time zone of the tz database", c.SessionTimezone),
				`set an IANA zone name such as "UTC" or "America/Mexico_City", or remove it to keep the server's setting`)
		}
	}
	if strings.ContainsRune(c.ApplicationName, 0) {
		v.Error("application_name", "must not contain a NUL byte", "set a plain name such as the service's")
	}
	c.BreakerConfig.Validate(v)
	if c.TenantURLTemplate != "" {
		if !strings.Contains(c.TenantURLTemplate, tenantPlaceholder) {
			v.Error("tenant_url_template", "does not contain {tenant}: every tenant would share one database",
				`put {tenant} where the tenant's name goes, e.g. "postgres://app@db:5432/tenant_{tenant}"`)
		} else if _, err := pgxpool.ParseConfig(tenantDSN(c.TenantURLTemplate)); err != nil {
			v.Error("tenant_url_template", "is not a valid PostgreSQL connection string: "+parseReason(tenantDSN(c.TenantURLTemplate), err),
				`use the form "postgres://user:password@host:5432/tenant_{tenant}"`)
		}
		v.Positive("max_tenant_pools", c.MaxTenantPools)
		v.Positive("tenant_pool_size", c.TenantPoolSize)
	}
	if !qualifiedIdent.MatchString(c.MigrationsTable) {
		v.Error("migrations_table", fmt.Sprintf("must be a table name, optionally schema-qualified, got %q", c.MigrationsTable), `set migrations_table = "public.schema_version"`)
	}
	if c.MigrateOnStart && !hasMigrations {
		v.CompiledInError("migrate_on_start", "is true but the service compiled in no migrations",
			"pass db.WithMigrations(migrationsFS) to db.New in main, or remove migrate_on_start")
	}
	if c.MigrateOnStart && c.URL == "" {
		v.Error("migrate_on_start", "is true but url is not set", "set url (JFAST_DB_URL): migrations run on the main database")
	}
}

// tenantDSN is template with a tenant's name in place of {tenant}, for the
// checks made before any tenant is known.
func tenantDSN(template string) string {
	return strings.ReplaceAll(template, tenantPlaceholder, "t")
}

// A urlSetting is a connection-string parameter pgxpool reads
// (pool_max_conns=20, pool_max_conn_lifetime=2h) that a [plugin.db] key also
// sets (pool_size, max_conn_lifetime). A key set neither in the file nor in
// the environment takes the connection string's value, and config shows
// where it came from; a value in two places (the key and url, the key and
// tenant_url_template, url and the template) must be one value, or the boot
// is refused. Parameters no key sets (pool_min_conns,
// pool_health_check_period, pool_max_conn_lifetime_jitter) are pgxpool's to
// apply as they are.
type urlSetting struct {
	key, param string
	// Which connection strings the key's pools are made from, so whose
	// value counts: url (the main pool), tenant_url_template, or both.
	inURL, inTemplate bool
	parse             func(string) (any, bool)
	field             func(*Config) any // a *int or *time.Duration
	// rule is the key's own rule, which the parameter's value must keep
	// too: the problem with v, or "" (see urlRule).
	rule func(v any) string
	// example is a value that keeps the rule, for the fix.
	example string
}

var urlSettings = []urlSetting{
	{key: "pool_size", param: "pool_max_conns", inURL: true, parse: parseURLSize, field: func(c *Config) any { return &c.PoolSize }},
	{key: "tenant_pool_size", param: "pool_max_conns", inTemplate: true, parse: parseURLSize, field: func(c *Config) any { return &c.TenantPoolSize }},
	{key: "min_idle", param: "pool_min_idle_conns", inURL: true, parse: parseURLCount, field: func(c *Config) any { return &c.MinIdle },
		rule: notNegative, example: "0"},
	{key: "max_conn_lifetime", param: "pool_max_conn_lifetime", inURL: true, inTemplate: true, parse: parseURLDuration, field: func(c *Config) any { return &c.MaxConnLifetime },
		rule: positiveDuration, example: "1h"},
	{key: "max_conn_idle", param: "pool_max_conn_idle_time", inURL: true, inTemplate: true, parse: parseURLDuration, field: func(c *Config) any { return &c.MaxConnIdle },
		rule: positiveDuration, example: "30m"},
}

// parseURLSize reads a pool size: one or more. One below is the url rule's
// to report, as a malformed one is: pgxpool refuses both.
func parseURLSize(s string) (any, bool) {
	n, err := strconv.ParseInt(s, 10, 32)
	return int(n), err == nil && n >= 1
}

// parseURLCount and parseURLDuration read any value that parses (pgxpool
// takes them all); the setting's rule refuses those its key refuses.
func parseURLCount(s string) (any, bool) {
	n, err := strconv.ParseInt(s, 10, 32)
	return int(n), err == nil
}

func parseURLDuration(s string) (any, bool) {
	d, err := time.ParseDuration(s)
	return d, err == nil
}

func notNegative(v any) string {
	if n := v.(int); n < 0 {
		return fmt.Sprintf("must be 0 or more, got %d", n)
	}
	return ""
}

// positiveDuration is the rule of a pool's lifetimes. pgxpool would read a
// max_conn_lifetime of zero or below as "never" and such a max_conn_idle as
// "at once": never what was meant.
func positiveDuration(v any) string {
	if d := v.(time.Duration); d <= 0 {
		return "must be a positive duration, got " + framework.FormatDuration(d)
	}
	return ""
}

// fits reports whether v, read from a connection string, keeps the key's
// rule. One that does not is neither the key's value nor compared with it:
// validateURLSettings refuses it.
func (s urlSetting) fits(v any) bool { return s.rule == nil || s.rule(v) == "" }

// urlParam returns the value of param in dsn (URL query or key=value pair),
// parsed, and whether dsn carries one that parses. A malformed one is the url
// rule's to report (pgxpool refuses it).
func (s urlSetting) urlParam(dsn string) (any, bool) {
	if dsn == "" || !strings.Contains(dsn, s.param) {
		return nil, false
	}
	pc, err := pgconn.ParseConfig(dsn)
	if err != nil {
		return nil, false
	}
	text, ok := pc.RuntimeParams[s.param]
	if !ok {
		return nil, false
	}
	return s.parse(text)
}

func (s urlSetting) get(c *Config) any {
	switch f := s.field(c).(type) {
	case *int:
		return *f
	case *time.Duration:
		return *f
	}
	return nil
}

func (s urlSetting) set(c *Config, v any) {
	switch f := s.field(c).(type) {
	case *int:
		*f = v.(int)
	case *time.Duration:
		*f = v.(time.Duration)
	}
}

// values returns the values of s that url and tenant_url_template carry, each
// with whether it counts and is there.
func (s urlSetting) values(c *Config) (inURL any, okURL bool, inTpl any, okTpl bool) {
	if s.inURL {
		inURL, okURL = s.urlParam(c.URL)
	}
	if s.inTemplate {
		inTpl, okTpl = s.urlParam(c.tenantDSN())
	}
	return inURL, okURL, inTpl, okTpl
}

// resolveURLSettings puts into each key set neither in the file nor in the
// environment the value url carries, or else tenant_url_template's.
func (c *Config) resolveURLSettings(r *framework.Resolution) {
	for _, s := range urlSettings {
		if r.IsSet(s.key) {
			continue
		}
		inURL, okURL, inTpl, okTpl := s.values(c)
		switch {
		case okURL && s.fits(inURL):
			s.set(c, inURL)
			r.FromURL(s.key, "url", s.param)
		case okTpl && s.fits(inTpl):
			s.set(c, inTpl)
			r.FromURL(s.key, "tenant_url_template", s.param)
		}
	}
}

// resolveApplicationName puts app.name into application_name when neither the
// file nor the environment sets it and no connection string names the
// sessions (an application_name in url or tenant_url_template, or PGAPPNAME,
// which pgconn reads into every connection string). The sessions get the same
// name either way (applyConnConfig falls back to app.name); this makes config
// show the name in force instead of "". Where a connection string names them,
// each pool keeps its own (a template's may hold {tenant}), so there is no one
// value to show and config says where it comes from.
func (c *Config) resolveApplicationName(r *framework.Resolution) {
	if r.IsSet("application_name") {
		return
	}
	if namesSessions(c.URL) || namesSessions(c.tenantDSN()) {
		r.Computed("application_name", "default: the connection string's application_name, else app.name")
		return
	}
	if name := r.App().Name; name != "" {
		c.ApplicationName = name
		r.Computed("application_name", "default: app.name")
	}
}

// namesSessions reports whether dsn gives the sessions an application_name.
// A malformed dsn is the url rule's to report.
func namesSessions(dsn string) bool {
	if dsn == "" {
		return false
	}
	pc, err := pgconn.ParseConfig(dsn)
	return err == nil && pc.RuntimeParams["application_name"] != ""
}

// validateURLSettings refuses a parameter whose value its key would refuse,
// and a setting given two different values.
func (c *Config) validateURLSettings(v *framework.Validation) {
	for _, s := range urlSettings {
		value := s.get(c)
		inURL, okURL, inTpl, okTpl := s.values(c)
		okURL = okURL && s.keepsRule(v, "url", inURL)
		okTpl = okTpl && s.keepsRule(v, "tenant_url_template", inTpl)
		if okURL {
			v.AgreesWithURL(s.key, value, "url", s.param, inURL)
		}
		switch {
		case !okTpl:
		case okURL:
			v.URLsAgree("tenant_url_template", inTpl, "url", s.param, inURL, s.key)
		default:
			v.AgreesWithURL(s.key, value, "tenant_url_template", s.param, inTpl)
		}
	}
}

// keepsRule reports whether x, the parameter's value in urlKey, keeps the
// key's rule; one that does not is refused, naming the parameter and the key,
// instead of being ignored for the key's default.
func (s urlSetting) keepsRule(v *framework.Validation, urlKey string, x any) bool {
	if s.fits(x) {
		return true
	}
	v.Error(urlKey, fmt.Sprintf("sets %s, the connection string's %s: it %s", s.param, v.Key(s.key), s.rule(x)),
		fmt.Sprintf("set %s=%s in %s (or %s), or remove it and set %s", s.param, s.example, v.Key(urlKey), urlEnv[urlKey], v.Key(s.key)))
	return false
}

// urlEnv names the environment variable of each deploy key.
var urlEnv = map[string]string{"url": "JFAST_DB_URL", "tenant_url_template": "JFAST_DB_TENANT_URL_TEMPLATE"}

// tenantDSN is tenant_url_template with a tenant in it, or "" when it is not
// set.
func (c *Config) tenantDSN() string {
	if c.TenantURLTemplate == "" {
		return ""
	}
	return tenantDSN(c.TenantURLTemplate)
}
