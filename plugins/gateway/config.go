package gateway

import (
	"fmt"
	"maps"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/jfastframework/jfast/framework"
)

// DefaultMaxRetryBodyBytes is the default of max_retry_body_bytes: 64 KiB
// holds any JSON command a client sends, and is small enough that holding
// it for every retryable request in flight costs little memory.
const DefaultMaxRetryBodyBytes = 64 << 10

// DefaultStreamWriteTimeout is the default of stream_write_timeout, the
// longest a write to a stream route's client may take: as long as the http
// plugin's default read_timeout twice over, so a client that stopped reading
// is let go about when an upstream that stopped sending would be.
const DefaultStreamWriteTimeout = 10 * time.Second

// Config is the [plugin.gateway] table.
type Config struct {
	// Routes are the proxied routes, by name: [plugin.gateway.routes.<name>].
	// The name labels the route's metrics, its /ready entry and its
	// problems. Defaults to none.
	Routes map[string]Route `koanf:"routes"`

	// TrustedProxies are the addresses ("10.0.0.7") and networks
	// ("10.0.0.0/8") of the proxies in front of the gateway whose
	// X-Forwarded-For, X-Forwarded-Proto, X-Forwarded-Host and Forwarded
	// headers are kept (and extended). A request from any other peer has
	// them replaced by what the gateway saw itself: a client cannot claim
	// another address. Defaults to none (nobody is trusted).
	TrustedProxies []string `koanf:"trusted_proxies"`

	// MaxRetryBodyBytes is the largest request body the gateway holds in
	// memory so that the request can be retried; a request with a longer
	// body (or one that is still coming past this size) is streamed to the
	// upstream and never retried. Defaults to 65536 (64 KiB).
	MaxRetryBodyBytes int64 `koanf:"max_retry_body_bytes"`

	// StreamWriteTimeout bounds each write to the client of a stream route:
	// a client that stops reading is let go
	// after this instead of holding the upstream call. Defaults to 10s.
	StreamWriteTimeout time.Duration `koanf:"stream_write_timeout"`

	// TunnelIdleTimeout closes a WebSocket (upgraded) connection after this
	// long without a byte either way, giving its place among the upstream's
	// max_concurrent back. Defaults to 60s.
	TunnelIdleTimeout time.Duration `koanf:"tunnel_idle_timeout"`
}

// defaultConfig returns the table's defaults.
func defaultConfig() Config {
	return Config{MaxRetryBodyBytes: DefaultMaxRetryBodyBytes, StreamWriteTimeout: DefaultStreamWriteTimeout, TunnelIdleTimeout: DefaultTunnelIdleTimeout}
}

// Route is one [plugin.gateway.routes.<name>] table.
type Route struct {
	// Prefix is the path the route serves, with everything under it:
	// "/api/orders" serves /api/orders and /api/orders/…, not
	// /api/ordersx. It must start with "/" and must not end with one.
	// Required, unless pattern is set.
	Prefix string `koanf:"prefix"`

	// Pattern is a chi pattern the route serves instead of a prefix, such as
	// "/api/orders/{id}/receipt" or "/api/files/*"; the path is sent on as
	// received (after base_url's own path). It must start with a fixed
	// segment; it cannot be set with prefix, strip_prefix or rewrite_prefix.
	// Defaults to "" (the route serves its prefix).
	Pattern string `koanf:"pattern"`

	// Upstream names the [plugin.http.upstreams.<name>] the route goes to:
	// its base_url, deadlines, retries, retry budget, breaker, bulkhead,
	// TLS and connection pool are the route's. Required.
	Upstream string `koanf:"upstream"`

	// StripPrefix removes the prefix before the path is sent on
	// (/api/orders/42 goes to <base_url>/42). Defaults to false (the path is
	// sent as received, after base_url's own path).
	StripPrefix bool `koanf:"strip_prefix"`

	// RewritePrefix replaces the prefix with this path before the path is
	// sent on ("/orders" sends /api/orders/42 as /orders/42). It must start
	// with "/"; it cannot be set with strip_prefix. Defaults to "" (no
	// rewrite).
	RewritePrefix string `koanf:"rewrite_prefix"`

	// Methods are the methods the route accepts, from GET, HEAD, POST,
	// PUT, PATCH, DELETE and OPTIONS; any other gets a 405 problem listing
	// them. Defaults to none listed, which accepts those seven: TRACE,
	// CONNECT and the WebDAV methods are never proxied (see validMethods).
	Methods []string `koanf:"methods"`

	// ForwardAuthorization sends the client's Authorization header on to
	// the upstream. Off, the header is removed: a credential meant for the
	// gateway is not handed to every service behind it. Defaults to false.
	ForwardAuthorization bool `koanf:"forward_authorization"`

	// Stream marks a route whose responses may last longer than
	// app.request_timeout: server-sent events, long downloads, WebSocket
	// connections. Its requests are not cut by app.request_timeout (nor a
	// caller's Jfast-Timeout-Ms); the upstream's read_timeout still cuts a
	// response that goes silent, its timeout bounds the wait for the
	// response's headers (attempts and retries) but not the body that
	// follows, and each write to the client must finish within
	// stream_write_timeout. A WebSocket upgrade becomes a tunnel on every
	// route once the upstream answers 101 (tunnel_idle_timeout bounds it).
	// Defaults to false.
	Stream bool `koanf:"stream"`

	// MaxBodyBytes is the largest request body the route accepts, in place
	// of app.max_body_bytes; a larger one gets a 413 problem. Defaults to
	// 0, which keeps app.max_body_bytes.
	MaxBodyBytes int64 `koanf:"max_body_bytes"`
}

