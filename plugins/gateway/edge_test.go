package gateway_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/jfasttest"
)

// rawRequest writes req to the service over a new connection and returns
// the connection and a reader over it.
func rawRequest(t *testing.T, svcURL, req string) (net.Conn, *bufio.Reader) {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(svcURL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	if _, err := io.WriteString(conn, req); err != nil {
		t.Fatal(err)
	}
	return conn, bufio.NewReader(conn)
}

// eventually waits for cond, failing after bound.
func eventually(t *testing.T, bound time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(bound)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, bound)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// An Upgrade header is only a request until the upstream answers 101: an
// upstream that answers 200 (a large body, to a client that never reads)
// is held to app.request_timeout as any request, so the upstream's only
// place (max_concurrent = 1) comes back and the next GET is served.
func TestUpgradeAnsweredWithout101(t *testing.T) {
	t.Parallel()
	released := make(chan struct{}, 4)
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/big/next" {
			_, _ = io.WriteString(w, "next")
			return
		}
		chunk := []byte(strings.Repeat("x", 32<<10))
		for {
			if _, err := w.Write(chunk); err != nil {
				released <- struct{}{}
				return
			}
		}
	})
	// request_timeout is long enough that a busy machine delivers the
	// status line within it (read below, before the cut).
	svc := gatewayService(t, "[app]\nrequest_timeout = \"2s\"\n"+
		upstreamTOML("big", up.URL, "max_concurrent = 1", `bulkhead_wait = "50ms"`, `read_timeout = "30s"`, `timeout = "30s"`)+`
[plugin.gateway.routes.big]
prefix = "/big"
upstream = "big"
`)
	_, br := rawRequest(t, svc.URL, "GET /big/file HTTP/1.1\r\nHost: gw\r\nConnection: Upgrade\r\nUpgrade: foo\r\n\r\n")
	status, err := br.ReadString('\n')
	if err != nil || !strings.Contains(status, " 200 ") {
		t.Fatalf("status line %q, %v: want the upstream's 200", status, err)
	}
	// The client reads no more. The upstream's response is cut when the
	// request's deadline passes: nothing lifted it for a response that
	// switched nothing.
	select {
	case <-released:
	case <-time.After(10 * time.Second):
		t.Fatal("the upstream's response to an upgrade answered 200 was never cut: it holds the route's only place")
	}
	// The handler still holds the place until its write to the client,
	// which reads nothing, fails at the connection's write deadline.
	eventually(t, 10*time.Second, "the place given back", func() bool {
		r := svc.Get(t, "/big/next")
		return r.Status == 200 && string(r.Body) == "next"
	})
}

// wsEcho is a WebSocket echo handler: each message comes back after "echo: ".
func wsEcho(w http.ResponseWriter, r *http.Request) {
	c, err := websocket.Accept(w, r, nil)
	if err != nil {
		return
	}
	defer c.CloseNow()
	for {
		typ, msg, err := c.Read(r.Context())
		if err != nil {
			return
		}
		if err := c.Write(r.Context(), typ, append([]byte("echo: "), msg...)); err != nil {
			return
		}
	}
}

