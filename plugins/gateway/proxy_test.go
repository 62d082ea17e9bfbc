package gateway_test

import (
	"context"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jfastframework/jfast/jfasttest"
)

// Paths are sent on as configured: kept, stripped or rewritten, after
// base_url's own path, with the query; methods not listed get a 405.
func TestPaths(t *testing.T) {
	t.Parallel()
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, r.URL.RequestURI())
	})
	svc := gatewayService(t, upstreamTOML("orders", up.URL)+upstreamTOML("based", up.URL+"/base/")+`
[plugin.gateway.routes.kept]
prefix = "/api/kept"
upstream = "orders"
[plugin.gateway.routes.stripped]
prefix = "/api/stripped"
upstream = "orders"
strip_prefix = true
[plugin.gateway.routes.rewritten]
prefix = "/api/orders"
upstream = "based"
rewrite_prefix = "/orders"
methods = ["GET", "POST"]
[plugin.gateway.routes.receipts]
pattern = "/api/receipts/{id}/pdf"
upstream = "orders"
`)
	for path, want := range map[string]string{
		"/api/kept/1?x=y":          "/api/kept/1?x=y",
		"/api/kept":                "/api/kept",
		"/api/kept/a%2Fb":          "/api/kept/a%2Fb",
		"/api/kept/a%20b":          "/api/kept/a%20b",
		"/api/kept/caf%C3%A9":      "/api/kept/caf%C3%A9",
		"/api/kept/x!y/%7Eu":       "/api/kept/x!y/%7Eu",
		"/api/stripped/a/b":        "/a/b",
		"/api/stripped":            "/",
		"/api/orders/42?full=1":    "/base/orders/42?full=1",
		"/api/orders/a%2Fb":        "/base/orders/a%2Fb",
		"/api/orders":              "/base/orders",
		"/api/receipts/7/pdf?dl=1": "/api/receipts/7/pdf?dl=1",
		// The query as it came, parameters url.ParseQuery refuses included.
		"/api/kept/q?b=2&a=1;c=3":   "/api/kept/q?b=2&a=1;c=3",
		"/api/kept/q?x=%zz&b=1&a=2": "/api/kept/q?x=%zz&b=1&a=2",
		"/api/kept/q?q=50%&z=1":     "/api/kept/q?q=50%&z=1",
	} {
		if got := svc.Get(t, path); got.Status != 200 || got.String() != want {
			t.Errorf("GET %s: %d %q, want 200 %q", path, got.Status, got.Body, want)
		}
	}
	if got := svc.Get(t, "/api/receipts/7"); got.Status != 404 {
		t.Errorf("GET /api/receipts/7: %d, want 404 (not the pattern)", got.Status)
	}
	if got := svc.Get(t, "/api/keptx"); got.Status != 404 {
		t.Errorf("GET /api/keptx: %d, want 404 (not under the prefix)", got.Status)
	}
	if got := svc.Do(t, http.MethodDelete, "/api/orders/42", ""); got.Status != 405 {
		t.Errorf("DELETE on a GET, POST route: %d, want 405", got.Status)
	}
}

// TE and Trailer are hop-by-hop, with the two exceptions the ReverseProxy
// makes on purpose: a client's "TE: trailers" is sent on (any other TE value
// is not), and an upstream's trailers reach the client, announced in a
// Trailer header the gateway writes.
func TestTrailersPassThrough(t *testing.T) {
	t.Parallel()
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Trailer", "X-Checksum")
		_, _ = io.WriteString(w, "body")
		w.Header().Set("X-Checksum", "c0ffee")
	})
	svc := gatewayService(t, upstreamTOML("orders", up.URL)+`
[plugin.gateway.routes.orders]
prefix = "/api/orders"
upstream = "orders"
`)
	for te, want := range map[string]string{"trailers, gzip": "trailers", "gzip": ""} {
		req, _ := http.NewRequest(http.MethodGet, svc.URL+"/api/orders/1", nil)
		req.Header.Set("TE", te)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if got := up.last.Load().Header.Get("Te"); got != want {
			t.Errorf("client TE %q: upstream got TE %q, want %q", te, got, want)
		}
		if string(body) != "body" || resp.Trailer.Get("X-Checksum") != "c0ffee" {
			t.Errorf("client got %q with trailers %v, want the body and X-Checksum: c0ffee", body, resp.Trailer)
		}
	}
}

