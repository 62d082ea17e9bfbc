package gateway_test

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/jfastframework/jfast/jfasttest"
)

// An Upgrade header does not take a request out of the App's concurrency
// limit: with a limit of one, an upgrade the upstream has not answered yet
// holds the only slot and a second request is shed. Once the upstream
// answers 101 the tunnel leaves the limit, and a request is served beside
// it.
func TestUpgradeHoldsItsSlotUntil101(t *testing.T) {
	t.Parallel()
	started, release := make(chan struct{}, 1), make(chan struct{})
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/up/slow":
			started <- struct{}{}
			<-release
			_, _ = io.WriteString(w, "slow")
		case "/up/ws":
			wsEcho(w, r)
		default:
			_, _ = io.WriteString(w, "fast")
		}
	})
	svc := gatewayService(t, `
[app.overload]
initial_limit = 1
min_limit = 1
max_limit = 1
queue = 0
`+upstreamTOML("up", up.URL)+`
[plugin.gateway.routes.up]
prefix = "/up"
upstream = "up"
`)
	_, br := rawRequest(t, svc.URL, "GET /up/slow HTTP/1.1\r\nHost: gw\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n")
	<-started
	if r := svc.Get(t, "/up/fast"); r.Status != http.StatusServiceUnavailable {
		t.Errorf("beside an upgrade in flight, over a limit of 1: %d %s, want 503 (shed)", r.Status, r.Body)
	}
	close(release)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("the upgrade answered 200: %v %v", resp, err)
	}
	_ = resp.Body.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(svc.URL, "http")+"/up/ws", nil)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	defer c.CloseNow()
	if r := svc.Get(t, "/up/fast"); r.Status != 200 {
		t.Errorf("beside an open tunnel, with a limit of 1: %d %s, want 200 (a tunnel leaves the limit)", r.Status, r.Body)
	}
}

// An upgrade the upstream answers with anything but a 101 is an ordinary
// call: the upstream's timeout (not app.request_timeout) bounds it, body
// included, and Jfast-Timeout-Ms says what is left of that timeout.
func TestUpgradeAnsweredWithout101KeepsTheUpstreamTimeout(t *testing.T) {
	t.Parallel()
	// Long enough that a busy machine delivers the headers and the first
	// line within it (the test reads them before the cut): the test waits
	// for the cut, so this is also its length.
	const timeout = 2 * time.Second
	sent, cut := make(chan string, 1), make(chan struct{})
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		sent <- r.Header.Get("Jfast-Timeout-Ms")
		_, _ = io.WriteString(w, "first\n")
		_ = http.NewResponseController(w).Flush()
		<-r.Context().Done() // the gateway closed the connection
		close(cut)
	})
	// The request and the read gap are far longer than the upstream's
	// timeout: only timeout can end the response within the bound below.
	svc := gatewayService(t, "[app]\nrequest_timeout = \"1m\"\n"+
		upstreamTOML("up", up.URL, `timeout = "`+timeout.String()+`"`, `read_timeout = "1m"`)+`
[plugin.gateway.routes.up]
prefix = "/up"
upstream = "up"
`)
	_, br := rawRequest(t, svc.URL, "GET /up/endless HTTP/1.1\r\nHost: gw\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n")
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("the upgrade answered 200: %v %v", resp, err)
	}
	if line, err := bufio.NewReader(resp.Body).ReadString('\n'); err != nil || line != "first\n" {
		t.Fatalf("first line: %q %v", line, err)
	}
	ms, err := strconv.Atoi(<-sent)
	if err != nil || ms <= 0 || ms > int(timeout/time.Millisecond) {
		t.Errorf("Jfast-Timeout-Ms sent upstream: %d (%v), want at most the upstream's timeout, %d", ms, err, timeout/time.Millisecond)
	}
	select {
	case <-cut:
	case <-time.After(30 * time.Second): // half of request_timeout
		t.Fatal("the response to an upgrade answered 200 was not cut at the upstream's timeout")
	}
}