// reservedPaths are the framework's own routes, which no gateway route may
// cover.
var reservedPaths = []string{"/live", "/ready", "/metrics"}

// validMethods are the methods a route may list, and those a route that
// lists none accepts. TRACE is not one: an upstream (or a server behind it)
// that answers it reflects the request, the client's cookies and the
// headers the gateway adds included, back to whoever sent it (cross-site
// tracing). CONNECT asks a proxy for a tunnel, which a route is not, and the
// WebDAV methods (PROPFIND, MKCOL, …) are for file servers, not services.
var validMethods = []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut,
	http.MethodPatch, http.MethodDelete, http.MethodOptions}

// validate reports every problem of the table to v, keys relative to
// [plugin.gateway]. Whether each upstream exists is for Start, which asks
// the http plugin.
func (c *Config) validate(v *framework.Validation) {
	v.Deadline("stream_write_timeout", c.StreamWriteTimeout)
	v.Deadline("tunnel_idle_timeout", c.TunnelIdleTimeout)
	if c.MaxRetryBodyBytes <= 0 {
		v.Error("max_retry_body_bytes", fmt.Sprintf("must be greater than zero, got %d", c.MaxRetryBodyBytes),
			"set a size in bytes such as 65536 (64 KiB); a request with a longer body is never retried")
	}
	for i, p := range c.TrustedProxies {
		if _, err := parseTrusted(p); err != nil {
			v.Error(fmt.Sprintf("trusted_proxies[%d]", i), fmt.Sprintf("%q is not an IP address or a network", p),
				`write an address such as "10.0.0.7" or a network such as "10.0.0.0/8"`)
		}
	}
	names := slices.Sorted(maps.Keys(c.Routes))
	for _, n := range names {
		r := c.Routes[n]
		key := "routes." + n
		if !routesTable.ValidateName(v, n) && framework.Unread(n) {
			continue // its name is its one error (see framework.Unread)
		}
		switch {
		case r.Pattern != "":
			validatePattern(v, key, r)
		case r.Prefix == "":
			v.Error(key+".prefix", "is missing", `set the path the route serves, such as "/api/orders" (or a chi pattern in pattern)`)
		case !strings.HasPrefix(r.Prefix, "/") || (len(r.Prefix) > 1 && strings.HasSuffix(r.Prefix, "/")):
			v.Error(key+".prefix", fmt.Sprintf("must start with / and not end with one, got %q", r.Prefix), `write it as "/api/orders"`)
		case strings.ContainsAny(r.Prefix, "{}*?#"):
			v.Error(key+".prefix", fmt.Sprintf("must be a plain path, got %q", r.Prefix), "remove the pattern characters; the route serves everything under its prefix")
		default:
			for _, reserved := range reservedPaths {
				if covers(r.Prefix, reserved) || covers(reserved, r.Prefix) {
					v.Error(key+".prefix", fmt.Sprintf("%q would shadow the framework's %s", r.Prefix, reserved),
						"choose a prefix outside /live, /ready and /metrics, such as \"/api\"")
				}
			}
		}
		if r.Upstream == "" {
			v.Error(key+".upstream", "is missing", "name an upstream configured as [plugin.http.upstreams.<name>]")
		}
		if r.RewritePrefix != "" {
			if r.StripPrefix {
				v.Error(key+".rewrite_prefix", "cannot be set with strip_prefix", "keep one: strip_prefix removes the prefix, rewrite_prefix replaces it")
			}
			if !strings.HasPrefix(r.RewritePrefix, "/") {
				v.Error(key+".rewrite_prefix", fmt.Sprintf("must start with /, got %q", r.RewritePrefix), `write it as "/orders"`)
			}
		}
		for _, m := range r.Methods {
			if !slices.Contains(validMethods, m) {
				v.Error(key+".methods", fmt.Sprintf("%q is not a method a route can list", m),
					"use "+strings.Join(validMethods, ", ")+" (in capitals)")
			}
		}
		if r.MaxBodyBytes < 0 {
			v.Error(key+".max_body_bytes", fmt.Sprintf("must be zero (app.max_body_bytes) or more, got %d", r.MaxBodyBytes), "set a size in bytes such as 104857600 (100 MiB)")
		}
	}
	// Two routes whose prefixes nest would send one path to two upstreams
	// depending on the router's rules: refused, so the table says where each
	// path goes.
	// A pattern is compared by its fixed part, before its first parameter.
	for i, a := range names {
		for _, b := range names[i+1:] {
			ka, pa := c.Routes[a].path()
			kb, pb := c.Routes[b].path()
			if pa == "" || pb == "" {
				continue
			}
			if covers(pa, pb) || covers(pb, pa) {
				v.Error("routes."+b+"."+kb, fmt.Sprintf("%q overlaps routes.%s.%s (%q)", pb, a, ka, pa),
					"give the routes paths that do not contain each other, such as \"/api/orders\" and \"/api/billing\"")
			}
		}
	}
}

