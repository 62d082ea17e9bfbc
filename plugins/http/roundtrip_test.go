package http_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/framework/resilience"
	jhttp "github.com/jfastframework/jfast/plugins/http"
	"github.com/jfastframework/jfast/problem"
	"github.com/jfastframework/jfast/requestid"
)

// The RoundTripper form of the policies: an SDK's or a proxy's requests
// through an upstream's breaker, budget, bulkhead, deadlines and retry rules,
// with the response body streamed.

func TestTransportRetryRules(t *testing.T) {
	t.Parallel()
	replayable := func(method string, header ...string) func(string) *http.Request {
		return func(base string) *http.Request {
			r, _ := http.NewRequest(method, base+"/x", bytes.NewReader([]byte(`{"amount":5}`))) // sets GetBody
			for i := 0; i+1 < len(header); i += 2 {
				r.Header.Set(header[i], header[i+1])
			}
			return r
		}
	}
	streaming := func(method string, header ...string) func(string) *http.Request {
		return func(base string) *http.Request {
			r, _ := http.NewRequest(method, base+"/x", io.NopCloser(strings.NewReader(`{"amount":5}`))) // no GetBody
			for i := 0; i+1 < len(header); i += 2 {
				r.Header.Set(header[i], header[i+1])
			}
			return r
		}
	}
	noBody := func(method string) func(string) *http.Request {
		return func(base string) *http.Request {
			r, _ := http.NewRequest(method, base+"/x", nil)
			return r
		}
	}
	cases := []struct {
		name     string
		req      func(base string) *http.Request
		status   int
		requests int
	}{
		{"GET 503 is retried", noBody(http.MethodGet), 503, 3},
		{"GET 429 is retried", noBody(http.MethodGet), 429, 3},
		{"GET 500 is not retried", noBody(http.MethodGet), 500, 1},
		{"GET 404 is not retried", noBody(http.MethodGet), 404, 1},
		{"DELETE 502 is retried", noBody(http.MethodDelete), 502, 3},
		{"PUT with a replayable body is retried", replayable(http.MethodPut), 503, 3},
		{"PUT with a body that cannot be replayed is not retried", streaming(http.MethodPut), 503, 1},
		{"POST is not retried", replayable(http.MethodPost), 503, 1},
		{"POST with an Idempotency-Key is retried", replayable(http.MethodPost, "Idempotency-Key", "charge-7"), 503, 3},
		{"POST with an Idempotency-Key and a body that cannot be replayed is not retried", streaming(http.MethodPost, "Idempotency-Key", "charge-7"), 503, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var bodies atomic.Int64
			up := newUpstream(t, func(w http.ResponseWriter, r *http.Request, _ int) {
				if b, _ := io.ReadAll(r.Body); len(b) > 0 {
					if string(b) != `{"amount":5}` {
						t.Errorf("attempt body = %q", b)
					}
					bodies.Add(1)
				}
				w.WriteHeader(tc.status)
			})
			c, _, reg := newClient(t, noBudget(jhttp.Upstream{BaseURL: up.URL}))
			req := tc.req(up.URL)
			resp, err := c.HTTPClient().Do(req)
			if err != nil {
				t.Fatalf("a call that got a response must not fail: %v", err)
			}
			_ = resp.Body.Close()
			if resp.StatusCode != tc.status {
				t.Errorf("status = %d, want %d", resp.StatusCode, tc.status)
			}
			if got := int(up.hits.Load()); got != tc.requests {
				t.Errorf("upstream got %d requests, want %d", got, tc.requests)
			}
			if req.Body != nil && bodies.Load() != up.hits.Load() {
				t.Errorf("%d of %d attempts carried the body", bodies.Load(), up.hits.Load())
			}
			if got := metric(t, reg, "jfast_client_attempts_total", "dependency", "billing"); int(got) != tc.requests {
				t.Errorf("attempts metric = %v, want %d", got, tc.requests)
			}
		})
	}
}

