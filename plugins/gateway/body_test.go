package gateway_test

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// A client that sends its request body slowly is the client's failure, not
// the upstream's: whether the upstream's timeout or the request's deadline
// cuts the call while the gateway waits on the client's next bytes, the
// client gets a 408 problem, the upstream's breaker stays closed (its
// silence rule would open it on one hung call), nothing is logged at WARN,
// and the next request is served.
func TestSlowRequestBodyIsTheClients(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, app, upstream, route string
	}{
		// The upstream's timeout, which bounds a stream route's wait for
		// the response headers, passes first.
		{"stream route, the upstream's timeout", `request_timeout = "30s"`, `timeout = "300ms"`, "stream = true"},
		{"the upstream's timeout", `request_timeout = "30s"`, `timeout = "300ms"`, ""},
		// The request's deadline (the connection's read deadline and the
		// call's context) passes first.
		{"the request's deadline", `request_timeout = "300ms"`, `timeout = "30s"`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.Copy(io.Discard, r.Body)
				_, _ = io.WriteString(w, "ok")
			})
			svc := gatewayService(t, "[app]\n"+tc.app+"\n"+
				upstreamTOML("slow", up.URL, tc.upstream, `read_timeout = "30s"`)+`
[plugin.gateway.routes.up]
prefix = "/api/up"
upstream = "slow"
`+tc.route+"\n")
			conn, br := rawRequest(t, svc.URL, "POST /api/up/x HTTP/1.1\r\nHost: gw\r\nContent-Length: 100\r\n\r\n")
			answered := make(chan struct{})
			go func() {
				// One byte every 20 ms: 2 s for the whole body, well past
				// either 300 ms bound.
				tick := time.NewTicker(20 * time.Millisecond)
				defer tick.Stop()
				for range 100 {
					select {
					case <-answered:
						return
					case <-tick.C:
					}
					if _, err := conn.Write([]byte("x")); err != nil {
						return
					}
				}
			}()
			resp, err := http.ReadResponse(br, nil)
			close(answered)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != http.StatusRequestTimeout || resp.Header.Get("Content-Type") != "application/problem+json" {
				t.Fatalf("%d %s %s, want a 408 problem", resp.StatusCode, resp.Header.Get("Content-Type"), body)
			}
			if r := svc.Get(t, "/api/up/next"); r.Status != 200 {
				t.Errorf("the next GET: %d %s, want the upstream's 200 (its breaker closed)", r.Status, r.Body)
			}
			if r := svc.Get(t, "/ready"); r.Status != 200 || strings.Contains(string(r.Body), `"open"`) {
				t.Errorf("/ready: %d %s, want the upstream's breaker closed", r.Status, r.Body)
			}
			if logs := svc.Logs(); strings.Contains(logs, "WARN") || strings.Contains(logs, "ERROR") {
				t.Errorf("a slow client was logged as a failure:\n%s", logs)
			}
		})
	}
}

// A streamed body that stops coming gets its 408 when the upstream's
// timeout ends the call, and the connection is then closed at once: the
// transport's Read waiting on the client is interrupted (it lasted until
// the request's deadline, and the 408 with it), and the rest of the body is
// not read, where net/http would read it, for a client that holds it back,
// until the request's deadline, keeping the connection and its goroutine
// that long.
func TestStreamedBodyConnectionClosesAfterIts408(t *testing.T) {
	t.Parallel()
	const requestTimeout = 30 * time.Second // what the connection was held for
	for _, route := range []string{"", "stream = true"} {
		t.Run("route "+route, func(t *testing.T) {
			t.Parallel()
			up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) { _, _ = io.Copy(io.Discard, r.Body) })
			svc := gatewayService(t, "[app]\nrequest_timeout = \"30s\"\n"+
				upstreamTOML("slow", up.URL, `timeout = "300ms"`, `read_timeout = "30s"`)+`
[plugin.gateway.routes.up]
prefix = "/api/up"
upstream = "slow"
`+route+"\n")
			// A POST without an Idempotency-Key is streamed: 10 of its
			// 1,000 bytes, then nothing.
			conn, br := rawRequest(t, svc.URL, "POST /api/up/x HTTP/1.1\r\nHost: gw\r\nContent-Length: 1000\r\n\r\n0123456789")
			_ = conn.SetReadDeadline(time.Now().Add(requestTimeout / 3)) // a bound on a failure only
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			if resp.StatusCode != http.StatusRequestTimeout || !resp.Close {
				t.Fatalf("%d, close %v; want a 408 with Connection: close", resp.StatusCode, resp.Close)
			}
			if _, err := br.ReadByte(); err != io.EOF {
				t.Fatalf("after the 408 the connection gave %v; want it closed by the gateway (EOF)", err)
			}
		})
	}
}

