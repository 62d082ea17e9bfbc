package http_test

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jfastframework/jfast/framework/resilience"
	"github.com/jfastframework/jfast/jfasttest"
	jhttp "github.com/jfastframework/jfast/plugins/http"
	"github.com/jfastframework/jfast/problem"
)

// silentUpstream accepts connections and never answers, like a paused process.
func silentUpstream(t *testing.T) string {
	t.Helper()
	return "http://" + jfasttest.SilentServer(t)
}

// noTotal is a total deadline no test below should reach: where a gap deadline
// is under test, the total must not race it on a machine starved of CPU, so it
// is set this far out and serves only to end a test whose gap is broken.
const noTotal = 2 * time.Minute

// wantGapCut fails the test unless err is the gap deadline of op ("read" or
// "write") cutting the call: an UpstreamTimeout whose cause is that socket
// operation timing out, not the total deadline. The cause, not the time taken,
// tells a gap from the total, so a slow machine cannot blur them.
func wantGapCut(t *testing.T, err error, op string) {
	t.Helper()
	var to *jhttp.UpstreamTimeout
	var oe *net.OpError
	if !errors.As(err, &to) || !errors.Is(err, os.ErrDeadlineExceeded) || !errors.As(err, &oe) || oe.Op != op {
		t.Fatalf("err = %v (%T), want UpstreamTimeout caused by the %s deadline (a %s i/o timeout)", err, err, op, op)
	}
	if errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v: the total deadline ended the call, not the %s gap", err, op)
	}
}

// notBefore fails the test if a deadline of gap, set no earlier than start
// (the client sets it when the call's reads or writes begin, and only ever
// moves it later), ended the call before gap had passed. It is the one bound
// on time the code keeps whatever the load: a starved machine ends a call
// late, never early.
func notBefore(t *testing.T, start time.Time, gap time.Duration, what string) {
	t.Helper()
	if d := time.Since(start); d < gap {
		t.Errorf("%s ended the call after %s, before its %s had passed", what, d, gap)
	}
}

// An upstream that accepts and never answers: the total deadline holds, and
// the call is a hang that opens the breaker at once (the silence rule: the
// upstream answered nothing while it waited).
func TestSilentUpstreamTotalDeadline(t *testing.T) {
	t.Parallel()
	base := silentUpstream(t)
	c, _, reg := newClient(t, jhttp.Upstream{BaseURL: base, PolicyConfig: resilience.PolicyConfig{Timeout: 300 * time.Millisecond}})
	start := time.Now()
	_, err := c.Get(context.Background(), "/x")
	// The cause says the total ended the call, not the read gap (5s, later
	// by construction); the total cannot fire before its 300ms.
	var to *jhttp.UpstreamTimeout
	if !errors.As(err, &to) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v (%T), want UpstreamTimeout wrapping DeadlineExceeded", err, err)
	}
	notBefore(t, start, 300*time.Millisecond, "the total deadline")
	if p, ok := problem.As(err); !ok || p.Status != 503 || p.Extensions["upstream"] != "billing" {
		t.Errorf("problem = %+v", p)
	}
	if got := metric(t, reg, "jfast_client_calls_total", "outcome", "timeout"); got != 1 {
		t.Errorf("timeout calls = %v, want 1", got)
	}
	if snap := c.Breaker().Snapshot(); snap.State != resilience.StateOpen {
		t.Errorf("breaker after one silent call = %+v, want open: the next call is refused", snap)
	}
}

// The read timeout cuts a silent upstream after read_timeout, before the total.
func TestSilentUpstreamReadTimeout(t *testing.T) {
	t.Parallel()
	base := silentUpstream(t)
	c, _, _ := newClient(t, jhttp.Upstream{BaseURL: base, ReadTimeout: 100 * time.Millisecond, PolicyConfig: resilience.PolicyConfig{Timeout: noTotal, Attempts: 1}})
	start := time.Now()
	_, err := c.Get(context.Background(), "/x")
	wantGapCut(t, err, "read")
	notBefore(t, start, 100*time.Millisecond, "the read gap")
}