// The body is streamed: the caller reads the first part before the upstream
// has sent the rest, and the call holds its bulkhead place until the body
// ends.
func TestTransportStreamsTheBody(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	up := newUpstream(t, func(w http.ResponseWriter, _ *http.Request, _ int) {
		_, _ = w.Write([]byte("first;"))
		w.(http.Flusher).Flush()
		<-release
		_, _ = w.Write([]byte("second"))
	})
	c, _, _ := newClient(t, jhttp.Upstream{BaseURL: up.URL})
	resp, err := c.HTTPClient().Get(up.URL + "/stream")
	if err != nil {
		t.Fatal(err)
	}
	first := make([]byte, len("first;"))
	if _, err := io.ReadFull(resp.Body, first); err != nil || string(first) != "first;" {
		t.Fatalf("first part = %q, %v", first, err)
	}
	if n := inFlight(t, c); n != 1 {
		t.Errorf("in flight while the body is read = %d, want 1", n)
	}
	close(release)
	rest, err := io.ReadAll(resp.Body)
	if err != nil || string(rest) != "second" {
		t.Fatalf("rest = %q, %v", rest, err)
	}
	if n := inFlight(t, c); n != 0 {
		t.Errorf("in flight after the body's end = %d, want 0", n)
	}
	if err := resp.Body.Close(); err != nil {
		t.Errorf("close after the end: %v", err)
	}
}

// Closing a body early ends the call too.
func TestTransportCloseEndsTheCall(t *testing.T) {
	t.Parallel()
	up := newUpstream(t, func(w http.ResponseWriter, _ *http.Request, _ int) {
		_, _ = w.Write(bytes.Repeat([]byte("x"), 1<<20))
	})
	c, _, _ := newClient(t, jhttp.Upstream{BaseURL: up.URL, PolicyConfig: resilience.PolicyConfig{MaxConcurrent: 1, BulkheadWait: time.Millisecond}})
	for range 3 { // with one place, a leaked place would refuse the second call
		resp, err := c.HTTPClient().Get(up.URL + "/big")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := resp.Body.Read(make([]byte, 10)); err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if n := inFlight(t, c); n != 0 {
			t.Fatalf("in flight after Close = %d, want 0", n)
		}
	}
}

func inFlight(t *testing.T, c *jhttp.ServiceClient) int {
	t.Helper()
	return c.InFlight()
}

func TestTransportRefusesAnotherOrigin(t *testing.T) {
	t.Parallel()
	up := newUpstream(t, status(200))
	other := newUpstream(t, status(200))
	c, _, _ := newClient(t, jhttp.Upstream{BaseURL: up.URL + "/v1"})
	body := &closeRecorder{Reader: strings.NewReader("x")}
	req, _ := http.NewRequest(http.MethodPost, other.URL+"/v1/x", body)
	_, err := c.Transport().RoundTrip(req)
	if err == nil || !strings.Contains(err.Error(), "refuses a request to") {
		t.Fatalf("err = %v, want a refusal", err)
	}
	if other.hits.Load() != 0 || up.hits.Load() != 0 {
		t.Error("a request was sent")
	}
	if !body.closed.Load() {
		t.Error("the request body was not closed")
	}
	// The same origin written differently is the upstream's.
	u, _ := url.Parse(up.URL)
	req, _ = http.NewRequest(http.MethodGet, "HTTP://"+strings.ToUpper("localhost")+":"+u.Port()+"/other/path", nil)
	req.URL.Host = u.Host // the listener is on 127.0.0.1
	resp, err := c.Transport().RoundTrip(req)
	if err != nil {
		t.Fatalf("a path outside base_url's path is the same origin: %v", err)
	}
	_ = resp.Body.Close()
}

type closeRecorder struct {
	io.Reader
	closed atomic.Bool
}

func (c *closeRecorder) Close() error { c.closed.Store(true); return nil }

