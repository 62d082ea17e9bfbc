// Package gateway is jfast's reverse proxy: routes of a jfast service that
// send each request on to an upstream of the http plugin, through an
// httputil.ReverseProxy whose transport is that upstream's RoundTripper. A
// proxied request therefore gets what a call from the service's own code
// gets: the upstream's deadlines (and the caller's time left, sent on in
// Jfast-Timeout-Ms), retries only when safe and within the retry budget, the
// breaker, the bulkhead, the connection pool and TLS, the request ID and,
// with the telemetry plugin, a server span for the inbound request and a
// client span for the proxied call.
//
// # Example
//
//	[plugins]
//	enabled = ["http", "gateway"]
//
//	[plugin.http.upstreams.orders]
//	base_url = "http://orders:8020"
//
//	[plugin.gateway.routes.orders]
//	prefix = "/api/orders"
//	upstream = "orders"
//	rewrite_prefix = "/orders"
//
// GET /api/orders/42 is sent to http://orders:8020/orders/42. Bodies stream
// both ways; a request whose body may be sent again (a safe method, or an
// Idempotency-Key, with a body of at most max_retry_body_bytes) is retried
// by the upstream's rules, never once a byte of the response went to the
// client. A request that gets no response is answered with a 503
// problem+json naming the route and the upstream; the upstream's own
// responses, errors included, pass through as they are.
//
// What a client cannot do through it: escape a route's prefix with dot
// segments (refused 400), override the method, claim an address (X-Real-IP,
// X-Forwarded-* from peers outside trusted_proxies), set the upstream's
// deadline, or hold upstream places with an Upgrade header the upstream does
// not accept: only its 101 makes a tunnel, which holds a place in the
// upstream's max_concurrent until it ends or idles for tunnel_idle_timeout.
//
// The plugin needs the http plugin, and checks at boot that every route's
// upstream is one of its [plugin.http.upstreams]. docs/gateway.md has every
// key, default and decision, and what is tested.
package gateway
