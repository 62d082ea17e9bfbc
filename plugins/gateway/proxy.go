package gateway

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/netip"
	"net/textproto"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/framework/resilience"
	"github.com/jfastframework/jfast/problem"
	"github.com/jfastframework/jfast/requestid"
)

// route is one configured route, ready to serve: an httputil.ReverseProxy
// over its upstream's RoundTripper, which brings the upstream's deadlines,
// retries, retry budget, breaker, bulkhead and pool.
type route struct {
	name     string
	cfg      Route
	p        *Plugin
	base     *url.URL // the upstream's base_url
	basePath string   // its escaped path, without a trailing "/"
	target   string   // what replaces the prefix: the prefix, "", or rewrite_prefix
	asIs     bool     // basePath+target is the prefix: the path is sent on as it came
	template string   // the route as a breaker_key = "route" breaker names it: the prefix or the pattern
	breaker  *resilience.Breaker
	// routeBreaker returns the breaker the route's calls go through (its
	// own with breaker_key = "route"), for /ready; nil: breaker.
	routeBreaker func(route string) *resilience.Breaker
	bulkhead     *resilience.Bulkhead                             // the upstream's: tunnels hold a place in it
	timeout      time.Duration                                    // the upstream's: it bounds a body read before the call too
	interim      func(context.Context, int, textproto.MIMEHeader) // rt.seeInterim, bound once
	m            *routeMetrics
	rp           *httputil.ReverseProxy
}

func (p *Plugin) newRoute(name string, rc Route, h framework.HTTPUpstreams, m *metrics) (*route, error) {
	up, err := h.ProxiedUpstream(rc.Upstream)
	if err != nil {
		return nil, err
	}
	base, err := url.Parse(up.BaseURL)
	if err != nil {
		return nil, fmt.Errorf("http: upstream '%s' has a base_url that does not parse: check [plugin.http.upstreams.%s] base_url", rc.Upstream, rc.Upstream)
	}
	r := &route{
		name: name, cfg: rc, p: p, base: base, breaker: up.Breaker, routeBreaker: up.RouteBreaker, bulkhead: up.Bulkhead, timeout: up.Timeout, m: m.forRoute(name),
		basePath: strings.TrimSuffix(base.EscapedPath(), "/"),
		target:   rc.Prefix,
		template: rc.Prefix,
	}
	if rc.Pattern != "" {
		r.template = rc.Pattern
	}
	switch {
	case rc.StripPrefix:
		r.target = ""
	case rc.RewritePrefix != "":
		r.target = strings.TrimSuffix(rc.RewritePrefix, "/")
	}
	r.asIs = r.basePath+r.target == rc.Prefix
	r.interim = r.seeInterim
	r.rp = &httputil.ReverseProxy{
		Rewrite:        r.rewrite,
		Transport:      handshakeTransport{up.Transport},
		BufferPool:     bufferPool{},
		ModifyResponse: r.response,
		ErrorHandler:   r.fail,
		ErrorLog:       slog.NewLogLogger(p.log.With("route", name, "upstream", rc.Upstream).Handler(), slog.LevelWarn),
	}
	return r, nil
}

// call is one proxied request's state, carried in its context so the
// ReverseProxy's hooks find it. Its framework.OutboundCall names the route to
// the upstream's RoundTripper, gives it the outgoing request's headers (the
// ReverseProxy's own copy) and counts its attempts.
type call struct {
	framework.OutboundCall
	start time.Time
	in    *http.Request // the client's request: its path is a problem's instance
	esc   string        // in's escaped path, computed once for refuse and rewrite
	// upgrade is a request asking to switch protocols. On a route that is
	// not a stream, handshake is the client request's context, which its
	// upstream call and any answer but a 101 are held to (handshakeTransport),
	// and cancel ends the call's own context, which has no deadline so that
	// a tunnel can outlive the request.
	upgrade   bool
	handshake context.Context
	cancel    context.CancelFunc
	rc        *http.ResponseController     // set for streams and upgrades
	upConn    atomic.Pointer[upstreamConn] // an upgrade's connection to the upstream, handed to its tunnel
	tun       *tunnel                      // the tunnel opened on a 101
	body      clientBody                   // the response body's wrapper, allocated with the call
	drained   bool                         // the App's drain cut the response body: the response is aborted
	observed  bool                         // its upstream latency is observed (once: a refused 101 reaches fail too)
	w         http.ResponseWriter          // the writer the ReverseProxy answers on
	// saved is w's header before the first interim response, which the
	// ReverseProxy clears; answered, that the final response (or the
	// failure) came, after which an interim response that arrives late, on
	// the transport's goroutine, leaves w alone. mu guards both.
	mu       sync.Mutex
	saved    http.Header
	answered bool
	fwd      forwardedBuf // the forwarding headers' values, allocated with the call
}

type callKey struct{}

func (c *call) Value(key any) any {
	if _, ok := key.(callKey); ok { // compares the type only: key == callKey{} calls the runtime's equality
		return c
	}
	return c.OutboundCall.Value(key)
}

