package idempotency

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jfastframework/jfast/framework"
)

// A keyed body over the route's own limit is a 413 like one over
// max_request_body, whichever limit stops the read first, and counts as
// request_too_large: with the defaults (both 1 MiB) the framework's limit
// stops it, and with a route limit below max_request_body the 413 names the
// route's.
func TestBodyOverTheRouteLimitIs413(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		wrap  func(http.Handler) http.Handler
		limit int
	}{
		{"defaults", nil, framework.DefaultMaxBodyBytes},
		{"route limit below max_request_body", framework.MaxBodyBytes(64), 64},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, setupOpts{store: StoreRedis, wrap: tc.wrap})
			p := wantProblem(t, b.post(t, "/payments", "k9", strings.Repeat("x", tc.limit+1)), http.StatusRequestEntityTooLarge)
			if want := fmt.Sprintf("at most %d bytes", tc.limit); !strings.Contains(fmt.Sprint(p["detail"]), want) {
				t.Errorf("detail %q, want it to say %q", p["detail"], want)
			}
			if r := b.post(t, "/payments", "k10", strings.Repeat("x", tc.limit)); r.Status != http.StatusCreated {
				t.Fatalf("%d bytes: %d %s", tc.limit, r.Status, r.Body)
			}
			if n := b.effects.Load(); n != 1 {
				t.Fatalf("%d side effects, want 1", n)
			}
			for outcome, want := range map[string]float64{outcomeTooLarge: 1, outcomeInvalidKey: 0} {
				if got := counterValue(t, b.idem.metrics.requests.WithLabelValues(StoreRedis, outcome)); got != want {
					t.Errorf("%s: %v, want %v", outcome, got, want)
				}
			}
		})
	}
}

// A client that breaks off in the middle of a keyed body gets the
// framework's 400 for a body that could not be read, counted as
// body_unreadable (not as a bad key), and nothing runs.
func TestBodyCutShortIs400(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{store: StoreRedis})
	conn, err := net.Dial("tcp", strings.TrimPrefix(b.svc.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprintf(conn, "POST /payments HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n%s: cut\r\nContent-Length: 100\r\n\r\n%s",
		testCaller, HeaderKey, strings.Repeat("x", 10))
	if err := conn.(*net.TCPConn).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || resp.Header.Get("Content-Type") != "application/problem+json" {
		t.Fatalf("body cut short: %d %s, want a 400 problem", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	if n := b.effects.Load(); n != 0 {
		t.Fatalf("%d side effects, want 0", n)
	}
	for outcome, want := range map[string]float64{outcomeUnreadable: 1, outcomeInvalidKey: 0} {
		if got := counterValue(t, b.idem.metrics.requests.WithLabelValues(StoreRedis, outcome)); got != want {
			t.Errorf("%s: %v, want %v", outcome, got, want)
		}
	}
}