func TestTransportHeaders(t *testing.T) {
	t.Parallel()
	up := newUpstream(t, status(200))
	c, _, _ := newClient(t, jhttp.Upstream{BaseURL: up.URL,
		Headers: map[string]string{"X-Team": "orders", "User-Agent": "jfast-orders"}})
	ctx := requestid.NewContext(context.Background(), "req-42")
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, up.URL+"/x", nil)
	req.Header.Set("User-Agent", "sdk/1.0")
	resp, err := c.HTTPClient().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	got := up.request(0).Header
	for name, want := range map[string]string{"X-Request-Id": "req-42", "X-Team": "orders", "User-Agent": "sdk/1.0"} {
		if got.Get(name) != want {
			t.Errorf("%s = %q, want %q", name, got.Get(name), want)
		}
	}
	if len(req.Header) != 1 {
		t.Errorf("the caller's request was changed: %v", req.Header)
	}
	if resp.Request != req {
		t.Error("resp.Request is not the caller's request")
	}
}

// The breaker through an SDK-style client: five failed calls open it, and
// the sixth is refused without I/O with an error that errors.As and errors.Is
// find through *url.Error and that renders as a 503 naming the upstream.
func TestTransportBreaker(t *testing.T) {
	t.Parallel()
	up := newUpstream(t, status(503))
	c, _, _ := newClient(t, jhttp.Upstream{BaseURL: up.URL, PolicyConfig: resilience.PolicyConfig{Attempts: 1}})
	hc := c.HTTPClient()
	for range 5 {
		resp, err := hc.Get(up.URL + "/x")
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
	}
	_, err := hc.Get(up.URL + "/x")
	var open *jhttp.CircuitOpen
	if !errors.As(err, &open) || !errors.Is(err, resilience.ErrOpen) {
		t.Fatalf("err = %v, want CircuitOpen through *url.Error", err)
	}
	var r problem.Renderer
	if !errors.As(err, &r) || r.Problem().Status != 503 || r.Problem().Extensions["upstream"] != "billing" {
		t.Errorf("problem = %+v, want a 503 naming billing", r)
	}
	if up.hits.Load() != 5 {
		t.Errorf("upstream got %d requests, want 5", up.hits.Load())
	}
}

// A body read cut by the read gap fails with UpstreamTimeout and counts
// against the breaker.
func TestTransportReadGapWhileStreaming(t *testing.T) {
	t.Parallel()
	up := partThenSilent(t)
	c, _, _ := newClient(t, jhttp.Upstream{BaseURL: up.URL, ReadTimeout: 100 * time.Millisecond, PolicyConfig: resilience.PolicyConfig{Timeout: noTotal, BreakerConfig: resilience.BreakerConfig{BreakerFailures: 1}}})
	resp, err := c.HTTPClient().Get(up.URL + "/x")
	if err != nil {
		t.Fatal(err)
	}
	_, err = io.ReadAll(resp.Body)
	// The cause says the read gap cut the body, not the total (10s).
	wantGapCut(t, err, "read")
	_ = resp.Body.Close()
	if s := c.Breaker().Snapshot().State; s != resilience.StateOpen {
		t.Errorf("breaker %s, want open after a body cut by the read gap", s)
	}
}

func TestTransportResponseTooLarge(t *testing.T) {
	t.Parallel()
	const limit = 1024
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request, _ int) {
		if r.URL.Path == "/declared" {
			w.Header().Set("Content-Length", "2048")
		} else {
			w.(http.Flusher).Flush() // chunked: no Content-Length
		}
		_, _ = w.Write(bytes.Repeat([]byte("x"), 2048))
	})
	c, _, _ := newClient(t, jhttp.Upstream{BaseURL: up.URL, MaxResponseBytes: limit})

	_, err := c.HTTPClient().Get(up.URL + "/declared")
	var big *jhttp.ResponseTooLarge
	if !errors.As(err, &big) || big.Limit != limit {
		t.Fatalf("declared: err = %v, want ResponseTooLarge", err)
	}

	resp, err := c.HTTPClient().Get(up.URL + "/chunked")
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(resp.Body)
	if !errors.As(err, &big) {
		t.Fatalf("chunked: err = %v, want ResponseTooLarge", err)
	}
	if len(b) != limit {
		t.Errorf("read %d bytes before the error, want exactly the cap (%d)", len(b), limit)
	}
	_ = resp.Body.Close()
	if s := c.Breaker().Snapshot(); s.Consecutive != 0 {
		t.Errorf("a body over the cap counted as a failure: %+v", s)
	}
}

