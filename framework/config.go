package framework

import (
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/jfastframework/jfast/readiness"
)

// AppConfig is the [app] table of jfast.toml. It is built by the loader, which fills
// the defaults below before the file and the environment are applied.
type AppConfig struct {
	// Name names the service in logs, metrics and the default key prefixes of plugins.
	// Defaults to "jfast".
	Name string `koanf:"name"`

	// Env is "development" or "production"; production turns on the production
	// boot rules (each plugin's page lists its own) and JSON logs.
	// Defaults to "development".
	Env string `koanf:"env"`

	// Listen is the address the HTTP server listens on. It is a deploy key:
	// JFAST_APP_LISTEN wins over the file. Defaults to "127.0.0.1:8000".
	Listen string `koanf:"listen"`

	// AdminListen, when set, is the address of a second listener for
	// operators: /metrics, the full /ready and the admin routes live there
	// only, and the public listener keeps /live and a /ready with each plugin's
	// status but no detail. A deploy key (JFAST_APP_ADMIN_LISTEN). Defaults to
	// "" (no admin listener: /metrics on the public listener, which production
	// refuses without public_admin_routes; /ready redacted there in
	// production).
	AdminListen string `koanf:"admin_listen"`

	// AdminToken, when set, is the bearer token every request to the admin
	// listener but /live must carry (Authorization: Bearer <token>, or
	// Basic auth with it as the password, so a browser can open /status).
	// A secret and a deploy key (JFAST_APP_ADMIN_TOKEN); it needs
	// admin_listen, and 32 bytes or more in production. Defaults to ""
	// (the admin listener is open to whoever reaches it).
	AdminToken string `koanf:"admin_token"`

	// AdminHosts are the host names (no port) the admin listener answers to
	// besides IP literals and localhost: a request naming any other Host gets
	// 421, so a page on another site cannot reach a loopback admin listener
	// by pointing a name of its own at 127.0.0.1 (DNS rebinding). Probes and
	// scrapers address a pod by its IP and pass. A deploy key
	// (JFAST_APP_ADMIN_HOSTS, comma-separated). Defaults to [] (IP literals
	// and localhost only).
	AdminHosts []string `koanf:"admin_hosts"`

	// PublicAdminRoutes, in production without admin_listen, serves the
	// admin routes (/metrics, plugins' and the service's) on the public
	// listener on purpose. Without it such a configuration refuses to boot.
	// Defaults to false.
	PublicAdminRoutes bool `koanf:"public_admin_routes"`

	// RequestTimeout is the deadline of every request: its context's, and the
	// connection's for reading the request body and (1s later) for writing the
	// response, so a slow client cannot hold a handler past it. Defaults to 30s.
	RequestTimeout time.Duration `koanf:"request_timeout"`

	// MaxBodyBytes is the largest request body a route reads, in bytes; a route
	// sets its own with framework.MaxBodyBytes. Reading past it fails with an
	// error that renders as 413. Defaults to 1048576 (1 MiB).
	MaxBodyBytes int64 `koanf:"max_body_bytes"`

	// ReadinessTimeout bounds the whole /ready run; checks run in parallel under it.
	// It stays under the 1 s a Kubernetes probe waits by default.
	// Defaults to 800ms.
	ReadinessTimeout time.Duration `koanf:"readiness_timeout"`

	// ShutdownTimeout bounds draining in-flight requests at a graceful stop;
	// requests still running then are cut (and logged). The plugins stop after
	// it, each with plugin_stop_timeout of its own. Defaults to 20s.
	ShutdownTimeout time.Duration `koanf:"shutdown_timeout"`

	// DrainDelay is how long a stopping service keeps serving, with /ready
	// answering 503, before its listener closes and the drain begins: the
	// time its callers take to stop choosing it (a gateway's health check:
	// health_every plus health_timeout). Defaults to 0s: the listener closes
	// at once (on Kubernetes a preStop delay does this job).
	DrainDelay time.Duration `koanf:"drain_delay"`

	// PluginStopTimeout bounds each plugin's Stop at shutdown, counted from
	// that Stop's start: a request that never finishes, or a plugin before it
	// that is slow to stop, cannot take a plugin's time to flush and close.
	// Defaults to 10s (one export_timeout of the telemetry plugin).
	PluginStopTimeout time.Duration `koanf:"plugin_stop_timeout"`

	// StartTimeout bounds each plugin's Start. Plugins connect lazily, so a start
	// never waits on a dependency; the bound catches a plugin that would.
	// Defaults to 10s.
	StartTimeout time.Duration `koanf:"start_timeout"`

	// ReadHeaderTimeout bounds the time from the first byte of a request to the
	// end of its headers, so a client cannot hold a connection by sending headers
	// slowly. The body and the response are bounded by request_timeout.
	// Defaults to 10s.
	ReadHeaderTimeout time.Duration `koanf:"read_header_timeout"`

	// IdleTimeout closes keep-alive connections idle for longer. Defaults to 120s.
	IdleTimeout time.Duration `koanf:"idle_timeout"`

	// LogLevel is "debug", "info", "warn" or "error". Defaults to "info".
	LogLevel string `koanf:"log_level"`

	// DrillReport is the Markdown file `jfast drill --report` writes: the
	// status page on the admin listener shows its table when the file
	// exists. Defaults to "" (no drill panel).
	DrillReport string `koanf:"drill_report"`

	// Overload is the [app.overload] table: the adaptive concurrency limit
	// at the front door (docs/overload.md).
	Overload OverloadConfig `koanf:"overload"`
}

