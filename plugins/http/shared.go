package http

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/framework/egress"
	"github.com/jfastframework/jfast/framework/resilience"
)

// SharedConfig is one [plugin.http.shared.<name>] table, or the argument of
// [NewSharedClient]: a client whose calls take absolute URLs (webhooks,
// third-party APIs) and keep one breaker, one retry budget and one bulkhead
// per origin (scheme, host and port), created on first use. Every key of an
// upstream applies per origin, except base_url and the instance keys (the
// calls name their URL) and forward_authorization (the caller's token must
// not go to every host): the validation refuses them ([SharedConfig.Applies]).
type SharedConfig struct {
	// Upstream is the policy keys, applied to every origin. Name names the
	// client in errors, metrics, logs and /ready; the plugin sets it from the
	// table's name.
	Upstream `koanf:",squash"`

	// MaxOrigins bounds the origins held: when a new origin would pass it,
	// the least recently used origin with no call in flight is dropped (its
	// breaker, budget and bulkhead are made afresh if it is called again).
	// Defaults to 1000.
	MaxOrigins int `koanf:"max_origins"`
	// AllowPrivate turns the address guard off: the client may connect to
	// any address, including loopback, private, link-local and this host's
	// own, which it refuses by default (a URL from outside, such as a
	// webhook's, must not reach the service's own network; docs/security.md
	// lists the ranges). Defaults to false.
	AllowPrivate bool `koanf:"allow_private"`
	// AllowOwnAddresses lets the client connect to this host's own
	// addresses (its network interfaces', read once at start) when they are
	// globally reachable: a public address of this host reaches its own
	// listeners, admin included. Defaults to false.
	AllowOwnAddresses bool `koanf:"allow_own_addresses"`
	// AllowHosts are host names (matched exactly, ignoring case), IP
	// addresses and networks ("10.1.0.0/16") the client may connect to even
	// when they are, or resolve to, such addresses. Defaults to none.
	AllowHosts []string `koanf:"allow_hosts"`
	// PropagateTo are the origins ("https://hooks.example.com", with a
	// port when not the scheme's default) that receive the calling
	// request's X-Request-ID and the time it has left (Jfast-Timeout-Ms).
	// Every other origin gets neither, even when the caller set them: a
	// third party learns nothing of this service's requests unless asked.
	// Defaults to none.
	PropagateTo []string `koanf:"propagate_to"`
}

// SetDefaults implements framework.Defaulter.
func (s *SharedConfig) SetDefaults() {
	s.Upstream.SetDefaults()
	s.MaxOrigins = DefaultMaxOrigins
}

// upstreamOnlyKeys are an upstream's keys a shared client refuses (see
// problems): its calls name their URL, so it has no base_url and no
// instances to list, discover or check, and the caller's token must not go
// to every host it calls.
var upstreamOnlyKeys = []string{"base_url", "instances", "discover", "resolve_every",
	"health_path", "health_every", "health_timeout", "forward_authorization"}

// Applies implements framework.ConditionalKeys: the config command and
// jfast new leave out of a shared table the upstream keys its validation
// refuses there, so what they print is what check accepts.
func (s SharedConfig) Applies(key string) bool {
	return !slices.Contains(upstreamOnlyKeys, key)
}

// withDefaults fills the zero fields of s, for NewSharedClient.
func (s SharedConfig) withDefaults() SharedConfig {
	if s.Name == "" {
		s.Name = "shared"
	}
	s.Upstream = s.Upstream.withDefaults()
	if s.MaxOrigins == 0 {
		s.MaxOrigins = DefaultMaxOrigins
	}
	return s
}

// problems returns every problem with s's settings, in key order.
func (s *SharedConfig) problems() []framework.ConfigError {
	var l framework.Problems
	if s.BaseURL != "" {
		l.Error("base_url", "is not a shared client's: its calls take absolute URLs",
			"remove it, or make this an [plugin.http.upstreams.<name>] table to call one service by path")
	}
	if s.ForwardAuthorization {
		l.Error("forward_authorization", "cannot be set on a shared client: it would send the caller's bearer token to every host the client calls",
			"remove it; forward the token only to an upstream of its audience")
	}
	s.Upstream.policyProblems(&l)
	s.instanceKeyProblems(&l)
	l.Positive("max_origins", s.MaxOrigins)
	for _, h := range s.AllowHosts {
		if !egress.ValidAllowHost(h) {
			l.Error("allow_hosts", fmt.Sprintf("%q is not a host name, an IP address or a network", h),
				`write a bare host such as "hooks.internal", an address such as "10.1.2.3" or a network such as "10.1.0.0/16", without a scheme or a port`)
		}
	}
	for _, o := range s.PropagateTo {
		if !validOrigin(o) {
			l.Error("propagate_to", fmt.Sprintf("%q is not an origin", o),
				`write a scheme and a host, with a port when not the scheme's default, such as "https://hooks.example.com" or "http://10.1.2.3:8080"`)
		}
	}
	return l
}

// SharedClient calls any origin by absolute URL, with the policies of its
// [SharedConfig] applied per origin: an outage of one origin opens only that
// origin's breaker, and a slow one fills only its own bulkhead. It refuses
// to connect to the service's own network unless told otherwise (see
// [ErrAddressNotAllowed]). Take it once at boot ([Shared]) or make one with
// [NewSharedClient]. A SharedClient is safe for concurrent use.
type SharedClient struct {
	*core
	verbs
	cfg       SharedConfig
	origins   *bounded[*policy]
	transport *sharedTransport
}