// A route that lists no methods serves GET, HEAD, POST, PUT, PATCH, DELETE
// and OPTIONS, the methods a route can list; TRACE (which would reflect the
// request back), CONNECT and WebDAV's methods get a 405 problem whose Allow
// lists those seven, and nothing reaches the upstream. A route that lists
// methods allows only those.
func TestMethods(t *testing.T) {
	t.Parallel()
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, r.Method)
	})
	svc := gatewayService(t, upstreamTOML("orders", up.URL)+`
[plugin.gateway.routes.all]
prefix = "/api/all"
upstream = "orders"
[plugin.gateway.routes.read]
prefix = "/api/read"
upstream = "orders"
methods = ["GET", "HEAD"]
`)
	const seven = "GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS"
	for _, m := range strings.Split(seven, ", ") {
		if got := svc.Do(t, m, "/api/all/1", ""); got.Status != 200 {
			t.Errorf("%s on a route that lists no methods: %d, want 200", m, got.Status)
		}
	}
	served := up.hits.Load()
	for _, tc := range []struct{ method, path, allow string }{
		{"TRACE", "/api/all/1", seven},
		{"PROPFIND", "/api/all/1", seven},
		{"MKCOL", "/api/all", seven},
		{"TRACE", "/api/read/1", "GET, HEAD"},
		{"DELETE", "/api/read/1", "GET, HEAD"},
	} {
		got := svc.Do(t, tc.method, tc.path, "")
		if got.Status != 405 || got.Header.Get("Allow") != tc.allow {
			t.Errorf("%s %s: %d Allow %q, want 405 Allow %q", tc.method, tc.path, got.Status, got.Header.Get("Allow"), tc.allow)
			continue
		}
		problemOf(t, got)
	}
	if n := up.hits.Load() - served; n != 0 {
		t.Errorf("the upstream got %d refused requests", n)
	}
}

// What travels: the request ID, X-Forwarded-*/Forwarded (a client's own
// are replaced when it is not a trusted proxy), the caller's time left, no
// hop-by-hop header either way, Authorization only where configured.
func TestHeaders(t *testing.T) {
	t.Parallel()
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Connection", "X-Secret-Hop")
		w.Header().Set("X-Secret-Hop", "1")
		w.Header().Set("Keep-Alive", "timeout=5")
		w.Header().Set("X-Request-ID", "the-upstream-must-not-win")
		w.Header().Set("X-Upstream", "yes")
		_, _ = io.WriteString(w, "ok")
	})
	svc := gatewayService(t, "[app]\nrequest_timeout = \"7s\"\n"+upstreamTOML("orders", up.URL)+`
[plugin.gateway.routes.open]
prefix = "/open"
upstream = "orders"
[plugin.gateway.routes.authed]
prefix = "/authed"
upstream = "orders"
forward_authorization = true
`)
	resp := svc.Get(t, "/open/x", "X-Request-ID", "req-123", "Authorization", "Bearer secret",
		"X-Forwarded-For", "6.6.6.6", "X-Forwarded-Host", "evil.example", "Forwarded", "for=6.6.6.6",
		"Connection", "X-Hop", "X-Hop", "1", "Jfast-Timeout-Ms", "3000")
	if resp.Status != 200 || resp.Header.Get("X-Upstream") != "yes" {
		t.Fatalf("%d %s", resp.Status, resp.Body)
	}
	got := up.last.Load().Header
	host := strings.TrimPrefix(svc.URL, "http://")
	wantHeaders(t, got, map[string]string{
		"X-Request-Id":      "req-123",
		"Authorization":     "",
		"X-Forwarded-For":   "127.0.0.1",
		"X-Forwarded-Proto": "http",
		"X-Forwarded-Host":  host,
		"Forwarded":         `for=127.0.0.1;proto=http;host="` + host + `"`,
		"X-Hop":             "",
	})
	ms, err := strconv.Atoi(got.Get("Jfast-Timeout-Ms"))
	if err != nil || ms <= 0 || ms > 3000 {
		t.Errorf("upstream got Jfast-Timeout-Ms = %q, want the caller's time left (at most 3000)", got.Get("Jfast-Timeout-Ms"))
	}
	if v := resp.Header.Values("X-Request-Id"); len(v) != 1 || v[0] != "req-123" {
		t.Errorf("response X-Request-ID = %q, want the gateway's one", v)
	}
	for _, h := range []string{"X-Secret-Hop", "Keep-Alive"} {
		if v := resp.Header.Get(h); v != "" {
			t.Errorf("response carries hop-by-hop %s = %q", h, v)
		}
	}

	// A made request ID travels too; Authorization does on this route.
	resp = svc.Get(t, "/authed/x", "Authorization", "Bearer secret")
	got = up.last.Load().Header
	if got.Get("Authorization") != "Bearer secret" {
		t.Errorf("authed route: upstream got Authorization %q", got.Get("Authorization"))
	}
	if id := got.Get("X-Request-Id"); id == "" || id != resp.Header.Get("X-Request-Id") {
		t.Errorf("made request ID: upstream got %q, client %q", id, resp.Header.Get("X-Request-Id"))
	}
}

