package gateway_test

import (
	"context"
	"errors"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/jfastframework/jfast/jfasttest"
)

// A WebSocket upgrade passes through to a real WebSocket echo server, and the
// connection outlives app.request_timeout and the upstream's read gap.
func TestWebSocketPassesThrough(t *testing.T) {
	t.Parallel()
	up := newUpstream(t, wsEcho)
	svc := gatewayService(t, "[app]\nrequest_timeout = \"300ms\"\n"+upstreamTOML("chat", up.URL, `read_timeout = "300ms"`)+`
[plugin.gateway.routes.chat]
prefix = "/chat"
upstream = "chat"
`)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, resp, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(svc.URL, "http")+"/chat/room", nil)
	if err != nil {
		t.Fatalf("dial through the gateway: %v (%v)", err, resp)
	}
	defer c.CloseNow()
	if resp.StatusCode != http.StatusSwitchingProtocols || up.last.Load().URL.Path != "/chat/room" {
		t.Fatalf("upgrade: %d, upstream path %q", resp.StatusCode, up.last.Load().URL.Path)
	}
	for i, msg := range []string{"hello", "after a pause"} {
		if i > 0 {
			// Longer than the request timeout and the read gap: neither
			// applies to an upgraded connection.
			time.Sleep(700 * time.Millisecond)
		}
		if err := c.Write(ctx, websocket.MessageText, []byte(msg)); err != nil {
			t.Fatalf("write %q: %v", msg, err)
		}
		_, got, err := c.Read(ctx)
		if err != nil || string(got) != "echo: "+msg {
			t.Fatalf("read: %q, %v", got, err)
		}
	}
	if err := c.Close(websocket.StatusNormalClosure, "done"); err != nil {
		t.Fatalf("close: %v", err)
	}
	// The request is counted, and logged, with the 101 the client got once
	// the tunnel closed (the ReverseProxy writes it past the
	// ResponseWriter, on the hijacked connection).
	eventually(t, 10*time.Second, "the upgrade counted", func() bool {
		return metric(t, svc.Metrics(), "jfast_gateway_requests_total", "route", "chat") == 1
	})
	if n := metric(t, svc.Metrics(), "jfast_gateway_requests_total", "route", "chat", "status", "101"); n != 1 {
		t.Errorf("jfast_gateway_requests_total{status=\"101\"} = %v, want 1", n)
	}
	if logs := svc.Logs(); !strings.Contains(logs, "path=/chat/room status=101") {
		t.Errorf("no access log line with status=101 for the upgrade:\n%s", logs)
	}
}

// A tunnel whose upstream stops reading is bounded by tunnel_idle_timeout,
// not by the upstream's write_timeout: once every buffer on the way is full
// the client's writes block (here until their own deadline, ten times
// write_timeout) with the tunnel still open, and the idle watch (on the test
// clock) closes it.
func TestTunnelToAStalledUpstreamIsClosedWhenIdle(t *testing.T) {
	t.Parallel()
	const writeTimeout = 100 * time.Millisecond
	done := make(chan struct{})
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		conn, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer conn.Close()
		_, _ = brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n")
		_ = brw.Flush()
		<-done // reads nothing
	})
	t.Cleanup(func() { close(done) })
	clock := jfasttest.NewClock()
	svc := gatewayService(t, upstreamTOML("chat", up.URL, `write_timeout = "`+writeTimeout.String()+`"`)+`
[plugin.gateway]
tunnel_idle_timeout = "1m"
[plugin.gateway.routes.chat]
prefix = "/chat"
upstream = "chat"
`, func(o *jfasttest.Options) { o.Clock = clock })
	conn, br := rawRequest(t, svc.URL, "GET /chat/room HTTP/1.1\r\nHost: gw\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n")
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("upgrade: %v %v", resp, err)
	}
	_ = conn.SetWriteDeadline(time.Now().Add(10 * writeTimeout))
	chunk := make([]byte, 64<<10)
	for {
		if _, err = conn.Write(chunk); err != nil {
			break
		}
	}
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("the client's writes to a stalled upstream ended with %v, want their own deadline (the tunnel cut at write_timeout?)", err)
	}
	if n := metric(t, svc.Metrics(), "jfast_gateway_tunnels", "route", "chat"); n != 1 {
		t.Fatalf("jfast_gateway_tunnels = %v, want the tunnel still open", n)
	}
	clock.Advance(time.Minute)
	_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	if _, err := br.ReadByte(); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read on the idle tunnel: %v, want it closed", err)
	}
	eventually(t, 10*time.Second, "the idle tunnel counted", func() bool {
		return metric(t, svc.Metrics(), "jfast_gateway_tunnels_idle_closed_total", "route", "chat") == 1
	})
}