// timeout bounds the body too: a body dripping without end is cut.
func TestTransportTotalTimeoutCoversTheBody(t *testing.T) {
	t.Parallel()
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) })
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request, _ int) {
		for {
			_, _ = w.Write([]byte("x"))
			w.(http.Flusher).Flush()
			select {
			case <-stop:
				return
			case <-r.Context().Done():
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	})
	c, _, _ := newClient(t, jhttp.Upstream{BaseURL: up.URL, PolicyConfig: resilience.PolicyConfig{Timeout: 300 * time.Millisecond}})
	resp, err := c.HTTPClient().Get(up.URL + "/drip")
	if err != nil {
		t.Fatal(err)
	}
	_, err = io.ReadAll(resp.Body)
	var to *jhttp.UpstreamTimeout
	if !errors.As(err, &to) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want UpstreamTimeout wrapping context.DeadlineExceeded", err)
	}
}

// WithOpenEndedResponse: timeout bounds the wait for the headers only.
// A body that keeps coming for several timeouts is read to its end,
// without Jfast-Timeout-Ms sent; headers that do not come within
// timeout end the call with an UpstreamTimeout, which the breaker
// counts.
func TestTransportOpenEndedResponse(t *testing.T) {
	t.Parallel()
	var sentTimeout atomic.Value
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request, _ int) {
		sentTimeout.Store(r.Header.Get("Jfast-Timeout-Ms"))
		if r.URL.Path == "/late" {
			select {
			case <-r.Context().Done():
			case <-time.After(10 * time.Second):
			}
			return
		}
		for range 12 { // 12 × 50 ms: four timeouts
			_, _ = w.Write([]byte("x"))
			w.(http.Flusher).Flush()
			time.Sleep(50 * time.Millisecond)
		}
	})
	c, _, _ := newClient(t, jhttp.Upstream{BaseURL: up.URL, ReadTimeout: 5 * time.Second, PolicyConfig: resilience.PolicyConfig{Timeout: 150 * time.Millisecond, Attempts: 0}})
	ctx := jhttp.WithOpenEndedResponse(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, up.URL+"/drip", nil)
	resp, err := c.HTTPClient().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil || string(b) != "xxxxxxxxxxxx" {
		t.Fatalf("read %q, %v: want the whole body", b, err)
	}
	if v := sentTimeout.Load(); v != "" {
		t.Fatalf("an open-ended call sent Jfast-Timeout-Ms: %v", v)
	}

	req, _ = http.NewRequestWithContext(ctx, http.MethodGet, up.URL+"/late", nil)
	_, err = c.HTTPClient().Do(req)
	var to *jhttp.UpstreamTimeout
	if !errors.As(err, &to) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want UpstreamTimeout wrapping context.DeadlineExceeded", err)
	}
	if s := c.Breaker().Snapshot(); s.State != resilience.StateOpen || s.Opens != 1 {
		t.Fatalf("headers late past timeout, nothing answered since the call was sent: breaker %+v, want open (the silence rule)", s)
	}
}

