package http_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
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

// withinOneOf runs call up to three times and passes when one run took want
// ±tolerance. Every run must take at least want − tolerance and less than
// 3 × want (a client waiting for read_timeout, 5 s, fails every run); the
// retries absorb the scheduling delays of a CI machine running several test
// binaries on two cores, which can add tens of milliseconds to one run.
func withinOneOf(t *testing.T, what string, want time.Duration, tolerance float64, call func() error) {
	t.Helper()
	lo, hi := time.Duration(float64(want)*(1-tolerance)), time.Duration(float64(want)*(1+tolerance))
	var took []time.Duration
	for range 3 {
		start := time.Now()
		if err := call(); err != nil {
			t.Fatal(err)
		}
		d := time.Since(start)
		took = append(took, d)
		if d < lo || d > 3*want {
			t.Fatalf("%s took %s, want %s ±%.0f%%", what, d, want, tolerance*100)
		}
		if d <= hi {
			t.Logf("%s took %v (want %s ±%.0f%%)", what, took, want, tolerance*100)
			return
		}
	}
	t.Errorf("%s took %v, want %s ±%.0f%% at least once", what, took, want, tolerance*100)
}

// An upstream that accepts and never answers: the total deadline holds, and
// the call is a hang that opens the breaker at once (the silence rule: the
// upstream answered nothing while it waited). Each try uses a new client.
func TestSilentUpstreamTotalDeadline(t *testing.T) { // not parallel: it measures time
	base := silentUpstream(t)
	withinOneOf(t, "a call to a silent upstream", 300*time.Millisecond, 0.10, func() error {
		c, _, reg := newClient(t, jhttp.Upstream{BaseURL: base, PolicyConfig: resilience.PolicyConfig{Timeout: 300 * time.Millisecond}})
		_, err := c.Get(context.Background(), "/x")
		var to *jhttp.UpstreamTimeout
		if !errors.As(err, &to) || !errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("err = %v (%T), want UpstreamTimeout wrapping DeadlineExceeded", err, err)
		}
		if p, ok := problem.As(err); !ok || p.Status != 503 || p.Extensions["upstream"] != "billing" {
			return fmt.Errorf("problem = %+v", p)
		}
		if got := metric(t, reg, "jfast_client_calls_total", "outcome", "timeout"); got != 1 {
			return fmt.Errorf("timeout calls = %v, want 1", got)
		}
		if snap := c.Breaker().Snapshot(); snap.State != resilience.StateOpen {
			return fmt.Errorf("breaker after one silent call = %+v, want open: the next call is refused", snap)
		}
		return nil
	})
}

// The read timeout cuts a silent upstream after read_timeout, before the total.
func TestSilentUpstreamReadTimeout(t *testing.T) {
	t.Parallel()
	base := silentUpstream(t)
	c, _, _ := newClient(t, jhttp.Upstream{BaseURL: base, ReadTimeout: 100 * time.Millisecond, PolicyConfig: resilience.PolicyConfig{Timeout: 5 * time.Second, Attempts: 1}})
	start := time.Now()
	_, err := c.Get(context.Background(), "/x")
	if d := time.Since(start); d < 100*time.Millisecond || d > 2500*time.Millisecond {
		t.Errorf("a read gap of 100ms took %s, want about 100ms, far below timeout (5s)", d)
	}
	var to *jhttp.UpstreamTimeout
	if !errors.As(err, &to) {
		t.Fatalf("err = %v (%T), want UpstreamTimeout", err, err)
	}
}

// drip sends the headers at once, then one byte every 80 ms, n bytes in all.
func drip(n int) func(http.ResponseWriter, *http.Request, int) {
	return func(w http.ResponseWriter, r *http.Request, _ int) {
		w.Header().Set("Content-Type", "text/plain")
		w.WriteHeader(200)
		w.(http.Flusher).Flush()
		for range n {
			select {
			case <-time.After(80 * time.Millisecond):
			case <-r.Context().Done():
				return
			}
			_, _ = w.Write([]byte("x"))
			w.(http.Flusher).Flush()
		}
	}
}