// WebSocket tunnels hold a place among the upstream's max_concurrent for as
// long as they last: with max_concurrent = 2 the third upgrade is refused
// with a 503 problem, nothing switched, and is served once a tunnel closes.
func TestTunnelsCountAgainstMaxConcurrent(t *testing.T) {
	t.Parallel()
	up := newUpstream(t, wsEcho)
	svc := gatewayService(t, upstreamTOML("chat", up.URL, "max_concurrent = 2", `bulkhead_wait = "50ms"`)+`
[plugin.gateway.routes.chat]
prefix = "/chat"
upstream = "chat"
`)
	ws := "ws" + strings.TrimPrefix(svc.URL, "http") + "/chat/room"
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var open []*websocket.Conn
	for range 2 {
		c, _, err := websocket.Dial(ctx, ws, nil)
		if err != nil {
			t.Fatalf("dial: %v", err)
		}
		defer c.CloseNow()
		open = append(open, c)
	}
	if n := metric(t, svc.Metrics(), "jfast_gateway_tunnels", "route", "chat"); n != 2 {
		t.Errorf("jfast_gateway_tunnels = %v, want 2", n)
	}
	_, resp, err := websocket.Dial(ctx, ws, nil)
	if err == nil || resp == nil || resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("a third tunnel through max_concurrent = 2: %v (%v), want 503", err, resp)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/problem+json" {
		t.Errorf("the refusal's Content-Type is %q", ct)
	}
	_ = open[0].Close(websocket.StatusNormalClosure, "done")
	eventually(t, 10*time.Second, "the closed tunnel's place given back", func() bool {
		return metric(t, svc.Metrics(), "jfast_gateway_tunnels", "route", "chat") == 1
	})
	c, _, err := websocket.Dial(ctx, ws, nil)
	if err != nil {
		t.Fatalf("dial once a tunnel closed: %v", err)
	}
	defer c.CloseNow()
	if err := c.Write(ctx, websocket.MessageText, []byte("hi")); err != nil {
		t.Fatal(err)
	}
	if _, msg, err := c.Read(ctx); err != nil || string(msg) != "echo: hi" {
		t.Fatalf("echo: %q %v", msg, err)
	}
}

// A tunnel with no byte either way for tunnel_idle_timeout (on the test
// clock) is closed, and its place given back.
func TestTunnelIdleTimeout(t *testing.T) {
	t.Parallel()
	up := newUpstream(t, wsEcho)
	clock := jfasttest.NewClock()
	svc := gatewayService(t, upstreamTOML("chat", up.URL, "max_concurrent = 1")+`
[plugin.gateway]
tunnel_idle_timeout = "2m"
[plugin.gateway.routes.chat]
prefix = "/chat"
upstream = "chat"
`, func(o *jfasttest.Options) { o.Clock = clock })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(svc.URL, "http")+"/chat/room", nil)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	defer c.CloseNow()
	if err := c.Write(ctx, websocket.MessageText, []byte("hi")); err != nil {
		t.Fatal(err)
	}
	if _, msg, err := c.Read(ctx); err != nil || string(msg) != "echo: hi" {
		t.Fatalf("echo: %q %v", msg, err)
	}
	clock.Advance(2*time.Minute - time.Second)
	if err := c.Write(ctx, websocket.MessageText, []byte("still here")); err != nil {
		t.Fatal(err)
	}
	if _, msg, err := c.Read(ctx); err != nil || string(msg) != "echo: still here" {
		t.Fatalf("a tunnel used within tunnel_idle_timeout was cut: %q %v", msg, err)
	}
	clock.Advance(2 * time.Minute)
	if _, _, err := c.Read(ctx); err == nil || ctx.Err() != nil {
		t.Fatalf("read on an idle tunnel: %v (ctx %v), want the tunnel closed", err, ctx.Err())
	}
	eventually(t, 10*time.Second, "the idle tunnel's place given back", func() bool {
		return metric(t, svc.Metrics(), "jfast_gateway_tunnels", "route", "chat") == 0
	})
	if n := metric(t, svc.Metrics(), "jfast_gateway_tunnels_idle_closed_total", "route", "chat"); n != 1 {
		t.Errorf("jfast_gateway_tunnels_idle_closed_total = %v, want 1", n)
	}
}