// Production reports whether the production rules apply.
func (c AppConfig) Production() bool { return c.Env == "production" }

// DefaultAppConfig returns the [app] defaults.
func DefaultAppConfig() AppConfig {
	return AppConfig{
		Name:              "jfast",
		Env:               "development",
		Listen:            "127.0.0.1:8000",
		RequestTimeout:    30 * time.Second,
		MaxBodyBytes:      DefaultMaxBodyBytes,
		ReadinessTimeout:  readiness.DefaultTimeout,
		ShutdownTimeout:   20 * time.Second,
		PluginStopTimeout: 10 * time.Second,
		StartTimeout:      10 * time.Second,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       120 * time.Second,
		LogLevel:          "info",
		Overload:          DefaultOverloadConfig(),
	}
}

func (c AppConfig) validate(v *Validation) {
	if c.Name == "" {
		v.Error("name", "must not be empty", `set name = "orders" (the service's name)`)
	}
	if c.Env != "development" && c.Env != "production" {
		v.Error("env", fmt.Sprintf("must be \"development\" or \"production\", got %q", c.Env), `set env = "production" in deployed environments, "development" elsewhere`)
	}
	if c.Listen == "" {
		v.Error("listen", "must not be empty", `set listen = "127.0.0.1:8000" or JFAST_APP_LISTEN`)
	} else if problem := listenProblem(c.Listen); problem != "" {
		v.Error("listen", problem, `set listen = "127.0.0.1:8000" (":8000" listens on every interface), or JFAST_APP_LISTEN`)
	}
	c.validateAdminListen(v)
	v.Deadline("request_timeout", c.RequestTimeout)
	if c.MaxBodyBytes <= 0 {
		v.Error("max_body_bytes", fmt.Sprintf("must be a positive number of bytes, got %d", c.MaxBodyBytes), "set max_body_bytes = 1048576 (1 MiB); a route that takes more sets its own with framework.MaxBodyBytes")
	}
	v.Deadline("readiness_timeout", c.ReadinessTimeout)
	v.Deadline("shutdown_timeout", c.ShutdownTimeout)
	if c.DrainDelay < 0 {
		v.Error("drain_delay", fmt.Sprintf("must be 0 or more, got %s", c.DrainDelay), `set drain_delay = "2s" (callers' health checks: health_every plus health_timeout), or 0 to close at once`)
	}
	v.Deadline("plugin_stop_timeout", c.PluginStopTimeout)
	v.Deadline("start_timeout", c.StartTimeout)
	v.Deadline("read_header_timeout", c.ReadHeaderTimeout)
	v.Deadline("idle_timeout", c.IdleTimeout)
	c.Overload.validate(v)
	switch c.LogLevel {
	case "debug", "info", "warn", "error":
	default:
		v.Error("log_level", fmt.Sprintf("must be debug, info, warn or error, got %q", c.LogLevel), `set log_level = "info"`)
	}
}

// PluginsConfig is the [plugins] table.
type PluginsConfig struct {
	// Enabled lists the plugins that run, in the order they start when no dependency
	// says otherwise. Each must be compiled into the service. Defaults to ["observability"].
	Enabled []string `koanf:"enabled"`
}

// listenProblem says what is wrong with a listen address, as net.Listen would
// find it at boot, or "" when it is host:port with a port from 0 to 65535 (or a
// service name such as "http", looked up as net.Listen looks it up, in
// /etc/services or Go's own short list). A space anywhere is refused: the
// listener would read it as part of the host or the port (" 127.0.0.1" is
// no host it can resolve), and an environment variable can carry one unseen.
func listenProblem(addr string) string {
	if strings.ContainsFunc(addr, unicode.IsSpace) {
		return fmt.Sprintf("must be host:port without spaces, got %q", addr)
	}
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Sprintf("must be host:port, got %q", addr)
	}
	if port == "" {
		return fmt.Sprintf("has no port, got %q", addr)
	}
	n, err := strconv.Atoi(port)
	if err != nil {
		if _, err := net.LookupPort("tcp", port); err != nil {
			return fmt.Sprintf("port must be a number from 0 to 65535 or a known service name, got %q", addr)
		}
		return ""
	}
	if n < 0 || n > 65535 {
		return fmt.Sprintf("port must be from 0 to 65535, got %q", addr)
	}
	return ""
}