// An upstream that stops answering on a keep-alive connection it answered on
// before: the read gap cuts the attempt, and the request reaches the upstream
// once. (net/http sends a replayable request again when a reused connection
// fails before any response; the cut must not set that off, or the call
// waits for the total deadline on a second connection with no read gap.)
// Both ways of calling: the client, and the RoundTripper the gateway uses.
func TestReadGapOnReusedConnectionSendsOnce(t *testing.T) {
	t.Parallel()
	for _, way := range []string{"client", "transport"} {
		t.Run(way, func(t *testing.T) {
			t.Parallel()
			var hung atomic.Int64
			up := newUpstream(t, func(w http.ResponseWriter, r *http.Request, _ int) {
				if r.URL.Path == "/hang" {
					hung.Add(1)
					<-r.Context().Done() // the client closed the connection
					return
				}
				w.WriteHeader(200)
			})
			c, _, _ := newClient(t, jhttp.Upstream{BaseURL: up.URL, ReadTimeout: 100 * time.Millisecond, PolicyConfig: resilience.PolicyConfig{Timeout: noTotal, Attempts: 1}})
			get := func(path string) error {
				if way == "client" {
					_, err := c.Get(context.Background(), path)
					return err
				}
				resp, err := c.HTTPClient().Get(up.URL + path)
				if err == nil {
					_, _ = io.Copy(io.Discard, resp.Body)
					_ = resp.Body.Close()
				}
				return err
			}
			if err := get("/ok"); err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			err := get("/hang")
			wantGapCut(t, err, "read")
			// The /ok call's read deadline, set less than a sixteenth of the
			// gap ago, may be the one kept: the cut can come that much early.
			const gap = 100 * time.Millisecond
			notBefore(t, start, gap-gap/jhttp.DeadlineSlack, "the read gap")
			if n := hung.Load(); n != 1 {
				t.Errorf("the upstream got the request %d times, want 1", n)
			}
			if n := up.conns.Load(); n != 1 {
				t.Errorf("%d connections, want 1: the request was sent again on a new one", n)
			}
		})
	}
}

// net/http's own resend (the upstream closed a reused connection without
// answering) keeps the read gap: the request goes out again on a new
// connection, where the upstream stays silent, and the gap cuts it there.
func TestResendAfterClosedConnectionKeepsReadGap(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	var requests, conns atomic.Int64
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			n := conns.Add(1)
			go func() {
				defer conn.Close()
				br := bufio.NewReader(conn)
				for i := 1; ; i++ {
					req, err := http.ReadRequest(br)
					if err != nil {
						return
					}
					requests.Add(1)
					_ = req.Body.Close()
					switch {
					case n == 1 && i == 1:
						_, _ = io.WriteString(conn, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
					case n == 1:
						return // closed without an answer: net/http sends the request again
					default:
						_, _ = io.Copy(io.Discard, conn) // silent until the client closes
						return
					}
				}
			}()
		}
	}()
	c, _, _ := newClient(t, jhttp.Upstream{BaseURL: "http://" + ln.Addr().String(), ReadTimeout: 100 * time.Millisecond, PolicyConfig: resilience.PolicyConfig{Timeout: noTotal, Attempts: 1}})
	if _, err := c.Get(context.Background(), "/a"); err != nil {
		t.Fatal(err)
	}
	_, err = c.Get(context.Background(), "/b")
	wantGapCut(t, err, "read")
	if got := conns.Load(); got != 2 {
		t.Errorf("%d connections, want 2 (the second is net/http's resend)", got)
	}
	if got := requests.Load(); got != 3 {
		t.Errorf("%d requests, want 3: /a, /b and /b sent again", got)
	}
}

