package gateway_test

import (
	"bufio"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/textproto"
	"strings"
	"testing"
	"time"

	"github.com/jfastframework/jfast/jfasttest"
)

// rawUpstream answers every request on its connections with answer, written
// as is after the request's head is read (its body, if any, is not).
func rawUpstream(t *testing.T, answer string) string {
	return rawServer(t, func(conn net.Conn, br *bufio.Reader) {
		for {
			if _, err := http.ReadRequest(br); err != nil {
				return
			}
			if _, err := io.WriteString(conn, answer); err != nil {
				return
			}
		}
	})
}

// rawServer listens on loopback and runs serve on each connection it
// accepts, which it closes when serve returns; it returns the base URL.
func rawServer(t *testing.T, serve func(conn net.Conn, br *bufio.Reader)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				serve(conn, bufio.NewReader(conn))
			}()
		}
	}()
	return "http://" + ln.Addr().String()
}

// An interim (1xx) response is passed on without what the gateway never
// passes on (hop-by-hop headers, those Connection names, Proxy-*, the
// upstream's X-Request-Id), and the final response keeps the gateway's
// X-Request-Id, which the ReverseProxy would have cleared with the interim
// response's headers.
func TestInterimResponseIsFilteredAndKeepsTheRequestID(t *testing.T) {
	t.Parallel()
	up := rawUpstream(t, "HTTP/1.1 103 Early Hints\r\nLink: </a.css>; rel=preload\r\nProxy-Secret: s3cr3t\r\nKeep-Alive: timeout=1\r\n"+
		"Connection: X-Internal\r\nX-Internal: internal-token\r\nX-Request-Id: upstream-id\r\n\r\n"+
		"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nX-Request-Id: upstream-id\r\n\r\nok")
	svc := gatewayService(t, upstreamTOML("hints", up, "attempts = 1")+`
[plugin.gateway.routes.h]
prefix = "/h"
upstream = "hints"
`)
	var interim []textproto.MIMEHeader
	trace := &httptrace.ClientTrace{Got1xxResponse: func(code int, h textproto.MIMEHeader) error {
		if code == http.StatusEarlyHints {
			interim = append(interim, h)
		}
		return nil
	}}
	req, _ := http.NewRequestWithContext(httptrace.WithClientTrace(t.Context(), trace), http.MethodGet, svc.URL+"/h/x", nil)
	req.Header.Set("X-Request-ID", "client-id-1")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != 200 || string(body) != "ok" {
		t.Fatalf("%d %q, want the upstream's 200", resp.StatusCode, body)
	}
	if len(interim) != 1 {
		t.Fatalf("%d 103 responses, want 1", len(interim))
	}
	h := interim[0]
	if h.Get("Link") != "</a.css>; rel=preload" || strings.Join(h.Values("X-Request-Id"), ",") != "client-id-1" {
		t.Errorf("103 header %v: want its Link and the gateway's request ID alone", h)
	}
	for _, k := range []string{"Proxy-Secret", "Keep-Alive", "X-Internal"} {
		if v := h.Values(k); len(v) > 0 {
			t.Errorf("103 header %s = %q reached the client", k, v)
		}
	}
	if got := resp.Header.Values("X-Request-Id"); strings.Join(got, ",") != "client-id-1" {
		t.Errorf("final response X-Request-Id %q, want client-id-1 alone", got)
	}
}

// A request with Expect: 100-continue gets the 100 from a Go upstream; its
// final response keeps the gateway's X-Request-Id.
func TestContinueKeepsTheRequestID(t *testing.T) {
	t.Parallel()
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) { _, _ = io.Copy(io.Discard, r.Body) })
	svc := gatewayService(t, upstreamTOML("up", up.URL)+`
[plugin.gateway.routes.u]
prefix = "/u"
upstream = "up"
`)
	_, br := rawRequest(t, svc.URL, "PUT /u/x HTTP/1.1\r\nHost: gw\r\nX-Request-ID: client-id-7\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\nhello")
	for {
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		if resp.StatusCode == http.StatusContinue {
			continue
		}
		if resp.StatusCode != 200 || resp.Header.Get("X-Request-Id") != "client-id-7" {
			t.Fatalf("final %d, X-Request-Id %q; want 200 with client-id-7", resp.StatusCode, resp.Header.Get("X-Request-Id"))
		}
		return
	}
}