// A path with a dot segment, raw or percent-encoded, is refused with a 400
// problem before anything is sent: an upstream that normalises paths would
// serve it outside the route's prefix. Dots inside a segment pass.
func TestDotSegmentsRefused(t *testing.T) {
	t.Parallel()
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {})
	svc := gatewayService(t, upstreamTOML("orders", up.URL)+`
[plugin.gateway.routes.orders]
prefix = "/api/orders"
upstream = "orders"
rewrite_prefix = "/orders"
[plugin.gateway.routes.events]
prefix = "/api/events"
upstream = "orders"
methods = ["GET"]
`)
	for _, path := range []string{
		"/api/orders/../billing/x",
		"/api/orders/%2E%2E/%2E%2E/admin",
		"/api/orders/%2e%2e/admin",
		"/api/orders/.%2E/admin",
		"/api/orders/%2E./admin",
		"/api/events/../orders/1",
		"/api/orders/./x",
		"/api/orders/%2E/x",
		"/api/orders/x/..",
		"/api/orders/..%2Fadmin",
		"/api/orders/..%5Cadmin",
		"/api/orders/..\\admin",
		"/api/orders/x%2F..%2F..%2Fadmin",
		"/api/orders/..;/admin",
		"/api/orders/%2E%2E;jsessionid=1/admin",
	} {
		r := rawGet(t, svc.URL, path)
		if r.StatusCode != http.StatusBadRequest || r.Header.Get("Content-Type") != "application/problem+json" {
			t.Errorf("%s: %d %s, want a 400 problem", path, r.StatusCode, r.Header.Get("Content-Type"))
		}
	}
	if n := up.hits.Load(); n != 0 {
		t.Errorf("the upstream got %d requests, last %s", n, up.last.Load().URL.EscapedPath())
	}
	for _, path := range []string{"/api/orders/a..b", "/api/orders/.well-known/x", "/api/orders/%2Efoo", "/api/orders/...", "/api/orders/v1.2", "/api/orders/a..;b"} {
		if r := rawGet(t, svc.URL, path); r.StatusCode != 200 {
			t.Errorf("%s: %d, want 200", path, r.StatusCode)
		}
	}
}

// rawGet sends GET path exactly as written (no client-side cleaning) and
// reads the response head.
func rawGet(t *testing.T, svcURL, path string) *http.Response {
	t.Helper()
	conn, br := rawRequest(t, svcURL, "GET "+path+" HTTP/1.1\r\nHost: gw\r\nConnection: close\r\n\r\n")
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = conn.Close()
	return resp
}

// A problem's instance is the path the client asked for, never the
// upstream's rewritten one.
func TestProblemInstanceIsTheClientsPath(t *testing.T) {
	t.Parallel()
	down := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {})
	down.Close()
	svc := gatewayService(t, upstreamTOML("billing", down.URL, "attempts = 1")+`
[plugin.gateway.routes.billing]
prefix = "/api/billing"
upstream = "billing"
rewrite_prefix = "/invoices"
`)
	r := svc.Get(t, "/api/billing/0")
	p := problemOf(t, r)
	if r.Status != 503 || p["instance"] != "/api/billing/0" {
		t.Errorf("%d, instance %v: want 503 with the client's path /api/billing/0", r.Status, p["instance"])
	}
}

// What a client may not send on: a method override (X-HTTP-Method-Override,
// X-HTTP-Method, X-Method-Override), X-Real-IP (from a peer that is not a
// trusted proxy), Proxy-* headers, and on a stream route its own
// Jfast-Timeout-Ms. Proxy-* headers of the upstream's response are removed
// too.
func TestClientHeadersDropped(t *testing.T) {
	t.Parallel()
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Proxy-Status", "upstream")
		w.Header().Set("X-Kept", "1")
	})
	svc := gatewayService(t, upstreamTOML("orders", up.URL)+`
[plugin.gateway.routes.orders]
prefix = "/api/orders"
upstream = "orders"
methods = ["GET"]
[plugin.gateway.routes.events]
prefix = "/api/events"
upstream = "orders"
stream = true
`)
	for _, path := range []string{"/api/orders/1", "/api/events"} {
		r := svc.Get(t, path,
			"X-HTTP-Method-Override", "DELETE", "X-HTTP-Method", "DELETE", "X-Method-Override", "DELETE",
			"X-Real-IP", "10.9.9.9", "Proxy-Foo", "bar", "Proxy-Authorization", "Basic eDp5",
			framework.TimeoutHeader, "3000", "X-Other", "kept")
		if r.Status != 200 {
			t.Fatalf("%s: %d", path, r.Status)
		}
		got := up.last.Load().Header
		for _, h := range []string{"X-Http-Method-Override", "X-Http-Method", "X-Method-Override", "X-Real-Ip", "Proxy-Foo", "Proxy-Authorization"} {
			if v := got.Get(h); v != "" {
				t.Errorf("%s: the upstream got %s: %s", path, h, v)
			}
		}
		if got.Get("X-Other") != "kept" {
			t.Errorf("%s: X-Other did not pass", path)
		}
		if path == "/api/events" && got.Get(framework.TimeoutHeader) != "" {
			t.Errorf("a stream route's upstream got the client's %s: %s", framework.TimeoutHeader, got.Get(framework.TimeoutHeader))
		}
		if r.Header.Get("Proxy-Status") != "" || r.Header.Get("X-Kept") != "1" {
			t.Errorf("%s: response headers %v", path, r.Header)
		}
	}
}