// drip sends the headers at once, then one byte after each pause, n bytes in all.
func drip(n int, pause time.Duration) func(http.ResponseWriter, *http.Request, int) {
	return func(w http.ResponseWriter, r *http.Request, _ int) {
		w.Header().Set("Content-Type", "text/plain")
		w.WriteHeader(200)
		w.(http.Flusher).Flush()
		for range n {
			select {
			case <-time.After(pause):
			case <-r.Context().Done():
				return
			}
			_, _ = w.Write([]byte("x"))
			w.(http.Flusher).Flush()
		}
	}
}

// The read timeout is the gap between bytes, not the whole response: a byte
// every 20 ms fits read_timeout = 500ms however long the body, and only the
// total deadline cuts it (docs/design.md, "Calling other services").
func TestDripReadGapVersusTotal(t *testing.T) {
	t.Parallel()
	up := newUpstream(t, drip(8, 80*time.Millisecond))
	t.Run("a steady drip fits the read timeout", func(t *testing.T) {
		t.Parallel()
		// 30 pauses of 20ms take at least 600ms, longer than the 500ms read
		// timeout, while each pause leaves 480ms to spare for a starved
		// machine to deliver the next byte.
		const n, pause, gap = 30, 20 * time.Millisecond, 500 * time.Millisecond
		steady := newUpstream(t, drip(n, pause))
		c, _, _ := newClient(t, jhttp.Upstream{BaseURL: steady.URL, ReadTimeout: gap, PolicyConfig: resilience.PolicyConfig{Timeout: noTotal}})
		start := time.Now()
		resp, err := c.Get(context.Background(), "/drip")
		if err != nil {
			t.Fatal(err)
		}
		if got := string(jhttp.BodyBytes(resp)); got != strings.Repeat("x", n) {
			t.Fatalf("body %q", got)
		}
		if d := time.Since(start); d < n*pause || d < gap {
			t.Errorf("took %s: the body was not dripped for longer than the read timeout (%s)", d, gap)
		}
	})
	t.Run("the total deadline cuts it", func(t *testing.T) {
		t.Parallel()
		// A read gap no pause of the drip can reach, however starved the
		// machine: the bytes keep coming and only the total can end the call.
		c, _, _ := newClient(t, jhttp.Upstream{BaseURL: up.URL, ReadTimeout: noTotal, PolicyConfig: resilience.PolicyConfig{Timeout: 350 * time.Millisecond}})
		start := time.Now()
		_, err := c.Get(context.Background(), "/drip")
		var to *jhttp.UpstreamTimeout
		if !errors.As(err, &to) || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("err = %v (%T), want UpstreamTimeout wrapping DeadlineExceeded", err, err)
		}
		notBefore(t, start, 350*time.Millisecond, "the total deadline")
	})
	t.Run("a read gap shorter than the drip cuts it", func(t *testing.T) {
		t.Parallel()
		c, _, _ := newClient(t, jhttp.Upstream{BaseURL: up.URL, ReadTimeout: 40 * time.Millisecond, PolicyConfig: resilience.PolicyConfig{Timeout: noTotal, Attempts: 1}})
		start := time.Now()
		_, err := c.Get(context.Background(), "/drip")
		// Without the gap the call would take the whole drip (640ms) and
		// succeed; the cause says the 40ms gap, not the total, cut it.
		wantGapCut(t, err, "read")
		notBefore(t, start, 40*time.Millisecond, "the read gap")
	})
}

// Idle keep-alive connections carry no read deadline: a connection idle for
// longer than read_timeout is reused.
func TestIdleConnectionOutlivesReadTimeout(t *testing.T) {
	t.Parallel()
	up := newUpstream(t, status(200))
	// 150ms, not less: between the last byte of a response and the end of the
	// attempt the transport's reader is already parked on the connection with
	// the gap deadline, and a loaded CI machine can take tens of milliseconds
	// to get there.
	c, _, _ := newClient(t, jhttp.Upstream{BaseURL: up.URL, ReadTimeout: 150 * time.Millisecond})
	for i := range 3 {
		if i > 0 {
			time.Sleep(300 * time.Millisecond) // real idle time on the socket, twice read_timeout
		}
		if resp, err := c.Get(context.Background(), "/x"); err != nil || resp.StatusCode != 200 {
			t.Fatalf("call %d: %v, %v", i+1, resp, err)
		}
	}
	if got := up.conns.Load(); got != 1 {
		t.Errorf("%d connections for 3 sequential calls, want 1 (reused)", got)
	}
}