// canceled reports whether the call ended because its client went away or
// the App drains, not at a deadline.
func (c *call) canceled() bool {
	return errors.Is(c.Err(), context.Canceled) ||
		c.handshake != nil && errors.Is(c.handshake.Err(), context.Canceled)
}

func callOf(ctx context.Context) *call {
	c, _ := ctx.Value(callKey{}).(*call)
	return c
}

// ServeHTTP proxies one request.
func (rt *route) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	esc := r.URL.EscapedPath()
	if p := refuse(r, esc); p != nil {
		problem.Write(w, r, p)
		rt.m.request(framework.ResponseStatus(w))
		return
	}
	ctx := r.Context()
	c := &call{start: time.Now(), in: r, esc: esc, upgrade: isUpgrade(r)}
	switch {
	case rt.cfg.Stream:
		// A stream (and a tunnel on a stream route) outlives
		// app.request_timeout and leaves the concurrency limit: it ends
		// when the client goes away, the upstream's deadlines (or
		// tunnel_idle_timeout) cut it, or the App drains.
		var cancel context.CancelFunc
		ctx, cancel = context.WithCancel(framework.StreamContext(r))
		defer cancel()
		// The upstream's timeout bounds the wait for the response
		// headers; the body lasts while it keeps coming (its read gap).
		ctx = framework.ContextWithOpenEndedResponse(ctx)
		stop := context.AfterFunc(rt.p.drain, cancel)
		defer stop()
		c.rc = http.NewResponseController(w)
		w = &streamWriter{ResponseWriter: w, rc: c.rc, gap: rt.p.cfg.StreamWriteTimeout}
	case c.upgrade:
		// An upgrade on a route that is not a stream is an ordinary
		// request until the upstream answers 101: it keeps its slot of the
		// concurrency limit, and its upstream call and any other answer are
		// held to the request's context and the upstream's timeout
		// (handshakeTransport). Only the call's own context, which the
		// ReverseProxy ties the upstream's connection to after a 101, is
		// free of the request's deadline; openTunnel gives it the client
		// connection's life.
		var cancel context.CancelFunc
		ctx, cancel = context.WithCancel(context.WithoutCancel(ctx))
		defer cancel()
		stop := context.AfterFunc(rt.p.drain, cancel)
		defer stop()
		c.rc = http.NewResponseController(w)
		c.handshake, c.cancel = r.Context(), cancel
	}
	c.Context, c.Route, c.OwnedHeader, c.Interim, c.w = ctx, rt.template, true, rt.interim, w

	if err := rt.bufferBody(w, r); err != nil {
		problem.Write(w, r, problem.From(err))
		rt.m.request(framework.ResponseStatus(w))
		return
	}
	if r.GetBody == nil && r.Body != nil && r.Body != http.NoBody && r.ContentLength != 0 {
		// Streamed: a call that ends while the upstream's RoundTripper
		// waits on the client's next bytes interrupts that wait.
		c.InterruptBody = c.interruptBody
	}
	aborted := rt.proxy(w, r.WithContext(c))
	if sw, ok := w.(*streamWriter); ok && aborted == nil && c.tun == nil {
		// What net/http writes after the handler returns (a bodiless
		// answer's headers, a chunked body's end, its trailers) gets the
		// window of a write: the answer may come, or end, long after the
		// last one.
		sw.extend()
	}
	if c.tun != nil {
		// The ReverseProxy wrote the upstream's 101 on the hijacked
		// connection, past w: the access log and the metrics say so.
		framework.SetHijackedStatus(w, http.StatusSwitchingProtocols)
	}
	c.tun.close()
	if n := c.Attempts(); n > 1 {
		rt.m.retries.Add(float64(n - 1))
	}
	if aborted != nil && !c.body.gone && errors.Is(c.in.Context().Err(), context.Canceled) {
		// The write to the client failed (net/http then ends the
		// request's context) before any read from the upstream saw it:
		// the client left a download, which clientBody did not count.
		rt.clientGone(c.in, "while the response body was sent", context.Cause(c.in.Context()))
	}
	rt.m.request(framework.ResponseStatus(w))
	if aborted != nil {
		panic(aborted) // after the metrics: the response went out, cut
	}
	if c.drained {
		// The drain cut a stream whose client is still reading: the
		// connection closes without the body's end (no last chunk), so a
		// cut download cannot be taken for a complete one.
		panic(http.ErrAbortHandler)
	}
}

// proxy runs the ReverseProxy, which aborts the response
// (http.ErrAbortHandler) when copying its body fails after the headers
// went out: the upstream broke off or went silent, or the client could
// not take it. It returns that panic's value, for the request to be
// counted before the abort goes on.
func (rt *route) proxy(w http.ResponseWriter, r *http.Request) (aborted any) {
	defer func() {
		if v := recover(); v != nil {
			if v != http.ErrAbortHandler { // the value panicked, compared as net/http does
				panic(v)
			}
			aborted = v
		}
	}()
	rt.rp.ServeHTTP(w, r)
	return nil
}