// The telemetry seam sees every attempt, and the call's end once, when the
// body ends.
func TestTransportTelemetrySeam(t *testing.T) {
	t.Parallel()
	up := newUpstream(t, func(w http.ResponseWriter, _ *http.Request, n int) {
		if n == 1 {
			w.WriteHeader(503)
			return
		}
		_, _ = w.Write([]byte("ok"))
	})
	var wrapped, ends atomic.Int64
	var endStatus, endAttempts atomic.Int64
	c, _, _ := newClient(t, noBudget(jhttp.Upstream{BaseURL: up.URL}),
		jhttp.WithTransportWrapper(func(_ string, rt http.RoundTripper) http.RoundTripper {
			return roundTripFunc(func(r *http.Request) (*http.Response, error) {
				wrapped.Add(1)
				return rt.RoundTrip(r)
			})
		}),
		jhttp.WithCallObserver(func(ctx context.Context, _, _ string) (context.Context, func(int, int, error)) {
			return ctx, func(status, attempts int, _ error) {
				ends.Add(1)
				endStatus.Store(int64(status))
				endAttempts.Store(int64(attempts))
			}
		}))
	resp, err := c.HTTPClient().Get(up.URL + "/x")
	if err != nil {
		t.Fatal(err)
	}
	if ends.Load() != 0 {
		t.Error("the call ended before its body was read")
	}
	_, _ = io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if wrapped.Load() != 2 || ends.Load() != 1 || endStatus.Load() != 200 || endAttempts.Load() != 2 {
		t.Errorf("wrapper saw %d attempts, observer %d ends (status %d, %d attempts); want 2, 1 (200, 2)",
			wrapped.Load(), ends.Load(), endStatus.Load(), endAttempts.Load())
	}
}

// A reverse proxy on httputil.ReverseProxy with the upstream's transport: a
// 503 is retried behind the proxy, and a call that got no response renders as
// the upstream's problem through the proxy's ErrorHandler.
func TestTransportBehindReverseProxy(t *testing.T) {
	t.Parallel()
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request, n int) {
		if n == 1 {
			w.WriteHeader(503)
			return
		}
		_, _ = w.Write([]byte("hello " + r.URL.Path))
	})
	c, _, _ := newClient(t, noBudget(jhttp.Upstream{BaseURL: up.URL, PolicyConfig: resilience.PolicyConfig{Attempts: 2, BreakerConfig: resilience.BreakerConfig{BreakerFailures: 1}}}))
	target, _ := url.Parse(up.URL)
	proxy := &httputil.ReverseProxy{
		Rewrite:   func(pr *httputil.ProxyRequest) { pr.SetURL(target) },
		Transport: c.Transport(),
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			problem.WriteError(w, r, err)
		},
	}
	front := httptest.NewServer(proxy)
	t.Cleanup(front.Close)

	resp, err := http.Get(front.URL + "/greet")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != 200 || string(b) != "hello /greet" || up.hits.Load() != 2 {
		t.Fatalf("through the proxy: %d %q after %d requests, want 200 \"hello /greet\" after 2", resp.StatusCode, b, up.hits.Load())
	}

	up.Close() // nothing listens any more: the call fails, the breaker opens
	for _, want := range []string{"is unreachable", "suspended"} {
		resp, err = http.Get(front.URL + "/greet")
		if err != nil {
			t.Fatal(err)
		}
		b, _ = io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != 503 || resp.Header.Get("Content-Type") != "application/problem+json" ||
			!strings.Contains(string(b), `"upstream":"billing"`) || !strings.Contains(string(b), want) {
			t.Errorf("after the upstream went away: %d %s %s, want a 503 problem naming billing saying %q", resp.StatusCode, resp.Header.Get("Content-Type"), b, want)
		}
	}
}