// path returns the key that places the route (prefix or pattern) and the
// fixed path it covers: the prefix, or a pattern's part before its first
// parameter or wildcard.
func (r Route) path() (key, fixed string) {
	if r.Pattern == "" {
		return "prefix", r.Prefix
	}
	fixed = r.Pattern
	if i := strings.IndexAny(fixed, "{*"); i >= 0 {
		fixed = fixed[:i]
	}
	return "pattern", strings.TrimSuffix(fixed, "/")
}

// validatePattern checks a route given by a chi pattern.
func validatePattern(v *framework.Validation, key string, r Route) {
	_, fixed := r.path()
	switch {
	case r.Prefix != "":
		v.Error(key+".pattern", "cannot be set with prefix", "keep one: prefix serves a path and everything under it, pattern one chi pattern")
	case !strings.HasPrefix(r.Pattern, "/"):
		v.Error(key+".pattern", fmt.Sprintf("must start with /, got %q", r.Pattern), `write it as "/api/orders/{id}"`)
	case fixed == "":
		v.Error(key+".pattern", fmt.Sprintf("must start with a fixed segment, got %q", r.Pattern),
			`begin it with a path of its own, such as "/api/orders/{id}": a leading parameter would take every path`)
	default:
		for _, reserved := range reservedPaths {
			if covers(fixed, reserved) || covers(reserved, fixed) {
				v.Error(key+".pattern", fmt.Sprintf("%q would shadow the framework's %s", r.Pattern, reserved),
					"choose a pattern outside /live, /ready and /metrics, such as \"/api/orders/{id}\"")
			}
		}
	}
	if r.StripPrefix || r.RewritePrefix != "" {
		v.Error(key+".pattern", "cannot be set with strip_prefix or rewrite_prefix", "remove them: a pattern route sends the path as received")
	}
}

// covers reports whether the route prefix serves path: path is the prefix
// or below it.
func covers(prefix, path string) bool {
	if prefix == "/" {
		return true
	}
	return path == prefix || strings.HasPrefix(path, prefix+"/")
}

// parseTrusted parses one trusted_proxies entry.
func parseTrusted(s string) (netip.Prefix, error) {
	if p, err := netip.ParsePrefix(s); err == nil {
		return p.Masked(), nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, err
	}
	a = a.Unmap()
	return netip.PrefixFrom(a, a.BitLen()), nil
}

// routesTable is [plugin.gateway.routes], for the one wording of a name the
// rule refuses.
var routesTable = framework.NamedTable{Plugin: "gateway", Key: "routes", Noun: "route", Nouns: "routes"}