// refuse returns the problem a request is answered with before anything is
// sent upstream, or nil: a path (esc, r's escaped path) holding a dot
// segment, which an upstream that normalises paths would resolve outside
// the route's prefix; and a declared Content-Length over the body limit,
// after which the connection is closed at once
// (framework.DeclaredBodyTooLarge).
func refuse(r *http.Request, esc string) *problem.Problem {
	if hasDotSegment(esc) {
		return problem.New(http.StatusBadRequest, `the path holds a "." or ".." segment (or its percent-encoded form): send the path it resolves to`)
	}
	if err := framework.DeclaredBodyTooLarge(r); err != nil {
		return problem.From(err)
	}
	return nil
}

// hasDotSegment reports whether the escaped path p has a "." or ".."
// segment, raw or percent-encoded ("%2E%2E", ".%2e"), counting "/" and "\"
// inside a segment (encoded or not) as separators, as some servers do, and
// a segment whose part before its first ";" is one ("..;", "..;x=1"):
// Tomcat and the servlet containers after it remove a segment's path
// parameters before resolving dot segments, so "/api/keep/..;/x" is
// "/api/x" to them.
func hasDotSegment(p string) bool {
	if !strings.Contains(p, ".") && !strings.Contains(p, "%") {
		return false // the common path: nothing to decode
	}
	for seg := range strings.SplitSeq(p, "/") {
		if !strings.ContainsAny(seg, ".%") {
			continue
		}
		dec, err := url.PathUnescape(seg)
		if err != nil {
			return true // a malformed escape: not a path anyone means
		}
		for part := range strings.FieldsFuncSeq(dec, func(r rune) bool { return r == '/' || r == '\\' }) {
			part, _, _ = strings.Cut(part, ";") // its path parameters off
			if part == "." || part == ".." {
				return true
			}
		}
	}
	return false
}

// bufferBody makes a request that may be retried replayable: the upstream's
// RoundTripper retries a request with a body only when it can get the body
// again (GetBody). A body of at most max_retry_body_bytes is read into
// memory first; a longer one is streamed, the bytes already read first, and
// the request is never retried. Requests that may not be retried anyway (a
// POST or PATCH without an Idempotency-Key) are streamed as they come.
//
// The read is held to the upstream's timeout, as a streamed body is by the
// call that copies it: the connection's read deadline is the sooner of that
// and the request's (the framework's) while it lasts, so a client that
// trickles a small body gets its 408 when the call would have ended. A body
// read to its end leaves the deadline to net/http, which clears it to hear
// the client go away; one still coming gets the request's back.
func (rt *route) bufferBody(w http.ResponseWriter, r *http.Request) error {
	if r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 {
		return nil
	}
	if !mayRetry(r) {
		return nil
	}
	limit := rt.p.cfg.MaxRetryBodyBytes
	if r.ContentLength > limit {
		return nil
	}
	size := limit + 1
	if r.ContentLength > 0 {
		size = r.ContentLength + 1
	}
	buf := bytes.NewBuffer(make([]byte, 0, size))
	requestDeadline, _ := r.Context().Deadline()
	var rc *http.ResponseController
	if at := time.Now().Add(rt.timeout); rt.timeout > 0 && (requestDeadline.IsZero() || at.Before(requestDeadline)) {
		rc = http.NewResponseController(w)
		_ = rc.SetReadDeadline(at)
	}
	_, err := io.Copy(buf, io.LimitReader(r.Body, limit+1))
	if err != nil {
		return err
	}
	b := buf.Bytes()
	if int64(len(b)) > limit {
		if rc != nil {
			_ = rc.SetReadDeadline(requestDeadline)
		}
		// Longer than the limit, still coming: sent as a stream.
		r.Body = struct {
			io.Reader
			io.Closer
		}{io.MultiReader(bytes.NewReader(b), r.Body), r.Body}
		return nil
	}
	_ = r.Body.Close()
	r.ContentLength = int64(len(b))
	r.Body = io.NopCloser(bytes.NewReader(b))
	r.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil }
	return nil
}

// interruptBody is the call's OutboundCall.InterruptBody when the client's
// body is streamed: the connection's read deadline is moved into the past,
// so the Read waiting on the client fails at once (the framework's 408, the
// body having not arrived in time) instead of when the request's deadline
// passes, which kept the call, its bulkhead place and the connection that
// long after the 408 was due.
func (c *call) interruptBody() {
	rc := c.rc // a stream's or an upgrade's, made for the writer under c.w
	if rc == nil {
		rc = http.NewResponseController(c.w)
	}
	_ = rc.SetReadDeadline(time.Unix(1, 0))
}

// mayRetry reports whether the upstream's rules could retry r: a method safe
// to repeat, or a request carrying an Idempotency-Key.
func mayRetry(r *http.Request) bool {
	switch r.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodPut, http.MethodDelete:
		return true
	}
	return r.Header.Get("Idempotency-Key") != ""
}

