package gateway_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
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