// trustedGateway starts an upstream and a gateway in front of it, route
// "/open", that trusts the proxies on 127.0.0.0/8 (the tests' own client).
func trustedGateway(t *testing.T) (*upstream, *jfasttest.Service) {
	t.Helper()
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {})
	return up, gatewayService(t, upstreamTOML("orders", up.URL)+`
[plugin.gateway]
trusted_proxies = ["127.0.0.0/8"]
[plugin.gateway.routes.open]
prefix = "/open"
upstream = "orders"
`)
}

// wantHeaders checks that got, the header an upstream got, has each
// header's values (joined with ",") as want says; "" for none.
func wantHeaders(t *testing.T, got http.Header, want map[string]string) {
	t.Helper()
	for name, w := range want {
		if v := strings.Join(got[name], ","); v != w {
			t.Errorf("upstream got %s = %q, want %q", name, v, w)
		}
	}
}

// A trusted proxy's forwarding headers are kept and extended.
func TestTrustedProxies(t *testing.T) {
	t.Parallel()
	up, svc := trustedGateway(t)
	svc.Get(t, "/open", "X-Forwarded-For", "203.0.113.9", "X-Forwarded-Proto", "https",
		"X-Forwarded-Host", "shop.example", "Forwarded", `for=203.0.113.9;proto=https`)
	got := up.last.Load().Header
	host := strings.TrimPrefix(svc.URL, "http://")
	wantHeaders(t, got, map[string]string{
		"X-Forwarded-For":   "203.0.113.9, 127.0.0.1",
		"X-Forwarded-Proto": "https",
		"X-Forwarded-Host":  "shop.example",
		"Forwarded":         `for=203.0.113.9;proto=https, for=127.0.0.1;proto=http;host="` + host + `"`,
	})
}

// A forwarding header the trusted proxy's Connection header names was for
// this hop alone: it is neither kept nor extended, as X-Real-IP named so is
// not sent on; the gateway says who the client is from what it saw.
func TestTrustedProxyConnectionNamedForwardingHeaders(t *testing.T) {
	t.Parallel()
	up, svc := trustedGateway(t)
	svc.Get(t, "/open", "Connection", "X-Forwarded-For, forwarded, X-Real-IP, X-Forwarded-Proto", "X-Forwarded-For", "203.0.113.9",
		"Forwarded", "for=203.0.113.9", "X-Real-IP", "203.0.113.9", "X-Forwarded-Proto", "https", "X-Forwarded-Host", "shop.example")
	got := up.last.Load().Header
	host := strings.TrimPrefix(svc.URL, "http://")
	wantHeaders(t, got, map[string]string{
		"X-Forwarded-For":   "127.0.0.1",
		"X-Forwarded-Proto": "http",
		"X-Forwarded-Host":  "shop.example", // not named: the trusted proxy's
		"Forwarded":         `for=127.0.0.1;proto=http;host="` + host + `"`,
		"X-Real-Ip":         "",
	})
}