// TLS with a custom CA: trusted through Upstream.TLS; without it the call
// fails as UpstreamUnavailable and is not retried.
func TestTLSCustomCA(t *testing.T) {
	t.Parallel()
	var hits atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		_, _ = w.Write([]byte("secure"))
	}))
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshake is expected
	srv.StartTLS()
	t.Cleanup(srv.Close)
	pool := x509.NewCertPool()
	pool.AddCert(srv.Certificate())

	c, _, _ := newClient(t, jhttp.Upstream{BaseURL: srv.URL, TLS: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}})
	resp, err := c.Get(context.Background(), "/x")
	if err != nil || string(jhttp.BodyBytes(resp)) != "secure" {
		t.Fatalf("got %v, %v", resp, err)
	}
	if resp.TLS == nil {
		t.Error("the response did not come over TLS")
	}

	// A long connect_timeout: the handshake must fail on the certificate, not time out.
	untrusting, clk, _ := newClient(t, jhttp.Upstream{BaseURL: srv.URL, ConnectTimeout: 20 * time.Second})
	_, err = untrusting.Get(context.Background(), "/x")
	var ua *jhttp.UpstreamUnavailable
	if !errors.As(err, &ua) {
		t.Fatalf("unknown CA: err = %v (%T), want UpstreamUnavailable", err, err)
	}
	if len(clk.Sleeps()) != 0 {
		t.Errorf("a certificate failure was retried (%d waits): %v", len(clk.Sleeps()), err)
	}
	if hits.Load() != 1 {
		t.Errorf("%d requests reached the server, want 1", hits.Load())
	}
}

// The read gap holds over TLS too.
func TestTLSReadGap(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(func() { close(release); srv.Close() })
	pool := x509.NewCertPool()
	pool.AddCert(srv.Certificate())
	c, _, _ := newClient(t, jhttp.Upstream{BaseURL: srv.URL, TLS: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}, ReadTimeout: 100 * time.Millisecond, PolicyConfig: resilience.PolicyConfig{Timeout: noTotal, Attempts: 1}})
	start := time.Now()
	_, err := c.Get(context.Background(), "/x")
	// The cause (a read deadline under TLS) says the gap ended the call.
	wantGapCut(t, err, "read")
	notBefore(t, start, 100*time.Millisecond, "the TLS read gap")
}

// write_timeout: an upstream that accepts and never reads stops a large
// request body once the socket buffers are full, after one write gap.
func TestWriteGap(t *testing.T) {
	t.Parallel()
	base := silentUpstream(t)
	// The read gap is armed only once the request is written, so it cannot
	// race the write gap; the total is out of reach (noTotal), so however
	// long filling the socket buffers takes on a loaded machine, only the
	// write gap can end the call.
	c, _, _ := newClient(t, jhttp.Upstream{BaseURL: base, WriteTimeout: 200 * time.Millisecond, ReadTimeout: 5 * time.Second, PolicyConfig: resilience.PolicyConfig{Timeout: noTotal, Attempts: 1}})
	body := make([]byte, 32<<20) // far more than loopback's socket buffers
	start := time.Now()
	_, err := c.Put(context.Background(), "/upload", body)
	wantGapCut(t, err, "write")
	// Every write deadline is set at a write's start plus the gap, so none
	// falls before start + 200ms.
	notBefore(t, start, 200*time.Millisecond, "the write gap")
}