// The read timeout is the gap between bytes, not the whole response: a byte
// every 80 ms fits read_timeout = 300ms however long the body, and only the
// total deadline cuts it (docs/design.md, "Calling other services").
func TestDripReadGapVersusTotal(t *testing.T) { // not parallel: it measures time
	up := newUpstream(t, drip(8))
	t.Run("a steady drip fits the read timeout", func(t *testing.T) {
		t.Parallel()
		c, _, _ := newClient(t, jhttp.Upstream{BaseURL: up.URL, ReadTimeout: 300 * time.Millisecond, PolicyConfig: resilience.PolicyConfig{Timeout: 3 * time.Second}})
		start := time.Now()
		resp, err := c.Get(context.Background(), "/drip")
		if err != nil {
			t.Fatal(err)
		}
		if got := string(jhttp.BodyBytes(resp)); got != "xxxxxxxx" {
			t.Fatalf("body %q", got)
		}
		if d := time.Since(start); d < 8*80*time.Millisecond*9/10 {
			t.Errorf("took %s: the body was not dripped", d)
		}
	})
	t.Run("the total deadline cuts it", func(t *testing.T) {
		t.Parallel()
		c, _, _ := newClient(t, jhttp.Upstream{BaseURL: up.URL, ReadTimeout: 300 * time.Millisecond, PolicyConfig: resilience.PolicyConfig{Timeout: 350 * time.Millisecond}})
		withinOneOf(t, "total 350ms against the drip", 350*time.Millisecond, 0.10, func() error {
			_, err := c.Get(context.Background(), "/drip")
			var to *jhttp.UpstreamTimeout
			if !errors.As(err, &to) {
				return fmt.Errorf("err = %v (%T), want UpstreamTimeout", err, err)
			}
			return nil
		})
	})
	t.Run("a read gap shorter than the drip cuts it", func(t *testing.T) {
		t.Parallel()
		c, _, _ := newClient(t, jhttp.Upstream{BaseURL: up.URL, ReadTimeout: 40 * time.Millisecond, PolicyConfig: resilience.PolicyConfig{Timeout: 3 * time.Second, Attempts: 1}})
		start := time.Now()
		_, err := c.Get(context.Background(), "/drip")
		// Without the gap the call would take the whole drip (640ms) and succeed.
		if d := time.Since(start); d > 600*time.Millisecond {
			t.Errorf("took %s; the 40ms gap should cut the first 80ms pause", d)
		}
		var to *jhttp.UpstreamTimeout
		if !errors.As(err, &to) {
			t.Fatalf("err = %v (%T), want UpstreamTimeout", err, err)
		}
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
	c, _, _ := newClient(t, jhttp.Upstream{BaseURL: srv.URL, TLS: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}, ReadTimeout: 100 * time.Millisecond, PolicyConfig: resilience.PolicyConfig{Timeout: 5 * time.Second, Attempts: 1}})
	start := time.Now()
	_, err := c.Get(context.Background(), "/x")
	var to *jhttp.UpstreamTimeout
	if !errors.As(err, &to) {
		t.Fatalf("err = %v (%T), want UpstreamTimeout", err, err)
	}
	// The dial and the handshake come before the gap starts: the point is that
	// the gap, not timeout (5s), ended the call.
	if d := time.Since(start); d < 100*time.Millisecond || d > 2500*time.Millisecond {
		t.Errorf("a TLS read gap of 100ms took %s, want 100ms plus the handshake, far below 5s", d)
	}
}

// write_timeout: an upstream that accepts and never reads stops a large
// request body once the socket buffers are full, after one write gap.
func TestWriteGap(t *testing.T) {
	t.Parallel()
	base := silentUpstream(t)
	c, _, _ := newClient(t, jhttp.Upstream{BaseURL: base, WriteTimeout: 200 * time.Millisecond, ReadTimeout: 5 * time.Second, PolicyConfig: resilience.PolicyConfig{Timeout: 5 * time.Second, Attempts: 1}})
	body := make([]byte, 32<<20) // far more than loopback's socket buffers
	start := time.Now()
	_, err := c.Put(context.Background(), "/upload", body)
	var to *jhttp.UpstreamTimeout
	if !errors.As(err, &to) {
		t.Fatalf("err = %v (%T), want UpstreamTimeout", err, err)
	}
	// Filling the socket buffers comes first; half of timeout leaves room
	// for a loaded machine and still tells the gap from the total.
	if d := time.Since(start); d > 2500*time.Millisecond {
		t.Errorf("took %s: the write gap (200ms), not timeout (5s), should have ended it", d)
	}
}