// A protocol upgrade through a reverse proxy: the 101 ends the call, and the
// connection is the proxy's to relay.
func TestTransportUpgrade(t *testing.T) {
	t.Parallel()
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request, _ int) {
		if r.Header.Get("Upgrade") != "echo" {
			w.WriteHeader(400)
			return
		}
		conn, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer conn.Close()
		_, _ = brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nUpgrade: echo\r\nConnection: Upgrade\r\n\r\n")
		_ = brw.Flush()
		line, _ := brw.ReadString('\n')
		_, _ = brw.WriteString("echo " + line)
		_ = brw.Flush()
	})
	c, _, _ := newClient(t, jhttp.Upstream{BaseURL: up.URL, ReadTimeout: 100 * time.Millisecond})
	target, _ := url.Parse(up.URL)
	front := httptest.NewServer(&httputil.ReverseProxy{
		Rewrite:   func(pr *httputil.ProxyRequest) { pr.SetURL(target) },
		Transport: c.Transport(),
	})
	t.Cleanup(front.Close)

	conn, err := net.Dial("tcp", strings.TrimPrefix(front.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	_, _ = io.WriteString(conn, "GET /ws HTTP/1.1\r\nHost: front\r\nUpgrade: echo\r\nConnection: Upgrade\r\n\r\n")
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("upgrade: %v %v", resp, err)
	}
	if n := c.InFlight(); n != 0 {
		t.Errorf("in flight after the 101 = %d, want 0", n)
	}
	time.Sleep(200 * time.Millisecond) // longer than read_timeout: the upgraded connection has no read gap
	_, _ = io.WriteString(conn, "ping\n")
	line, err := br.ReadString('\n')
	if err != nil || line != "echo ping\n" {
		t.Fatalf("through the upgraded connection: %q, %v", line, err)
	}
}

// A retried response with a small body is kept through the wait: when the
// retry gets no response, the call returns it, body and all.
func TestTransportKeepsARetriedResponse(t *testing.T) {
	t.Parallel()
	up := newUpstream(t, func(w http.ResponseWriter, _ *http.Request, n int) {
		if n == 1 {
			w.WriteHeader(503)
			_, _ = w.Write([]byte("busy, come back"))
			return
		}
		conn, _, err := w.(http.Hijacker).Hijack() // the retry's connection drops
		if err == nil {
			_ = conn.Close()
		}
	})
	c, _, _ := newClient(t, noBudget(jhttp.Upstream{BaseURL: up.URL, PolicyConfig: resilience.PolicyConfig{Attempts: 2}}))
	resp, err := c.HTTPClient().Get(up.URL + "/x")
	if err != nil {
		t.Fatalf("err = %v, want the first attempt's 503", err)
	}
	b, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	// net/http resends the retry once itself (its request died on a reused
	// connection before any response), hence 2 or 3 requests.
	if resp.StatusCode != 503 || string(b) != "busy, come back" || up.hits.Load() < 2 {
		t.Errorf("%d %q after %d requests, want the first 503 with its body", resp.StatusCode, b, up.hits.Load())
	}
	if n := c.InFlight(); n != 0 {
		t.Errorf("in flight = %d", n)
	}
}

// A caller's own httptrace.ClientTrace (a reverse proxy counting attempts)
// sees each attempt once, and stays with its call: the next call, without
// one, does not run it.
func TestTransportCallersClientTrace(t *testing.T) {
	t.Parallel()
	up := newUpstream(t, func(w http.ResponseWriter, _ *http.Request, n int) {
		if n == 1 {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	})
	c, _, _ := newClient(t, noBudget(jhttp.Upstream{BaseURL: up.URL}))
	var gets atomic.Int64
	ctx := httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{GetConn: func(string) { gets.Add(1) }})
	for i, ctx := range []context.Context{ctx, context.Background(), context.Background()} {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, up.URL+"/x", nil)
		resp, err := c.Transport().RoundTrip(req)
		if err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
	}
	if n := gets.Load(); n != 2 {
		t.Fatalf("the caller's trace saw %d connection requests, want 2 (its call's two attempts)", n)
	}
}