// rewrite aims the outgoing request at the upstream and sets what travels
// with it. The ReverseProxy has already removed the hop-by-hop headers and
// the inbound Forwarded and X-Forwarded-* headers.
func (rt *route) rewrite(pr *httputil.ProxyRequest) {
	in, out := pr.In, pr.Out
	out.URL.Scheme = rt.base.Scheme
	out.URL.Host = rt.base.Host
	out.Host = ""
	c := callOf(out.Context())
	var esc string
	if c != nil {
		esc = c.esc
	} else {
		esc = in.URL.EscapedPath()
	}
	rest, ok := strings.CutPrefix(esc, rt.cfg.Prefix)
	if !ok { // the prefix is escaped differently in this request
		rest = strings.TrimPrefix(in.URL.Path, rt.cfg.Prefix)
	}
	p := esc // the common route: no base path, the prefix kept
	if !ok || !rt.asIs {
		p = rt.basePath + rt.target + rest
	}
	switch {
	case p == esc && p != "" && in.URL.RawPath == "":
		// The path as it came, which net/http escapes as the client did
		// (it keeps no RawPath then): out.URL, a copy of in.URL, already
		// says it, without unescaping it again here and, because of a
		// RawPath, once more when the request is written.
	case p == "":
		out.URL.Path, out.URL.RawPath = "/", "/"
	default:
		if u, err := url.PathUnescape(p); err == nil {
			out.URL.Path, out.URL.RawPath = u, p
		} else {
			out.URL.Path, out.URL.RawPath = p, ""
		}
	}

	// The query as the client wrote it: the ReverseProxy drops the
	// parameters url.ParseQuery refuses (a ";", a bad escape) and writes
	// the rest again, sorted, when any is; the gateway reads no parameter,
	// so it has nothing to disagree with the upstream about.
	out.URL.RawQuery = in.URL.RawQuery
	h := out.Header
	claims := rt.dropInbound(h)
	// The request ID sent on is the one the gateway accepted or made.
	var buf *forwardedBuf
	if c != nil {
		buf = &c.fwd
	}
	if trusted := rt.p.forwarded(in, h, requestid.FromContext(in.Context()), buf); claims && !trusted {
		dropClaims(h)
	}
}

// dropInbound removes, in one pass over the outgoing header h (net/http's
// canonical names), what a client may not send on: Authorization unless the
// route forwards it; Jfast-Timeout-Ms, the client's own time budget (the
// RoundTripper sends what is left of the call's, and a stream route sends
// none); the method overrides frameworks read to replace a request's method
// (Rails, Symfony, Express's method-override, Spring), which would turn a
// route's allowed method into another on an upstream that honours one; and
// every Proxy-* header (isProxyHeader).
//
// A name holding "_" is read with "-" for it (dashed), and removed when it
// is one of those or another the gateway removes or sets itself: a
// forwarding header, X-Real-Ip, X-Request-Id, a hop-by-hop one. net/http
// keeps X_Real_IP apart from X-Real-Ip, but CGI, WSGI, PHP and Rack servers
// read both as HTTP_X_REAL_IP, so it would pass for the other. nginx drops
// every name with "_" by default; the gateway drops these only, and a name
// without one costs a single scan.
//
// It reports whether h holds a claim only a trusted proxy may make
// (isClaim): forwarded finds out who the peer is, and dropClaims removes
// them when it is not a trusted proxy.
func (rt *route) dropInbound(h http.Header) (claims bool) {
	for k := range h {
		name := k
		if strings.IndexByte(k, '_') >= 0 {
			name = dashed(k)
		}
		switch name {
		case "Authorization":
			if !rt.cfg.ForwardAuthorization {
				delete(h, k)
			}
		case framework.TimeoutHeader, "X-Http-Method-Override", "X-Http-Method", "X-Method-Override":
			delete(h, k)
		case "X-Forwarded-For", "X-Forwarded-Proto", "X-Forwarded-Host", "X-Real-Ip", "X-Request-Id", "Keep-Alive", "Transfer-Encoding":
			// Spelled with "-", these are the ReverseProxy's to remove
			// (the hop-by-hop ones, the forwarding ones) and forwarded's
			// to set, or keep from a trusted proxy.
			if name != k {
				delete(h, k)
			}
		default:
			if isProxyHeader(name) {
				delete(h, k)
			} else if isClaim(name) {
				claims = true
			}
		}
	}
	return claims
}

// isClaim reports whether k, a canonical header name, is a claim about the
// request's client or its original URL that upstream frameworks read from
// the proxy in front of them: every X-Forwarded-* but the three the gateway
// sets (Port, Prefix, Ssl, Scheme, Server, Uri, …: Spring, Symfony, Rails
// and Django build links and redirects from them), the original URL's
// headers (X-Original-Url, X-Rewrite-Url, X-Original-Uri: Symfony, Zend
// and IIS route by them in place of the request's path, past the route's
// prefix), the scheme's (X-Url-Scheme, Front-End-Https) and the client
// address's that are not X-Real-Ip (forwarded's): X-Client-Ip,
// True-Client-Ip, X-Cluster-Client-Ip. Only a trusted proxy may say them.
func isClaim(k string) bool {
	if len(k) < 12 { // "X-Client-Ip" and "X-Forwarded" are the shortest
		return len(k) == 11 && (k == "X-Client-Ip" || k == "X-Forwarded")
	}
	if k[:12] == "X-Forwarded-" {
		switch k[12:] {
		case "For", "Proto", "Host": // forwarded's
			return false
		}
		return true
	}
	switch k {
	case "X-Original-Url", "X-Rewrite-Url", "X-Original-Uri", "X-Url-Scheme", "Front-End-Https",
		"True-Client-Ip", "X-Cluster-Client-Ip":
		return true
	}
	return false
}