// NewSharedClient returns a shared client, for scripts and tests; a service
// takes its shared clients from the plugin with [Shared]. Zero fields of s
// take their defaults. Close the client when done with it.
func NewSharedClient(s SharedConfig, opts ...ClientOption) (*SharedClient, error) {
	return newSharedClient(s.withDefaults(), opts...)
}

// sharedIdleConns bounds a shared client's idle connections across origins.
const sharedIdleConns = 200

func newSharedClient(s SharedConfig, opts ...ClientOption) (*SharedClient, error) {
	var o clientOptions
	for _, opt := range opts {
		opt(&o)
	}
	o.wrappers = append(o.wrappers, propagation(s.PropagateTo))
	core, err := newCore(s.Upstream, s.problems(), o, sharedDial(s), sharedIdleConns)
	if err != nil {
		return nil, err
	}
	c := &SharedClient{core: core, cfg: s}
	c.origins = newBounded(s.MaxOrigins, func(p *policy) bool { return p.bulkhead.InFlight() > 0 })
	c.verbs = verbs{c.Do}
	c.transport = &sharedTransport{c: c}
	return c, nil
}

// Config returns the client's settings, defaults filled in.
func (c *SharedClient) Config() SharedConfig { return c.cfg }

// Origins returns how many origins the client holds a breaker, budget and
// bulkhead for (at most max_origins, plus any with calls in flight).
func (c *SharedClient) Origins() int { return c.origins.len() }

// Breaker returns the breaker of rawURL's origin, or nil when the client
// holds none for it (never called, or dropped).
func (c *SharedClient) Breaker(rawURL string) *resilience.Breaker {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil
	}
	if p, ok := c.origins.get(originOf(u)); ok {
		return p.breaker
	}
	return nil
}

// Close closes the idle connections; calls made after Close fail with
// [UpstreamUnavailable]. Calls in flight finish.
func (c *SharedClient) Close() error {
	c.close()
	return nil
}

// Do calls method on rawURL, an absolute http or https URL, through the
// breaker, budget and bulkhead of its origin. Bodies, options, the response
// and the errors are those of [ServiceClient.Do]. A URL that is not absolute
// http or https is a plain error, and nothing is sent.
func (c *SharedClient) Do(ctx context.Context, method, rawURL string, body any, opts ...CallOption) (*http.Response, error) {
	return c.do(ctx, c, method, rawURL, body, opts)
}

// resolve implements resolver: the policy of u's origin, made on first use.
func (c *SharedClient) resolve(u *url.URL, route string) (*policy, *resilience.Breaker, error) {
	if s := strings.ToLower(u.Scheme); (s != "http" && s != "https") || u.Hostname() == "" {
		// The URL itself is not repeated: it may carry a token.
		return nil, nil, fmt.Errorf("http: shared client '%s': the URL must be absolute http or https, with a host", c.up.Name)
	}
	origin := originOf(u)
	pol, ok := c.origins.get(origin)
	if !ok {
		pol = c.origins.add(origin, c.newPolicy(c.up.Name+" "+origin, origin, c.metrics.transitionOnly))
	}
	return pol, c.breakerFor(pol, route), nil
}

// Transport returns the client's policies as an http.RoundTripper, for an
// SDK or a reverse proxy: any origin, each through its own breaker, budget
// and bulkhead, with the address guard. See [ServiceClient.Transport] for
// what a RoundTrip does.
func (c *SharedClient) Transport() http.RoundTripper { return c.transport }

// HTTPClient returns an *http.Client over [SharedClient.Transport] that never
// follows redirects.
func (c *SharedClient) HTTPClient() *http.Client {
	return &http.Client{Transport: c.transport, CheckRedirect: noRedirects}
}

// sharedTransport is a SharedClient's RoundTripper.
type sharedTransport struct{ c *SharedClient }

// RoundTrip implements http.RoundTripper.
func (t *sharedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL == nil {
		closeRequestBody(req)
		return nil, fmt.Errorf("http: shared client '%s': the request has no URL", t.c.up.Name)
	}
	out := framework.OutboundCallOf(req.Context())
	pol, br, err := t.c.resolve(req.URL, routeOf(out))
	if err != nil {
		closeRequestBody(req)
		return nil, err
	}
	return t.c.roundTrip(req, out, pol, br)
}

// propagation returns the innermost wrapper of a shared client's transport:
// it removes X-Request-ID and Jfast-Timeout-Ms from a request to an origin
// not in propagateTo. It deletes them from the request's header itself: what
// reaches the transport is the call's own header (a copy of the caller's,
// made by the call or declared the call's by framework.OutboundCall), and a
// retry's attempt gets a copy of its own.
func propagation(propagateTo []string) TransportWrapper {
	to := make(map[string]bool, len(propagateTo))
	for _, o := range propagateTo {
		if u, err := url.Parse(o); err == nil {
			to[originOf(u)] = true
		}
	}
	return func(_ string, rt http.RoundTripper) http.RoundTripper {
		return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
			_, id := req.Header["X-Request-Id"]
			_, left := req.Header[framework.TimeoutHeader]
			if (!id && !left) || to[originOf(req.URL)] {
				return rt.RoundTrip(req)
			}
			delete(req.Header, "X-Request-Id")
			delete(req.Header, framework.TimeoutHeader)
			return rt.RoundTrip(req)
		})
	}
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// validOrigin reports whether o is an origin as propagate_to takes it:
// http or https, a host, an optional port, and nothing else.
func validOrigin(o string) bool {
	u, err := url.Parse(o)
	if err != nil || u.Hostname() == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" || (u.Path != "" && u.Path != "/") {
		return false
	}
	s := strings.ToLower(u.Scheme)
	return s == "http" || s == "https"
}