// A caller's trace with the hooks the attempt uses itself (GotConn,
// WroteRequest) and a network hook: both the caller's hooks and the
// attempt's run — the attempt's arm the read gap, which cuts the silent body.
func TestTransportCallersTraceSharesHooks(t *testing.T) {
	t.Parallel()
	up := partThenSilent(t)
	c, _, _ := newClient(t, jhttp.Upstream{BaseURL: up.URL, ReadTimeout: 100 * time.Millisecond, PolicyConfig: resilience.PolicyConfig{Timeout: noTotal}})
	var got, wrote, connects atomic.Int64
	ctx := httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{
		GotConn:      func(httptrace.GotConnInfo) { got.Add(1) },
		WroteRequest: func(httptrace.WroteRequestInfo) { wrote.Add(1) },
		ConnectStart: func(string, string) { connects.Add(1) },
	})
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, up.URL+"/x", nil)
	resp, err := c.Transport().RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	_, err = io.ReadAll(resp.Body)
	wantGapCut(t, err, "read")
	_ = resp.Body.Close()
	if got.Load() != 1 || wrote.Load() != 1 || connects.Load() != 1 {
		t.Errorf("the caller's hooks ran GotConn %d, WroteRequest %d, ConnectStart %d times, want 1 each", got.Load(), wrote.Load(), connects.Load())
	}
}

// A caller's framework.OutboundCall learns how many attempts its call took,
// through the RoundTripper and ServiceClient.Do alike; one with OwnedHeader
// gets what travels with the call added to its request's Header in place,
// and one without keeps its Header as it was.
func TestTransportOutboundCall(t *testing.T) {
	t.Parallel()
	up := newUpstream(t, func(w http.ResponseWriter, _ *http.Request, n int) {
		if n%2 == 1 {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	})
	c, _, _ := newClient(t, noBudget(jhttp.Upstream{BaseURL: up.URL, Headers: map[string]string{"X-Team": "orders"}}))
	for _, owned := range []bool{true, false} {
		oc := &framework.OutboundCall{Context: requestid.NewContext(context.Background(), "req-7"), Route: "/x", OwnedHeader: owned}
		req, _ := http.NewRequestWithContext(oc, http.MethodGet, up.URL+"/x", nil)
		req.Header.Set("User-Agent", "proxy")
		resp, err := c.Transport().RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != 200 || oc.Attempts() != 2 {
			t.Fatalf("owned=%v: status %d after %d attempts, want 200 after 2", owned, resp.StatusCode, oc.Attempts())
		}
		want := 1
		if owned {
			want = 4 // User-Agent, X-Team, X-Request-Id, Jfast-Timeout-Ms
			if req.Header.Get("X-Request-Id") != "req-7" || req.Header.Get("X-Team") != "orders" {
				t.Errorf("owned header: %v, want the request ID and X-Team added", req.Header)
			}
		}
		if len(req.Header) != want {
			t.Errorf("owned=%v: the request's header has %d entries, want %d: %v", owned, len(req.Header), want, req.Header)
		}
	}
	for i := range int(up.hits.Load()) {
		if got := up.request(i).Header.Get("X-Request-Id"); got != "req-7" {
			t.Errorf("attempt %d sent X-Request-Id %q", i+1, got)
		}
	}

	oc := &framework.OutboundCall{Context: context.Background(), Route: "/x"}
	if _, err := c.Get(oc, "/x"); err != nil {
		t.Fatal(err)
	}
	if oc.Attempts() != 2 {
		t.Fatalf("ServiceClient.Do counted %d attempts, want 2", oc.Attempts())
	}
}

// partThenSilent starts an upstream that answers "part" and then sends
// nothing more until the request is cancelled or the test ends.
func partThenSilent(t *testing.T) *upstream {
	t.Helper()
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) })
	return newUpstream(t, func(w http.ResponseWriter, r *http.Request, _ int) {
		_, _ = w.Write([]byte("part"))
		w.(http.Flusher).Flush()
		select { // then silence
		case <-stop:
		case <-r.Context().Done():
		}
	})
}