// dropClaims removes from h, in any spelling, the claims isClaim names:
// the peer is not a trusted proxy.
func dropClaims(h http.Header) {
	for k := range h {
		name := k
		if strings.IndexByte(k, '_') >= 0 {
			name = dashed(k)
		}
		if isClaim(name) {
			delete(h, k)
		}
	}
}

// dashed returns the canonical form of the header name k with each "_" read
// as "-": X_real_ip is X-Real-Ip.
func dashed(k string) string { return http.CanonicalHeaderKey(strings.ReplaceAll(k, "_", "-")) }

// isProxyHeader reports whether k is a Proxy-* header, or Proxy itself. The
// ReverseProxy removes the hop-by-hop ones it knows (Proxy-Authorization,
// Proxy-Connection, Proxy-Authenticate); the rest are for a proxy, and the
// gateway is that proxy, so none is sent on either way. Proxy alone is for
// no one: a CGI upstream reads it as HTTP_PROXY, which many HTTP clients
// take for the proxy to send their own calls through ("httpoxy").
func isProxyHeader(k string) bool {
	return len(k) >= 5 && strings.EqualFold(k[:5], "Proxy") && (len(k) == 5 || k[5] == '-')
}

// forwarded sets X-Forwarded-For, -Proto, -Host and Forwarded on h for in,
// and X-Request-Id to id unless it is "". The inbound forwarding headers are
// kept, and extended, only when the peer is one of trusted_proxies;
// otherwise the client could claim any address. It runs on every request:
// the five values share one slice, the client's address is the inbound
// RemoteAddr's own text when that is already canonical, and Forwarded is
// written in one buffer. The values and that buffer are buf's (the call's,
// allocated with it; nil: new ones), written once and never changed.
//
// It reports whether the peer is a trusted proxy.
func (p *Plugin) forwarded(in *http.Request, h http.Header, id string, buf *forwardedBuf) (trusted bool) {
	if buf == nil {
		buf = new(forwardedBuf)
	}
	client := in.RemoteAddr
	var addr netip.Addr
	if ap, err := netip.ParseAddrPort(in.RemoteAddr); err == nil {
		addr = ap.Addr()
		if addr.Is4() {
			// netip parses only the canonical text of an IPv4 address
			// (no leading zeros, four fields), so the host part is it.
			client = in.RemoteAddr[:strings.LastIndexByte(in.RemoteAddr, ':')]
		} else {
			addr = addr.Unmap()
			client = canonicalHost(in.RemoteAddr, addr)
		}
	} else if host, _, err := net.SplitHostPort(in.RemoteAddr); err == nil {
		client = host
	}
	for _, pr := range p.trusted {
		if addr.IsValid() && pr.Contains(addr) {
			trusted = true
			break
		}
	}
	proto := "http"
	if in.TLS != nil {
		proto = "https"
	}
	xff, xproto, xhost, prior := client, proto, in.Host, ""
	if !trusted {
		// Only a trusted proxy may say who the client is.
		delete(h, "X-Real-Ip")
	}
	if trusted {
		// What the trusted proxy sent for this hop, less the headers its
		// Connection header names: those were for the gateway alone.
		if v := hopValues(in.Header, "X-Forwarded-For"); len(v) > 0 {
			xff = strings.Join(v, ", ") + ", " + client
		}
		if v := hopValues(in.Header, "X-Forwarded-Proto"); len(v) > 0 && v[0] != "" {
			xproto = v[0]
		}
		if v := hopValues(in.Header, "X-Forwarded-Host"); len(v) > 0 && v[0] != "" {
			xhost = v[0]
		}
		if v := hopValues(in.Header, "Forwarded"); len(v) > 0 {
			prior = strings.Join(v, ", ") + ", "
		}
	}
	fwd := append(buf.b[:0], prior...) // on the heap instead when longer than buf.b
	fwd = append(fwd, "for="...)
	if addr.Is6() {
		// An IPv6 node is bracketed, and so always quoted.
		fwd = append(append(append(fwd, `"[`...), client...), `]"`...)
	} else {
		fwd = appendForwardedValue(fwd, client)
	}
	fwd = append(append(fwd, ";proto="...), proto...)
	if in.Host != "" {
		fwd = appendForwardedValue(append(fwd, ";host="...), in.Host)
	}
	// The names are written as net/http keeps them, without canonicalising
	// them again on every request.
	buf.v = [5]string{xff, xproto, unsafe.String(&fwd[0], len(fwd)), xhost, id}
	v := buf.v[:]
	h["X-Forwarded-For"] = v[0:1:1]
	h["X-Forwarded-Proto"] = v[1:2:2]
	h["Forwarded"] = v[2:3:3]
	if xhost != "" {
		h["X-Forwarded-Host"] = v[3:4:4]
	}
	if id != "" {
		h["X-Request-Id"] = v[4:5:5]
	}
	return trusted
}