// A Proxy header, which a CGI upstream reads as HTTP_PROXY and many HTTP
// clients then take for their own outbound proxy ("httpoxy"), never reaches
// the upstream, in any spelling; a header that only starts with the letters
// passes.
func TestProxyHeaderIsDropped(t *testing.T) {
	t.Parallel()
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {})
	svc := gatewayService(t, upstreamTOML("orders", up.URL)+`
[plugin.gateway.routes.orders]
prefix = "/api/orders"
upstream = "orders"
`)
	for _, name := range []string{"Proxy", "proxy", "PROXY"} {
		if r := svc.Get(t, "/api/orders/1", name, "http://127.0.0.1:9", "Proxyish", "kept"); r.Status != 200 {
			t.Fatalf("%s: %d", name, r.Status)
		}
		got := up.last.Load().Header
		if v := got.Get("Proxy"); v != "" {
			t.Errorf("%s: the upstream got Proxy: %s", name, v)
		}
		if got.Get("Proxyish") != "kept" {
			t.Errorf("%s: Proxyish did not pass", name)
		}
	}
}

// X-Real-IP from a trusted proxy passes.
func TestRealIPFromTrustedProxy(t *testing.T) {
	t.Parallel()
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {})
	svc := gatewayService(t, upstreamTOML("orders", up.URL)+`
[plugin.gateway]
trusted_proxies = ["127.0.0.0/8", "::1"]
[plugin.gateway.routes.orders]
prefix = "/api/orders"
upstream = "orders"
`)
	if r := svc.Get(t, "/api/orders/1", "X-Real-IP", "203.0.113.7"); r.Status != 200 {
		t.Fatal(r.Status)
	}
	if got := up.last.Load().Header.Get("X-Real-Ip"); got != "203.0.113.7" {
		t.Errorf("X-Real-IP from a trusted proxy: %q", got)
	}
}

// A header the gateway removes or sets itself, spelled with "_" for "-"
// (X_Real_IP, x_http_method_override), never reaches the upstream, from a
// client or a trusted proxy alike: net/http keeps it as another header
// (X_real_ip), but CGI, WSGI, PHP and Rack servers read X_Real_IP and
// X-Real-IP alike (HTTP_X_REAL_IP), so it would claim an address, turn an
// allowed GET into a DELETE or forge the request ID. Another header with an
// "_" passes.
func TestUnderscoreSpellingsOfDroppedHeadersDropped(t *testing.T) {
	t.Parallel()
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {})
	untrusted := gatewayService(t, upstreamTOML("orders", up.URL)+`
[plugin.gateway.routes.open]
prefix = "/open"
upstream = "orders"
methods = ["GET"]
`)
	trustedUp, trusted := trustedGateway(t)
	spelled := []string{
		"X_Forwarded_For: 6.6.6.6", "X_Forwarded_Proto: https", "X_Forwarded_Host: evil.example",
		"X_Real_IP: 6.6.6.6", "X-Real_Ip: 6.6.6.6", "x_http_method_override: DELETE", "X_HTTP_Method: DELETE",
		"X_Method_Override: DELETE", "X_Request_Id: forged", "Jfast_Timeout_Ms: 1",
		"Proxy_Authorization: Basic eDp5", "Keep_Alive: timeout=1", "Transfer_Encoding: gzip",
	}
	for _, g := range []struct {
		name string
		svc  *jfasttest.Service
		up   *upstream
	}{{"untrusted client", untrusted, up}, {"trusted proxy", trusted, trustedUp}} {
		_, br := rawRequest(t, g.svc.URL, "GET /open/x HTTP/1.1\r\nHost: gw\r\n"+
			strings.Join(spelled, "\r\n")+"\r\nX_Custom_Thing: kept\r\n\r\n")
		resp, err := http.ReadResponse(br, nil)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("%s: %v %v", g.name, resp, err)
		}
		_ = resp.Body.Close()
		got := g.up.last.Load()
		for k, v := range got.Header {
			if strings.Contains(k, "_") && k != "X_custom_thing" {
				t.Errorf("%s: the upstream got %s: %q", g.name, k, v)
			}
		}
		if v := got.Header.Get("X_Custom_Thing"); v != "kept" {
			t.Errorf("%s: X_Custom_Thing = %q, want it passed on", g.name, v)
		}
		if got.Method != http.MethodGet || got.Header.Get("X-Forwarded-For") != "127.0.0.1" || got.Header.Get("X-Real-Ip") != "" {
			t.Errorf("%s: the upstream got %s, X-Forwarded-For %q, X-Real-IP %q", g.name,
				got.Method, got.Header.Get("X-Forwarded-For"), got.Header.Get("X-Real-Ip"))
		}
	}
}

