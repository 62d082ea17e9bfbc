package http

import (
	"cmp"
	"crypto/tls"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/framework/resilience"
)

// Defaults of an upstream (docs/design.md, "Per-dependency defaults" and
// "Calling other services"), except where a comment says otherwise.
const (
	DefaultConnectTimeout = 2 * time.Second
	DefaultReadTimeout    = 5 * time.Second
	// DefaultWriteTimeout matches the read timeout: it is also a gap (between two
	// writes of the request), so a request body is never cut for being large, only
	// for an upstream that stopped reading it.
	DefaultWriteTimeout = 5 * time.Second
	// DefaultPoolTimeout bounds the wait for a connection, dial and TLS handshake
	// included (each bounded by connect_timeout), so it sits above
	// 2 × connect_timeout: it only fires when every connection is busy.
	DefaultPoolTimeout = 5 * time.Second
	// DefaultTimeout and DefaultAttempts are the policy's (10 s, 3 tries).
	DefaultTimeout       = resilience.DefaultTimeout
	DefaultAttempts      = resilience.DefaultAttempts
	DefaultMaxRetryAfter = 30 * time.Second
	// The backoff, retry budget and bulkhead defaults are the policy's
	// (resilience.DefaultPolicyConfig), the same in every plugin; these
	// names stay for code that reads them.
	DefaultBackoffBase  = resilience.DefaultBackoffBase
	DefaultBackoffMax   = resilience.DefaultPolicyBackoffMax
	DefaultBulkheadWait = resilience.DefaultBulkheadWait
	// DefaultMaxRoutes bounds the route breakers of breaker_key = "route":
	// far more route templates than one service calls on one upstream, while
	// a mistake (an id in the route) cannot grow them without end.
	DefaultMaxRoutes = 100
	// DefaultMaxOrigins bounds the origins a shared client holds a breaker,
	// budget and bulkhead for (about 2 KB each): a webhook sender to a
	// hundred thousand hosts holds the thousand it used last.
	DefaultMaxOrigins = 1000
	// DefaultMaxResponseBytes (10 MiB) is far above what a JSON call between
	// services returns (kilobytes; gRPC's default receive limit for such calls
	// is 4 MiB) while bounding what one upstream can make this process hold:
	// max_concurrent (50) × 10 MiB = 500 MiB at the very worst. See
	// docs/http.md, "Response size".
	DefaultMaxResponseBytes int64 = 10 << 20
)

// The choices of the string-valued keys.
const (
	// BudgetWindow, BudgetBucket, JitterFull and JitterProportional are
	// the choices of the policy's retry_budget and backoff_jitter.
	BudgetWindow       = resilience.BudgetWindow
	BudgetBucket       = resilience.BudgetBucket
	JitterFull         = resilience.JitterNameFull
	JitterProportional = resilience.JitterNameProportional
	// KeyOrigin is breaker_key = "origin": one breaker per origin.
	KeyOrigin = "origin"
	// KeyRoute is breaker_key = "route": one breaker per origin and route
	// template (see [Route]).
	KeyRoute = "route"
)

// Config is the [plugin.http] table.
type Config struct {
	// Upstreams are the services this one calls, by name:
	// [plugin.http.upstreams.<name>]. Defaults to none.
	Upstreams map[string]Upstream `koanf:"upstreams"`
	// Shared are the clients for absolute URLs (webhooks, third-party APIs),
	// by name: [plugin.http.shared.<name>]. Defaults to none.
	Shared map[string]SharedConfig `koanf:"shared"`
}