// hopValues returns h's values of name, a canonical header name, or nil
// when h's Connection header names it: such a header is hop-by-hop, for
// this hop alone, and is not passed on or taken as the client's.
func hopValues(h http.Header, name string) []string {
	v := h[name]
	if len(v) == 0 {
		return nil
	}
	for _, c := range h["Connection"] {
		for f := range strings.SplitSeq(c, ",") {
			if strings.EqualFold(strings.TrimSpace(f), name) {
				return nil
			}
		}
	}
	return v
}

// canonicalHost returns addr as text: the host part of remote (an
// address:port it was parsed from) when that is the same text, which it is
// for what net/http sets, else addr's own.
func canonicalHost(remote string, addr netip.Addr) string {
	host := remote
	if i := strings.LastIndexByte(host, ':'); i >= 0 {
		host = strings.TrimSuffix(strings.TrimPrefix(host[:i], "["), "]")
	}
	var buf [64]byte
	if string(addr.AppendTo(buf[:0])) == host {
		return host
	}
	return addr.String()
}

// appendForwardedValue appends v as an RFC 7239 value to b: a token as is,
// anything else (a host with a port) as an RFC 9110 quoted-string.
func appendForwardedValue(b []byte, v string) []byte {
	token := true
	for i := 0; i < len(v) && token; i++ {
		token = tchar[v[i]]
	}
	if token {
		return append(b, v...)
	}
	b = append(b, '"')
	start := 0 // v[start:i] is copied as it is
	for i := 0; i < len(v); i++ {
		if c := v[i]; c == '"' || c == '\\' {
			b = append(append(b, v[start:i]...), '\\')
			start = i
		}
	}
	return append(append(b, v[start:]...), '"')
}

// tchar holds the bytes of an RFC 9110 token: ALPHA, DIGIT and
// "!#$%&'*+-.^_`|~", so that each byte of a value is one lookup instead of
// three range tests and a search of that list.
var tchar = func() (t [256]bool) {
	for c := range t {
		t[c] = c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", byte(c)) >= 0
	}
	return t
}()

// forwardedBuf holds the forwarding headers' values of one request: the
// five values, and the Forwarded value's bytes (most fit).
type forwardedBuf struct {
	v [5]string
	b [96]byte
}

// response runs when the upstream's response headers arrive.
func (rt *route) response(resp *http.Response) error {
	c := callOf(resp.Request.Context())
	rt.observe(c)
	rt.restore(c)
	if len(resp.Trailer) > 0 {
		dropHop(resp.Trailer) // the trailers it announces
	}
	// The gateway's response already carries the request ID it sent on;
	// Proxy-* headers are for a proxy, and the gateway is that proxy.
	for k := range resp.Header {
		if k == "X-Request-Id" || isProxyHeader(k) {
			delete(resp.Header, k)
		}
	}
	if c == nil {
		return nil
	}
	if resp.StatusCode == http.StatusSwitchingProtocols {
		return rt.openTunnel(c, resp)
	}
	c.body = clientBody{ReadCloser: resp.Body, c: c, rt: rt, resp: resp}
	resp.Body = &c.body
	if resp.ContentLength > 0 && !rt.cfg.Stream && c.rc == nil && resp.Request.Method != http.MethodHead {
		return c.body.first()
	}
	return nil
}

// errCutBeforeBody is a response whose upstream broke off after its
// headers, before the first byte of its body.
var errCutBeforeBody = errors.New("broke off its response before the body")

// first reads the first byte of a body whose length the upstream declared,
// before the ReverseProxy writes the response's headers: net/http sends
// nothing of such a response before its body's first bytes either, so the
// client waits no longer. An upstream that breaks off before it is a
// failure the client is told of (fail), not a reply cut off before its
// status line. A client that went away meanwhile gets the empty body
// clientBody gives it.
func (b *clientBody) first() error {
	var one [1]byte
	n, err := io.ReadFull(b, one[:])
	switch {
	case n == 1:
		b.held, b.hasHeld = one[0], true
		return nil
	case b.gone:
		return nil
	case err == io.EOF:
		err = io.ErrUnexpectedEOF // a declared length, and nothing of it
	}
	var slow interface{ Timeout() bool }
	if errors.As(err, &slow) && slow.Timeout() {
		return err // it went silent: the problem says it did not answer in time
	}
	// The problem fail writes says what happened, not "unreachable": the
	// cause is kept as text, and fail finds errCutBeforeBody.
	return fmt.Errorf("%w: %v", errCutBeforeBody, err)
}