// Trailers are passed on without the hop-by-hop ones, Proxy-* and the
// upstream's X-Request-Id, and so is their announcement: the gateway's own
// X-Request-Id stays a header, never repeated as a trailer.
func TestTrailersAreFiltered(t *testing.T) {
	t.Parallel()
	up := rawUpstream(t, "HTTP/1.1 200 OK\r\nTrailer: Grpc-Status, Proxy-Secret, X-Request-Id, Connection\r\nTransfer-Encoding: chunked\r\n\r\n"+
		"2\r\nok\r\n0\r\nGrpc-Status: 0\r\nProxy-Secret: s3cr3t\r\nX-Request-Id: upstream-id\r\nKeep-Alive: 5\r\n\r\n")
	svc := gatewayService(t, upstreamTOML("tr", up, "attempts = 1")+`
[plugin.gateway.routes.t]
prefix = "/t"
upstream = "tr"
`)
	req, _ := http.NewRequest(http.MethodGet, svc.URL+"/t/x", nil)
	req.Header.Set("TE", "trailers")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if string(body) != "ok" || resp.Header.Get("X-Request-Id") == "" || resp.Header.Get("X-Request-Id") == "upstream-id" {
		t.Fatalf("body %q, X-Request-Id %q: want ok and the gateway's ID", body, resp.Header.Get("X-Request-Id"))
	}
	if len(resp.Trailer) != 1 || resp.Trailer.Get("Grpc-Status") != "0" {
		t.Errorf("trailers %v, want Grpc-Status alone", resp.Trailer)
	}
}

// A response whose body breaks off after the ReverseProxy wrote its headers
// is aborted (the client sees a truncated body, or nothing when they were
// not flushed yet) and still counted, by the status written, in
// jfast_gateway_requests_total, as the access log has it.
func TestResponseCutMidBodyIsCounted(t *testing.T) {
	t.Parallel()
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "100000")
		_, _ = w.Write(make([]byte, 1000))
		w.(http.Flusher).Flush()
		if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
			_ = conn.Close()
		}
	})
	svc := gatewayService(t, upstreamTOML("cut", up.URL, "attempts = 1")+`
[plugin.gateway.routes.f]
prefix = "/f"
upstream = "cut"
`)
	// The client gets the headers and part of the body, or, when the
	// gateway had not flushed them yet, nothing: either way no whole body.
	if resp, err := http.Get(svc.URL + "/f/x"); err == nil {
		_, err = io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if err == nil {
			t.Fatalf("the body read whole; want it cut")
		}
	}
	if n := jfasttest.Metric(t, svc.Metrics(), "jfast_gateway_requests_total", "route", "f", "status", "200"); n != 1 {
		t.Fatalf("jfast_gateway_requests_total{route=f,status=200} = %v, want 1", n)
	}
}

// A stream route's request that arrives while the App drains (during
// app.drain_delay, on the App's clock held still) is ended at once by the
// drain, and told so: a 503 problem closing the connection, not a bare 499
// as if its client had left.
func TestStreamDuringTheDrainIsA503(t *testing.T) {
	t.Parallel()
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	})
	clock := jfasttest.NewClock()
	svc := gatewayService(t, "[app]\ndrain_delay = \"2s\"\n"+upstreamTOML("ev", up.URL)+`
[plugin.gateway.routes.ev]
prefix = "/ev"
upstream = "ev"
stream = true
`, func(o *jfasttest.Options) { o.Clock = clock })
	waiters := clock.Waiters()
	stopped := make(chan error, 1)
	go func() { stopped <- svc.Stop(t.Context()) }()
	if err := clock.BlockUntilContext(t.Context(), waiters+1); err != nil {
		t.Fatal(err) // the stop waits out drain_delay: the App drains
	}
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := client.Get(svc.URL + "/ev/x")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Content-Type") != "application/problem+json" || !strings.Contains(string(body), "shutting down") {
		t.Fatalf("a stream during the drain: %d %s %s, want a 503 problem saying the service is shutting down", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
	clock.Advance(2 * time.Second)
	if err := <-stopped; err != nil {
		t.Fatal(err)
	}
}