// An upstream's own 5xx passes through as it is; no response at all is a
// 503 problem naming the route and the upstream, never a bare 502.
func TestFailures(t *testing.T) {
	t.Parallel()
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		w.WriteHeader(500)
		_, _ = io.WriteString(w, "upstream's own error")
	})
	silent := jfasttest.SilentServer(t)
	svc := gatewayService(t, upstreamTOML("orders", up.URL)+
		upstreamTOML("down", "http://127.0.0.1:1", "attempts = 1")+
		upstreamTOML("silent", "http://"+silent, "attempts = 1", `read_timeout = "300ms"`)+`
[plugin.gateway.routes.orders]
prefix = "/orders"
upstream = "orders"
[plugin.gateway.routes.down]
prefix = "/down"
upstream = "down"
[plugin.gateway.routes.silent]
prefix = "/silent"
upstream = "silent"
`)
	if r := svc.Get(t, "/orders/1"); r.Status != 500 || r.String() != "upstream's own error" || r.Header.Get("Content-Type") != "text/plain" {
		t.Errorf("upstream 500: %d %q %q", r.Status, r.Header.Get("Content-Type"), r.Body)
	}
	for _, tc := range []struct{ path, route, upstream, detail string }{
		{"/down/1", "down", "down", "unreachable"},
		{"/silent/1", "silent", "silent", "did not answer in time"},
	} {
		r := svc.Get(t, tc.path)
		if r.Status != 503 {
			t.Errorf("%s: status %d, want 503: %s", tc.path, r.Status, r.Body)
			continue
		}
		p := problemOf(t, r)
		if p["dependency"] != tc.upstream || p["route"] != tc.route || p["upstream"] != tc.upstream ||
			!strings.Contains(p["detail"].(string), tc.detail) || !strings.Contains(p["detail"].(string), "route '"+tc.route+"'") {
			t.Errorf("%s: problem %v", tc.path, p)
		}
	}
}

// A client that goes away cancels the upstream request.
func TestClientDisconnectCancelsUpstream(t *testing.T) {
	t.Parallel()
	arrived, cancelled := make(chan struct{}), make(chan struct{})
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		close(arrived)
		<-r.Context().Done()
		close(cancelled)
	})
	svc := gatewayService(t, "[app]\nrequest_timeout = \"60s\"\n"+upstreamTOML("orders", up.URL, `timeout = "60s"`, `read_timeout = "60s"`)+`
[plugin.gateway.routes.orders]
prefix = "/orders"
upstream = "orders"
`)
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, svc.URL+"/orders/slow", nil)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		errc <- err
	}()
	<-arrived
	cancel()
	<-errc
	select {
	case <-cancelled:
	case <-time.After(20 * time.Second): // generous: a loaded machine, a real socket
		t.Fatal("the upstream request was not cancelled after the client went away")
	}
}

// A full bulkhead is a 503 problem at once, and a response announcing a body
// over max_response_bytes a 502 problem: the upstream answered with
// something the gateway will not pass on. Both name the route.
func TestBulkheadAndTooLarge(t *testing.T) {
	t.Parallel()
	held, release := make(chan struct{}), make(chan struct{})
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/big" {
			w.Header().Set("Content-Length", "2048")
			_, _ = w.Write(make([]byte, 2048))
			return
		}
		close(held)
		<-release
	})
	svc := gatewayService(t, upstreamTOML("orders", up.URL, "max_concurrent = 1", `bulkhead_wait = "10ms"`,
		"max_response_bytes = 1024", `timeout = "60s"`, `read_timeout = "60s"`)+`
[plugin.gateway.routes.orders]
prefix = "/orders"
upstream = "orders"
strip_prefix = true
`)
	done := make(chan jfasttest.Response, 1)
	go func() { done <- svc.Get(t, "/orders/slow") }()
	<-held
	r := svc.Get(t, "/orders/other")
	p := problemOf(t, r)
	if r.Status != 503 || p["route"] != "orders" || p["dependency"] != "orders" || !strings.Contains(p["detail"].(string), "too many calls") {
		t.Errorf("full bulkhead: %d %v", r.Status, p)
	}
	close(release)
	if r := <-done; r.Status != 200 {
		t.Errorf("the held request: %d", r.Status)
	}
	r = svc.Get(t, "/orders/big")
	p = problemOf(t, r)
	if r.Status != 502 || p["route"] != "orders" || p["dependency"] != "orders" {
		t.Errorf("body over max_response_bytes: %d %v", r.Status, p)
	}
}