// The claims about the client and the original URL that frameworks read
// from the proxy in front of them (X-Forwarded-Port, -Prefix, -Ssl,
// X-Original-URL, …) pass from a trusted proxy and are dropped, in any
// spelling, from anyone else: an upstream that routes by X-Original-URL
// would otherwise serve a path outside the route's prefix.
func TestClaimsOnlyFromTrustedProxies(t *testing.T) {
	t.Parallel()
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {})
	untrusted := gatewayService(t, upstreamTOML("orders", up.URL)+`
[plugin.gateway.routes.open]
prefix = "/open"
upstream = "orders"
`)
	trustedUp, trusted := trustedGateway(t)
	claims := map[string]string{
		"X-Forwarded-Port": "443", "X-Forwarded-Prefix": "/evil", "X-Forwarded-Ssl": "on",
		"X-Forwarded-Scheme": "https", "X-Forwarded-Server": "evil.example", "X-Forwarded": "for=6.6.6.6",
		"X-Original-Url": "/admin", "X-Rewrite-Url": "/admin", "X-Original-Uri": "/admin",
		"X-Url-Scheme": "https", "Front-End-Https": "on", "X-Client-Ip": "6.6.6.6",
		"True-Client-Ip": "6.6.6.6", "X-Cluster-Client-Ip": "6.6.6.6",
	}
	var lines []string
	for k, v := range claims {
		lines = append(lines, k+": "+v)
	}
	lines = append(lines, "x_original_url: /admin", "X-Forwarded_Prefix: /evil")
	for _, g := range []struct {
		name    string
		svc     *jfasttest.Service
		up      *upstream
		trusted bool
	}{{"untrusted client", untrusted, up, false}, {"trusted proxy", trusted, trustedUp, true}} {
		_, br := rawRequest(t, g.svc.URL, "GET /open/x HTTP/1.1\r\nHost: gw\r\n"+strings.Join(lines, "\r\n")+"\r\n\r\n")
		resp, err := http.ReadResponse(br, nil)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("%s: %v %v", g.name, resp, err)
		}
		_ = resp.Body.Close()
		got := g.up.last.Load()
		for k, v := range claims {
			if want := map[bool]string{true: v}[g.trusted]; got.Header.Get(k) != want {
				t.Errorf("%s: the upstream got %s = %q, want %q", g.name, k, got.Header.Get(k), want)
			}
		}
		for _, k := range []string{"X_original_url", "X-Forwarded_prefix"} {
			if v, ok := got.Header[k]; ok != g.trusted {
				t.Errorf("%s: the upstream got %s = %q", g.name, k, v)
			}
		}
		if v := got.Header.Get("X-Forwarded-For"); v == "" || v == "6.6.6.6" {
			t.Errorf("%s: X-Forwarded-For = %q, want the gateway's", g.name, v)
		}
	}
}