// A small body the gateway reads whole before the call (a PUT, a GET, a keyed
// POST: it may be retried) is held to the upstream's timeout too, as a
// streamed one is by the call that copies it: a client that sends part of
// it and stops gets its 408 when the timeout passes, not at the request's
// deadline, and the upstream is sent nothing.
func TestBufferedRequestBodyIsHeldToTheUpstreamTimeout(t *testing.T) {
	t.Parallel()
	const requestTimeout = 30 * time.Second // the bound a fixed gateway beats by far
	var calls atomic.Int32
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		_, _ = io.Copy(io.Discard, r.Body)
	})
	svc := gatewayService(t, "[app]\nrequest_timeout = \"30s\"\n"+upstreamTOML("slow", up.URL, `timeout = "300ms"`, `read_timeout = "30s"`)+`
[plugin.gateway.routes.up]
prefix = "/api/up"
upstream = "slow"
`)
	for _, head := range []string{
		"PUT /api/up/x HTTP/1.1\r\nHost: gw\r\nContent-Length: 100\r\n\r\n",
		"POST /api/up/x HTTP/1.1\r\nHost: gw\r\nIdempotency-Key: k1\r\nContent-Length: 100\r\n\r\n",
	} {
		conn, br := rawRequest(t, svc.URL, head+"0123456789")
		_ = conn.SetReadDeadline(time.Now().Add(requestTimeout / 3))
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("%s: no answer before a third of the request's deadline: %v", strings.Fields(head)[0], err)
		}
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusRequestTimeout || resp.Header.Get("Content-Type") != "application/problem+json" {
			t.Fatalf("%s: %d %s, want a 408 problem", strings.Fields(head)[0], resp.StatusCode, body)
		}
	}
	if n := calls.Load(); n != 0 {
		t.Fatalf("the upstream got %d requests, want none: the body never arrived", n)
	}
	if r := svc.Get(t, "/api/up/next"); r.Status != 200 {
		t.Errorf("the next GET: %d %s, want the upstream's 200 (its breaker closed)", r.Status, r.Body)
	}
}

// A declared Content-Length over the route's body limit, its body held
// back, gets its 413 and the connection closed at once, not at the
// request's deadline: net/http would wait for up to 256 KiB of the body
// (its maxPostHandlerReadBytes) before closing.
func TestDeclaredBodyOverLimitClosesAtOnce(t *testing.T) {
	t.Parallel()
	const timeout = time.Minute
	up := newUpstream(t, func(http.ResponseWriter, *http.Request) {})
	svc := gatewayService(t, fmt.Sprintf("[app]\nrequest_timeout = %q\n", timeout)+upstreamTOML("orders", up.URL)+`
[plugin.gateway.routes.orders]
prefix = "/api/orders"
upstream = "orders"
max_body_bytes = 10
`)
	for _, size := range []int{11, 256 << 10} {
		conn, br := rawRequest(t, svc.URL, fmt.Sprintf("POST /api/orders HTTP/1.1\r\nHost: gw\r\nContent-Length: %d\r\n\r\n", size))
		_ = conn.SetReadDeadline(time.Now().Add(timeout / 2)) // the request's deadline is the failure
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("Content-Length %d: %v", size, err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		if resp.StatusCode != http.StatusRequestEntityTooLarge || !resp.Close {
			t.Errorf("Content-Length %d: %d close=%v, want 413 closing the connection", size, resp.StatusCode, resp.Close)
		}
		if n, err := br.Read(make([]byte, 1)); n != 0 || err != io.EOF {
			t.Errorf("Content-Length %d: after the 413 the connection read %d, %v; want it closed (EOF)", size, n, err)
		}
	}
	if n := up.hits.Load(); n != 0 {
		t.Errorf("the upstream got %d requests, want none", n)
	}
}