// A 101 the gateway does not pass on (no upgrade asked for, another
// protocol than the one asked for, none named) is a 503 problem naming the
// route and the upstream, saying what the upstream did: it answered, so it
// is not "unreachable".
func TestBogus101IsAProblemNamingTheUpstream(t *testing.T) {
	t.Parallel()
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		conn, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer conn.Close()
		head := "HTTP/1.1 101 Switching Protocols\r\n"
		if p := r.URL.Query().Get("proto"); p != "" {
			head += "Connection: Upgrade\r\nUpgrade: " + p + "\r\n"
		}
		_, _ = brw.WriteString(head + "\r\n")
		_ = brw.Flush()
		_, _ = io.Copy(io.Discard, conn)
	})
	svc := gatewayService(t, upstreamTOML("sock", up.URL, "attempts = 1")+`
[plugin.gateway.routes.ws]
prefix = "/ws"
upstream = "sock"
`)
	for _, tc := range []struct{ name, path, upgrade, detail string }{
		{"not asked for", "/ws/x?proto=websocket", "", `switched protocols to "websocket", which the request did not ask for`},
		{"another protocol", "/ws/x?proto=foo", "websocket", `switched protocols to "foo" when "websocket" was asked for`},
		{"none named", "/ws/x", "websocket", `switched protocols to "" when "websocket" was asked for`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var h []string
			if tc.upgrade != "" {
				h = []string{"Connection", "Upgrade", "Upgrade", tc.upgrade}
			}
			r := svc.Get(t, tc.path, h...)
			if r.Status != http.StatusServiceUnavailable {
				t.Fatalf("status %d %s, want 503", r.Status, r.Body)
			}
			p := problemOf(t, r)
			if p["upstream"] != "sock" || p["dependency"] != "sock" || p["route"] != "ws" {
				t.Errorf("problem %v: want upstream and dependency 'sock', route 'ws'", p)
			}
			if want := "route 'ws': upstream 'sock' " + tc.detail; p["detail"] != want {
				t.Errorf("detail %q, want %q", p["detail"], want)
			}
		})
	}
	// One observation of the upstream's latency per request, the refused
	// 101 reaching both the response hook and the error handler.
	reg := svc.Metrics()
	if n := jfasttest.Metric(t, reg, "jfast_gateway_upstream_duration_seconds", "route", "ws"); n != 3 {
		t.Errorf("%v upstream latencies observed for 3 requests", n)
	}
}

// An upstream's 101 reaches the client without its hop-by-hop headers (one
// its Connection header names, Keep-Alive, TE), Proxy-* ones and
// its X-Request-Id, as any response does (httputil.ReverseProxy removes
// none from a 101), with Connection: Upgrade and its Upgrade kept, so the
// tunnel opens and carries bytes both ways.
func TestSwitchingProtocolsDropsHopByHopHeaders(t *testing.T) {
	t.Parallel()
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		conn, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer conn.Close()
		_, _ = brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade, X-Hop\r\n" +
			"X-Hop: secret\r\nKeep-Alive: timeout=5\r\nTe: trailers\r\nProxy-Foo: bar\r\n" +
			"X-Request-Id: upstream-id\r\nSec-Websocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n\r\n")
		_ = brw.Flush()
		b := make([]byte, 1) // echo one byte: the tunnel works
		if _, err := io.ReadFull(brw, b); err == nil {
			_, _ = conn.Write(b)
		}
	})
	svc := gatewayService(t, upstreamTOML("ws", up.URL)+`
[plugin.gateway.routes.ws]
prefix = "/ws"
upstream = "ws"
`)
	conn, br := rawRequest(t, svc.URL, "GET /ws/x HTTP/1.1\r\nHost: gw\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nX-Request-Id: client-id-1\r\n\r\n")
	_ = conn.SetDeadline(time.Now().Add(30 * time.Second)) // generous: a loaded machine
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("%v %v, want the upstream's 101", resp, err)
	}
	for _, k := range []string{"X-Hop", "Keep-Alive", "Te", "Proxy-Foo"} {
		if v := resp.Header.Values(k); len(v) > 0 {
			t.Errorf("the 101 carried %s: %q", k, v)
		}
	}
	want := map[string]string{"Connection": "Upgrade", "Upgrade": "websocket", "X-Request-Id": "client-id-1",
		"Sec-Websocket-Accept": "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="}
	for k, v := range want {
		if got := strings.Join(resp.Header.Values(k), ","); got != v {
			t.Errorf("the 101's %s = %q, want %q", k, got, v)
		}
	}
	if _, err := io.WriteString(conn, "x"); err != nil {
		t.Fatal(err)
	}
	if b, err := br.ReadByte(); err != nil || b != 'x' {
		t.Fatalf("through the tunnel: %q, %v", b, err)
	}
}