// A declared Content-Length over the route's body limit is answered 413
// before anything is sent upstream — no connection is even opened — and
// the client's connection is closed (the body was not read).
func TestDeclaredBodyOverLimit(t *testing.T) {
	t.Parallel()
	var conns atomic.Int64
	up := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
	}))
	up.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	up.Start()
	t.Cleanup(up.Close)
	svc := gatewayService(t, upstreamTOML("orders", up.URL)+`
[plugin.gateway.routes.orders]
prefix = "/api/orders"
upstream = "orders"
max_body_bytes = 10
`)
	body := strings.Repeat("x", 100)
	_, br := rawRequest(t, svc.URL, fmt.Sprintf("POST /api/orders HTTP/1.1\r\nHost: gw\r\nContent-Length: %d\r\n\r\n%s", len(body), body))
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 413 || resp.Header.Get("Content-Type") != "application/problem+json" || !resp.Close {
		t.Errorf("%d %s close=%v, want a 413 problem closing the connection", resp.StatusCode, resp.Header.Get("Content-Type"), resp.Close)
	}
	// The upstream accepts connections in order, each counted before it is
	// served: once a later request is served, a connection the refused one
	// opened would have been counted.
	if r := svc.Get(t, "/api/orders/2"); r.Status != 200 {
		t.Fatalf("a later GET: %d", r.Status)
	}
	if n := conns.Load(); n != 1 {
		t.Errorf("the upstream accepted %d connections, want 1 (the later GET's)", n)
	}
}

// A client that closes its event stream is no upstream failure: no WARN is
// logged, and the end is counted in jfast_gateway_client_gone_total.
func TestClientGoneIsNotAnUpstreamFailure(t *testing.T) {
	t.Parallel()
	ended := make(chan struct{})
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		defer close(ended)
		w.Header().Set("Content-Type", "text/event-stream")
		rc := http.NewResponseController(w)
		fmt.Fprint(w, "data: 0\n\n")
		_ = rc.Flush()
		<-r.Context().Done()
	})
	svc := gatewayService(t, upstreamTOML("orders_events", up.URL)+`
[plugin.gateway.routes.events]
prefix = "/api/events"
upstream = "orders_events"
stream = true
`)
	resp, err := http.Get(svc.URL + "/api/events")
	if err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	if err != nil || line != "data: 0\n" {
		t.Fatalf("first event: %q %v", line, err)
	}
	_ = resp.Body.Close()
	select {
	case <-ended:
	case <-time.After(10 * time.Second):
		t.Fatal("the upstream's stream was not cancelled when the client left")
	}
	eventually(t, 10*time.Second, "the client's leaving counted", func() bool {
		return metric(t, svc.Metrics(), "jfast_gateway_client_gone_total", "route", "events") == 1
	})
	if logs := svc.Logs(); strings.Contains(logs, "WARN") || strings.Contains(logs, "ERROR") {
		t.Errorf("a client leaving was logged as a failure:\n%s", logs)
	}
}

// A client that leaves a plain (not stream) download is no upstream
// failure either: the gateway's write to it fails before any read from the
// upstream sees the request's end, and the abort that follows is counted in
// jfast_gateway_client_gone_total, with no WARN.
func TestClientLeavingADownloadIsCounted(t *testing.T) {
	t.Parallel()
	ended := make(chan struct{})
	up := newUpstream(t, func(w http.ResponseWriter, _ *http.Request) {
		defer close(ended)
		chunk := []byte(strings.Repeat("x", 32<<10))
		for {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	})
	svc := gatewayService(t, upstreamTOML("files", up.URL)+`
[plugin.gateway.routes.files]
prefix = "/files"
upstream = "files"
`)
	conn, br := rawRequest(t, svc.URL, "GET /files/big HTTP/1.1\r\nHost: gw\r\n\r\n")
	if status, err := br.ReadString('\n'); err != nil || !strings.Contains(status, " 200 ") {
		t.Fatalf("status line %q, %v: want the upstream's 200", status, err)
	}
	_ = conn.Close()
	select {
	case <-ended:
	case <-time.After(10 * time.Second):
		t.Fatal("the upstream's response was not cut when the client left")
	}
	eventually(t, 10*time.Second, "the client's leaving counted", func() bool {
		return metric(t, svc.Metrics(), "jfast_gateway_client_gone_total", "route", "files") == 1
	})
	if logs := svc.Logs(); strings.Contains(logs, "WARN") || strings.Contains(logs, "ERROR") {
		t.Errorf("a client leaving was logged as a failure:\n%s", logs)
	}
}