// Upstream is one service this one calls: the [plugin.http.upstreams.<name>]
// table, or the argument of [NewClient]. In NewClient a zero field takes its
// default; in the configuration file a zero or negative deadline is an error.
type Upstream struct {
	// Name names the upstream in errors, metrics, logs and /ready. The plugin
	// sets it from the table's name. Defaults to "upstream" in NewClient.
	Name string `koanf:"-"`

	// BaseURL is the absolute http or https URL every call's path is appended
	// to, such as "http://billing:8010". It is a deploy key:
	// JFAST_HTTP_UPSTREAMS__<NAME>__BASE_URL wins over the file. Required.
	BaseURL string `koanf:"base_url"`

	// Instances lists the upstream's instances, each an origin such as
	// "http://10.0.0.7:8010" (no path): each call's attempts are spread over
	// them, each instance has a breaker of its own, and a retry goes to
	// another instance. base_url still gives the path calls start from and
	// the Host header they carry. Not with discover. A deploy key
	// (JFAST_HTTP_UPSTREAMS__<NAME>__INSTANCES, comma-separated). Defaults
	// to none: base_url's host is the one instance.
	Instances []string `koanf:"instances"`
	// Discover makes every address base_url's host resolves to (each A and
	// AAAA record) an instance, resolved again every resolve_every: a
	// Kubernetes headless Service. Not with instances. Defaults to false.
	Discover bool `koanf:"discover"`
	// ResolveEvery is the time between two resolutions of a discovered
	// upstream's host. Defaults to 5s.
	ResolveEvery time.Duration `koanf:"resolve_every"`
	// HealthPath, when set, is asked of every instance every health_every
	// (GET, such as "/ready"): an instance that does not answer 2xx within
	// health_timeout is skipped until it does, before any call pays for it.
	// Needs instances or discover. Defaults to "" (no health checks).
	HealthPath string `koanf:"health_path"`
	// HealthEvery is the time from the start of one round of health checks
	// (every instance at once) to the start of the next; a round lasts at
	// most health_timeout, so a hung instance delays the others' checks
	// only when health_timeout is not shorter. Defaults to 5s.
	HealthEvery time.Duration `koanf:"health_every"`
	// HealthTimeout bounds one health check: a jfast instance's /ready
	// answers within its readiness_timeout (800ms) and the round trip.
	// Defaults to 1s.
	HealthTimeout time.Duration `koanf:"health_timeout"`

	// ConnectTimeout bounds the TCP connect, and separately the TLS handshake.
	// Defaults to 2s.
	ConnectTimeout time.Duration `koanf:"connect_timeout"`
	// ReadTimeout is the longest gap between two bytes of the response, from the
	// end of the request to the first byte and then between reads: a slow but
	// steady response is not cut, a silent one is. Defaults to 5s.
	ReadTimeout time.Duration `koanf:"read_timeout"`
	// WriteTimeout is the longest gap between two writes of the request.
	// Defaults to 5s.
	WriteTimeout time.Duration `koanf:"write_timeout"`
	// PoolTimeout bounds the wait for a connection: an idle one, one another
	// call frees, or a new one (dial and handshake included). Defaults to 5s.
	PoolTimeout time.Duration `koanf:"pool_timeout"`

	// MaxRetryAfter is the longest Retry-After the client waits; a response
	// asking for more goes back to the caller. Defaults to 30s.
	MaxRetryAfter time.Duration `koanf:"max_retry_after"`
	// PolicyConfig is the attempts, timeout, backoff, retry budget,
	// bulkhead and breaker keys every plugin that calls out shares
	// (docs/resilience.md, "The policy keys"). Here timeout also bounds
	// reading the body, what is retried is docs/http.md's rule, and
	// max_concurrent is also the connection pool's size.
	resilience.PolicyConfig `koanf:",squash"`
	// BreakerKey is what a breaker is kept for: "origin" (one per origin) or
	// "route" (one per origin and route template, named per call with
	// [Route] or [WithRoute]; a call without one uses the origin's).
	// Defaults to "origin".
	BreakerKey string `koanf:"breaker_key"`
	// MaxRoutes bounds the route breakers of breaker_key = "route"; past it,
	// the least recently used route's breaker is dropped. Defaults to 100.
	MaxRoutes int `koanf:"max_routes"`

	// MaxResponseBytes is the largest response body, in bytes, a call
	// accepts. The client reads at most one byte more; a larger body (or a
	// Content-Length announcing one) fails the call with [ResponseTooLarge]
	// and closes the connection. In NewClient 0 takes the default.
	// Defaults to 10485760 (10 MiB).
	MaxResponseBytes int64 `koanf:"max_response_bytes"`

	// ForwardAuthorization sends the caller's bearer token (see
	// framework.BearerToken) to this upstream. A token is issued for an
	// audience; sending it elsewhere hands the caller's identity to a service
	// outside it. Defaults to false.
	ForwardAuthorization bool `koanf:"forward_authorization"`
	// Headers are sent with every call of this client (an upstream, or a
	// shared client to every origin); per-call headers win over them. Each
	// entry is a deploy key, since it often carries a credential that
	// differs per environment: JFAST_HTTP_UPSTREAMS__<NAME>__HEADERS__<HEADER>
	// for an upstream, JFAST_HTTP_SHARED__<NAME>__HEADERS__<HEADER> for a
	// shared client, wins over the file. The variable names the header in
	// lower case with "-" and "_" as written: <HEADER> X-API-KEY is the
	// header x-api-key (env(1), Docker and Kubernetes set such a variable; a
	// shell's export cannot), and X_API_KEY is x_api_key, refused as every
	// header name with "_" is. It overrides only an entry the file also
	// writes in lower case. Two entries for one header (names differing only
	// in case) are refused. Defaults to none.
	Headers map[string]string `koanf:"headers"`

	// TLS is the TLS configuration for an https base_url, such as a custom CA
	// in RootCAs. It cannot be set from the file: a service trusts the
	// system's roots, which SSL_CERT_FILE and SSL_CERT_DIR extend.
	// Defaults to nil (the system roots).
	TLS *tls.Config `koanf:"-"`
}