// clientBody is a response body on its way to the client. When the client
// goes away (or the App drains) the upstream read fails with the call's
// context: that is no failure of the upstream, so the body ends (io.EOF)
// instead of the ReverseProxy logging a read error, and the end is counted
// in jfast_gateway_client_gone_total with a debug line. A body the drain
// cut marks the call drained: ServeHTTP then aborts the response.
type clientBody struct {
	io.ReadCloser
	c    *call
	rt   *route
	gone bool
	resp *http.Response // its trailers, read with the body's end
	// held is the body's first byte, read before the headers went on
	// (first), which the next Read returns first.
	held    byte
	hasHeld bool
}

func (b *clientBody) Read(p []byte) (int, error) {
	if b.hasHeld && len(p) > 0 {
		b.hasHeld = false
		p[0] = b.held
		n, err := b.read(p[1:])
		return n + 1, err
	}
	return b.read(p)
}

func (b *clientBody) read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF && len(b.resp.Trailer) > 0 {
		dropHop(b.resp.Trailer) // the trailers it sent, announced or not
	}
	if err != nil && err != io.EOF && b.c.canceled() {
		if !b.gone {
			b.gone = true
			b.rt.clientGone(b.c.in, "while the response body was sent", err)
		}
		b.c.drained = b.rt.p.drain.Err() != nil
		return n, io.EOF
	}
	return n, err
}

// clientGone counts and logs, at debug, a request its client ended.
func (rt *route) clientGone(r *http.Request, when string, err error) {
	rt.m.clientGone.Inc()
	reason := "the client went away"
	if rt.p.drain.Err() != nil {
		reason = "the service is draining"
	}
	rt.p.log.LogAttrs(r.Context(), slog.LevelDebug, "gateway: "+reason+" "+when,
		slog.String("route", rt.name), slog.String("upstream", rt.cfg.Upstream),
		slog.String("error", framework.MaskSecrets(err.Error())))
}

// seeInterim is each call's framework.OutboundCall.Interim: it runs on an
// interim (1xx) response's header before the ReverseProxy copies it to the
// client's response and clears that (net/http keeps a response's header
// across a 1xx). It takes out what the gateway never passes on (dropHop),
// and keeps the response's header as it was before the first one, for
// restore.
func (rt *route) seeInterim(ctx context.Context, _ int, h textproto.MIMEHeader) {
	dropHop(http.Header(h))
	c := callOf(ctx)
	if c == nil {
		return
	}
	c.mu.Lock()
	if !c.answered && c.saved == nil {
		c.saved = c.w.Header().Clone()
	}
	c.mu.Unlock()
}

// restore gives the client's response back the header an interim response
// cleared (the request ID, what the service's middleware set), before the
// final response's or a problem's own are added, as without one.
func (rt *route) restore(c *call) {
	if c == nil {
		return
	}
	c.mu.Lock()
	saved := c.saved
	c.saved, c.answered = nil, true
	c.mu.Unlock()
	h := c.w.Header()
	for k, v := range saved {
		if _, ok := h[k]; !ok {
			h[k] = v
		}
	}
}

// dropHop removes from h, an upstream's interim response header, its 101's
// (openTunnel) or its trailers, what the gateway never passes on, as from a
// final response's header: the hop-by-hop headers (Connection and every
// header it names, Keep-Alive, TE, Trailer, Transfer-Encoding, Upgrade),
// every Proxy-* header, and the upstream's X-Request-Id (the client has the
// gateway's).
func dropHop(h http.Header) {
	for _, v := range h["Connection"] {
		for f := range strings.SplitSeq(v, ",") {
			if f = strings.TrimSpace(f); f != "" {
				delete(h, http.CanonicalHeaderKey(f))
			}
		}
	}
	for k := range h {
		switch k {
		case "Connection", "Keep-Alive", "Te", "Trailer", "Transfer-Encoding", "Upgrade", "X-Request-Id":
			delete(h, k)
		default:
			if isProxyHeader(k) {
				delete(h, k)
			}
		}
	}
}

// observe records the time from c's start to the upstream's response
// headers, or its failure, once per call.
func (rt *route) observe(c *call) {
	if c != nil && !c.observed {
		c.observed = true
		rt.m.latency.Observe(time.Since(c.start).Seconds())
	}
}