// With breaker_key = "route" each route has its own breaker: /ready's entry
// for a route shows the one its requests go through, so the route whose
// breaker opened makes the check degraded, and the other route's stays
// closed.
func TestReadyShowsTheRouteBreaker(t *testing.T) {
	t.Parallel()
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/pay") {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	})
	svc := gatewayService(t, upstreamTOML("shop", up.URL, `breaker_key = "route"`, "breaker_failures = 2", "attempts = 1")+`
[plugin.gateway.routes.pay]
prefix = "/pay"
upstream = "shop"
[plugin.gateway.routes.stock]
pattern = "/stock/{sku}"
upstream = "shop"
`)
	for range 2 {
		svc.Get(t, "/pay/x")
	}
	if r := svc.Get(t, "/pay/x"); r.Status != 503 || r.Header.Get("Retry-After") == "" {
		t.Fatalf("pay after 2 failures: %d, want the route's open breaker's 503", r.Status)
	}
	if r := svc.Get(t, "/stock/1"); r.Status != 200 {
		t.Fatalf("stock: %d, want 200 (its own breaker)", r.Status)
	}
	var body struct {
		Checks map[string]struct {
			Healthy bool           `json:"healthy"`
			Detail  string         `json:"detail"`
			Meta    map[string]any `json:"meta"`
		} `json:"checks"`
	}
	if err := json.Unmarshal(svc.Get(t, "/ready").Body, &body); err != nil {
		t.Fatal(err)
	}
	g := body.Checks["gateway"]
	routes, _ := g.Meta["routes"].(map[string]any)
	state := func(route string) any {
		r, _ := routes[route].(map[string]any)
		b, _ := r["breaker"].(map[string]any)
		return b["state"]
	}
	if g.Healthy || !strings.Contains(g.Detail, "route 'pay'") || state("pay") != "open" || state("stock") != "closed" {
		t.Fatalf("gateway check %+v; want degraded naming route 'pay', its breaker open and stock's closed", g)
	}
}

// An upstream that sends the headers of a body whose length it declared,
// then breaks off or goes silent (past its read_timeout) before any of the
// body, is a 503 problem naming it: the gateway holds the headers until the
// body's first byte (net/http would not have sent them before then either),
// so the client is told, not cut off with nothing. One whose first bytes
// came is cut as before (TestResponseCutMidBodyIsCounted).
func TestUpstreamFailingBeforeTheBodyIsA503(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, detail string
		silent       bool
	}{{"breaks off", "broke off its response before the body", false}, {"goes silent", "did not answer in time", true}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			up := rawServer(t, func(conn net.Conn, br *bufio.Reader) {
				if _, err := http.ReadRequest(br); err == nil {
					_, _ = io.WriteString(conn, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n")
				}
				if tc.silent {
					_, _ = br.ReadByte() // until the gateway closes the connection
				}
			})
			svc := gatewayService(t, upstreamTOML("brk", up, "attempts = 1", `read_timeout = "100ms"`)+`
[plugin.gateway.routes.b]
prefix = "/b"
upstream = "brk"
`)
			resp := svc.Get(t, "/b/x")
			if resp.Status != http.StatusServiceUnavailable {
				t.Fatalf("status %d, want 503 (body %q)", resp.Status, resp.Body)
			}
			p := problemOf(t, resp)
			if p["dependency"] != "brk" || p["route"] != "b" || !strings.Contains(p["detail"].(string), tc.detail) {
				t.Fatalf("problem %v: want dependency brk, route b, a detail saying %q", p, tc.detail)
			}
			if n := jfasttest.Metric(t, svc.Metrics(), "jfast_gateway_requests_total", "route", "b", "status", "503"); n != 1 {
				t.Fatalf("jfast_gateway_requests_total{route=b,status=503} = %v, want 1", n)
			}
		})
	}
}