// SetDefaults implements framework.Defaulter: each [plugin.http.upstreams.<name>]
// starts from the defaults before the file and the environment apply.
func (u *Upstream) SetDefaults() {
	name, base, instances, headers, tlsConf := u.Name, u.BaseURL, u.Instances, u.Headers, u.TLS
	*u = Upstream{
		Name:             name,
		BaseURL:          base,
		Instances:        instances,
		ResolveEvery:     DefaultResolveEvery,
		HealthEvery:      DefaultHealthEvery,
		HealthTimeout:    DefaultHealthTimeout,
		ConnectTimeout:   DefaultConnectTimeout,
		ReadTimeout:      DefaultReadTimeout,
		WriteTimeout:     DefaultWriteTimeout,
		PoolTimeout:      DefaultPoolTimeout,
		MaxRetryAfter:    DefaultMaxRetryAfter,
		PolicyConfig:     resilience.DefaultPolicyConfig(),
		BreakerKey:       KeyOrigin,
		MaxRoutes:        DefaultMaxRoutes,
		MaxResponseBytes: DefaultMaxResponseBytes,
		Headers:          headers,
		TLS:              tlsConf,
	}
}

// withDefaults fills the zero fields of u, for NewClient.
func (u Upstream) withDefaults() Upstream {
	var d Upstream
	d.SetDefaults()
	u.ConnectTimeout = cmp.Or(u.ConnectTimeout, d.ConnectTimeout)
	u.ReadTimeout = cmp.Or(u.ReadTimeout, d.ReadTimeout)
	u.WriteTimeout = cmp.Or(u.WriteTimeout, d.WriteTimeout)
	u.PoolTimeout = cmp.Or(u.PoolTimeout, d.PoolTimeout)
	u.MaxRetryAfter = cmp.Or(u.MaxRetryAfter, d.MaxRetryAfter)
	u.ResolveEvery = cmp.Or(u.ResolveEvery, d.ResolveEvery)
	u.HealthEvery = cmp.Or(u.HealthEvery, d.HealthEvery)
	u.HealthTimeout = cmp.Or(u.HealthTimeout, d.HealthTimeout)
	u.PolicyConfig.FillZero(d.PolicyConfig)
	u.BreakerKey = cmp.Or(u.BreakerKey, d.BreakerKey)
	if u.MaxRoutes == 0 {
		u.MaxRoutes = d.MaxRoutes
	}
	if u.MaxResponseBytes == 0 {
		u.MaxResponseBytes = d.MaxResponseBytes
	}
	if u.Name == "" {
		u.Name = "upstream"
	}
	return u
}