// fail answers a request that got no usable response from the upstream. It
// is never a bare 502: a problem+json naming the route and the upstream.
func (rt *route) fail(w http.ResponseWriter, r *http.Request, err error) {
	c := callOf(r.Context())
	rt.observe(c)
	rt.restore(c)
	// r is the request sent upstream; a problem's instance is the path the
	// client asked for, never the upstream's.
	client := r
	if c != nil {
		client = c.in
	}
	var tooLarge *http.MaxBytesError
	var bodyErr *framework.BodyReadError
	switch {
	case errors.As(err, &tooLarge):
		problem.Write(w, client, problem.From(tooLarge))
		return
	case errors.As(err, &bodyErr):
		// The client's body, late or broken off (the upstream's
		// RoundTripper counts it against no one): the rest of it cannot be
		// trusted to arrive, so the connection is not kept for it, and
		// not read either: net/http would read up to 256 KiB more of the
		// body once the answer is out, until the request's deadline, for
		// a client that trickles it. The read deadline passed, that read
		// fails at once and the connection closes after the 408 or 400.
		w.Header().Set("Connection", "close")
		_ = http.NewResponseController(w).SetReadDeadline(time.Unix(1, 0))
		problem.Write(w, client, problem.From(bodyErr))
		return
	case c != nil && c.canceled() && rt.p.drain.Err() != nil && c.in.Context().Err() == nil:
		// The drain ended a call whose client is still there (a stream
		// route's, which the drain ends at once): it is told so, not sent
		// a bare 499 it would take for a status.
		w.Header().Set("Connection", "close")
		problem.Write(w, client, problem.ServiceUnavailable("",
			fmt.Sprintf("route '%s': the service is shutting down: the call to upstream '%s' was not completed", rt.name, rt.cfg.Upstream), 0))
		return
	case (c != nil && c.canceled() || c == nil && errors.Is(r.Context().Err(), context.Canceled)) && !errors.Is(err, resilience.ErrOpen):
		// The client went away: nobody reads an answer. 499 ("client
		// closed request", as nginx logs it) tells the access log and the
		// metrics what happened; it is no upstream failure.
		if c := callOf(r.Context()); c != nil {
			rt.clientGone(c.in, "before the response headers", err)
		}
		w.WriteHeader(499)
		return
	}
	if errors.Is(err, resilience.ErrOpen) {
		rt.m.refusals.Inc()
	}
	p, ok := problem.As(err)
	if !ok {
		detail := "is unreachable"
		switch {
		case errors.Is(err, errTunnelRefused):
			detail = err.Error() // it answered, with a 101 not passed on
		case errors.Is(err, errCutBeforeBody):
			detail = errCutBeforeBody.Error()
		}
		p = problem.UpstreamFailed(rt.cfg.Upstream, fmt.Sprintf("upstream '%s' %s", rt.cfg.Upstream, detail), true, 0, err)
	}
	out := *p
	out.Extensions = make(map[string]any, len(p.Extensions)+3)
	for k, v := range p.Extensions {
		out.Extensions[k] = v
	}
	out.Extensions["route"] = rt.name
	for _, k := range [...]string{"dependency", "upstream"} {
		if _, ok := out.Extensions[k]; !ok {
			out.Extensions[k] = rt.cfg.Upstream
		}
	}
	out.Detail = "route '" + rt.name + "': " + p.Detail
	rt.p.log.LogAttrs(r.Context(), slog.LevelWarn, "gateway: no response from upstream",
		slog.String("route", rt.name), slog.String("upstream", rt.cfg.Upstream),
		slog.Int("status", out.Status), slog.String("error", framework.MaskSecrets(err.Error())))
	problem.Write(w, client, &out)
}

// isUpgrade reports whether r asks to switch protocols (a WebSocket).
func isUpgrade(r *http.Request) bool {
	// net/http's canonical names, looked up without canonicalising them
	// again on every request.
	if u := r.Header["Upgrade"]; len(u) == 0 || u[0] == "" {
		return false
	}
	for _, v := range r.Header["Connection"] {
		for _, t := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(t), "upgrade") {
				return true
			}
		}
	}
	return false
}

// streamWriter bounds each write to a stream route's client to gap
// (stream_write_timeout) from when it is asked for, in place of the
// request's deadline (plus framework.WriteGrace) the framework set on the
// connection, which a stream outlives.
type streamWriter struct {
	http.ResponseWriter
	rc  *http.ResponseController
	gap time.Duration
}

// WriteHeader moves the deadline too: net/http writes an interim (1xx)
// response at once, and a final one's headers with the first write, a
// flush or, for an answer without a body (a 204, a 304, an empty 200, a
// HEAD's), only after the handler returns (ServeHTTP then moves it again).
func (s *streamWriter) WriteHeader(code int) {
	s.extend()
	s.ResponseWriter.WriteHeader(code)
}

func (s *streamWriter) Write(b []byte) (int, error) {
	s.extend()
	return s.ResponseWriter.Write(b)
}

func (s *streamWriter) Flush() {
	s.extend()
	_ = s.rc.Flush()
}

// extend gives the next write gap from now.
func (s *streamWriter) extend() { _ = s.rc.SetWriteDeadline(time.Now().Add(s.gap)) }

func (s *streamWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// bufferPool lends the ReverseProxy its copy buffers, so a response does not
// allocate 32 KiB. The pool holds the buffers' arrays: a slice given back
// converts to its array's pointer without allocating, where a pointer to the
// slice would be a new allocation on every Put.
type bufferPool struct{}

const bufferSize = 32 << 10

var buffers = sync.Pool{New: func() any { return new([bufferSize]byte) }}

func (bufferPool) Get() []byte { return buffers.Get().(*[bufferSize]byte)[:] }

func (bufferPool) Put(b []byte) {
	if cap(b) == bufferSize {
		buffers.Put((*[bufferSize]byte)(b[:bufferSize]))
	}
}