// problems returns every problem with u's settings, in key order.
func (u *Upstream) problems() []framework.ConfigError {
	var l framework.Problems
	if problem := checkBaseURL(u.BaseURL); problem != "" {
		l.Error("base_url", problem, `set an absolute URL such as "http://billing:8010", in the file or in JFAST_HTTP_UPSTREAMS__<NAME>__BASE_URL`)
	}
	u.instanceProblems(&l)
	u.policyProblems(&l)
	return l
}

// policyProblems reports every problem with the settings an upstream and a
// shared client have in common (all but base_url).
func (u *Upstream) policyProblems(l *framework.Problems) {
	add, deadline, positive := l.Error, l.Deadline, l.Positive
	oneOf := func(key, v string, choices ...string) {
		if !slices.Contains(choices, v) {
			add(key, fmt.Sprintf("must be %s, got %q", quoteChoices(choices), v), fmt.Sprintf("set %q (the default) or %q", choices[0], choices[1]))
		}
	}

	deadline("connect_timeout", u.ConnectTimeout)
	deadline("read_timeout", u.ReadTimeout)
	deadline("write_timeout", u.WriteTimeout)
	deadline("pool_timeout", u.PoolTimeout)
	deadline("max_retry_after", u.MaxRetryAfter)
	u.PolicyConfig.Validate(l)
	oneOf("breaker_key", u.BreakerKey, KeyOrigin, KeyRoute)
	positive("max_routes", u.MaxRoutes)
	if u.MaxResponseBytes <= 0 {
		add("max_response_bytes", fmt.Sprintf("must be greater than zero, got %d", u.MaxResponseBytes),
			"set a size in bytes such as 10485760 (10 MiB); the cap cannot be switched off")
	}

	names := slices.Sorted(maps.Keys(u.Headers))
	seen := make(map[string]string, len(names)) // canonical name → first configured spelling
	for _, name := range names {
		switch canonical := http.CanonicalHeaderKey(name); {
		case !validHeaderName(name):
			add("headers."+name, "is not a valid header name", "use a token: letters, digits and !#$%&'*+-.^_`|~ only (no spaces, colons or other separators)")
		case seen[canonical] != "":
			// Header names are case-insensitive, so both entries are one
			// header and which value is sent would be chance. The usual cause
			// is a JFAST_..._HEADERS__<HEADER> variable (which names the entry
			// in lower case) meeting a capitalised entry in the file.
			add("headers."+name, fmt.Sprintf("is the same header as headers.%s (header names ignore case)", seen[canonical]),
				"keep one; to let JFAST_HTTP_UPSTREAMS__<NAME>__HEADERS__<HEADER> override the file, write the name in lower case in the file")
		case !validHeaderValue(u.Headers[name]):
			seen[canonical] = name
			add("headers."+name, "holds a control character (such as a line break)", "remove it")
		default:
			seen[canonical] = name
		}
	}
}

func quoteChoices(choices []string) string {
	q := make([]string, len(choices))
	for i, c := range choices {
		q[i] = strconv.Quote(c)
	}
	return strings.Join(q, " or ")
}

// checkBaseURL returns what is wrong with an upstream's base URL, or "".
func checkBaseURL(s string) string {
	return framework.BaseURLProblem(s, "an Authorization header in headers")
}

// validHeaderName reports whether s is an RFC 9110 token.
func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}

// validHeaderValue reports whether s has no control characters but tab.
func validHeaderValue(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < ' ' && c != '\t') || c == 0x7f {
			return false
		}
	}
	return true
}
