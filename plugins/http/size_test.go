package http_test

import (
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/framework/resilience"
	"github.com/jfastframework/jfast/jfasttest"
	jhttp "github.com/jfastframework/jfast/plugins/http"
	"github.com/jfastframework/jfast/problem"
)

// countBody is a TransportWrapper that counts the response body bytes the
// client reads off the connection, into n.
func countBody(n *atomic.Int64) jhttp.TransportWrapper {
	return func(_ string, rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(r *http.Request) (*http.Response, error) {
			resp, err := rt.RoundTrip(r)
			if err == nil && resp.Body != http.NoBody {
				resp.Body = &countingBody{ReadCloser: resp.Body, n: n}
			}
			return resp, err
		})
	}
}

type countingBody struct {
	io.ReadCloser
	n *atomic.Int64
}

func (b *countingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.n.Add(int64(n))
	return n, err
}

// sized answers with a body of size bytes, with a Content-Length or (chunked)
// without one, flushing as it goes so the client cannot see the size upfront.
func sized(size int, withLength bool, code int) func(http.ResponseWriter, *http.Request, int) {
	return func(w http.ResponseWriter, _ *http.Request, _ int) {
		if withLength {
			w.Header().Set("Content-Length", strconv.Itoa(size))
		}
		w.WriteHeader(code)
		chunk := []byte(strings.Repeat("x", 4096))
		for left := size; left > 0; left -= len(chunk) {
			if _, err := w.Write(chunk[:min(left, len(chunk))]); err != nil {
				return // the client went away
			}
			if !withLength {
				w.(http.Flusher).Flush()
			}
		}
	}
}

// A body of exactly max_response_bytes passes; one byte more fails the call
// with ResponseTooLarge, having read nothing (a Content-Length over the cap) or
// exactly cap+1 bytes (no Content-Length), once, as a 502 naming the upstream.
func TestResponseSizeCap(t *testing.T) {
	t.Parallel()
	const limit = 64 << 10
	cases := []struct {
		name       string
		size       int
		withLength bool
		tooLarge   bool
		read       int64 // body bytes the client read
	}{
		{"exactly the cap, Content-Length", limit, true, false, limit},
		{"exactly the cap, chunked", limit, false, false, limit},
		{"cap+1, Content-Length", limit + 1, true, true, 0},
		{"cap+1, chunked", limit + 1, false, true, limit + 1},
		{"ten times the cap, chunked", 10 * limit, false, true, limit + 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			up := newUpstream(t, sized(tc.size, tc.withLength, 200))
			var read atomic.Int64
			c, _, reg := newClient(t, noBudget(jhttp.Upstream{BaseURL: up.URL, MaxResponseBytes: limit}),
				jhttp.WithTransportWrapper(countBody(&read)))
			resp, err := c.Get(context.Background(), "/report")
			if got := read.Load(); got != tc.read {
				t.Errorf("the client read %d body bytes, want %d", got, tc.read)
			}
			if !tc.tooLarge {
				if err != nil {
					t.Fatal(err)
				}
				if got := len(jhttp.BodyBytes(resp)); got != tc.size {
					t.Fatalf("body = %d bytes, want %d", got, tc.size)
				}
				return
			}
			var big *jhttp.ResponseTooLarge
			if !errors.As(err, &big) || big.Limit != limit || big.StatusCode != 200 || resp != nil {
				t.Fatalf("resp %v, err = %v (%T), want ResponseTooLarge with limit %d and status 200", resp, err, err, limit)
			}
			var ue *jhttp.UpstreamError
			if !errors.As(err, &ue) || ue.Upstream != "billing" {
				t.Fatalf("errors.As UpstreamError: %v", ue)
			}
			// Both the kind and the UpstreamError inside render the same 502.
			for _, r := range []problem.Renderer{big, ue} {
				p := r.Problem()
				if p.Status != 502 || p.Extensions["upstream"] != "billing" || !strings.Contains(p.Detail, "billing") {
					t.Errorf("problem = %+v, want a 502 naming billing", p)
				}
			}
			if p, ok := problem.As(err); !ok || p.Status != 502 {
				t.Errorf("problem.As = %+v", p)
			}
			if got := up.hits.Load(); got != 1 {
				t.Errorf("the upstream saw %d requests, want 1 (not retried)", got)
			}
			if got := metric(t, reg, "jfast_client_calls_total", "outcome", "response_too_large"); got != 1 {
				t.Errorf("response_too_large calls = %v, want 1", got)
			}
			if got := metric(t, reg, "jfast_client_retries_total"); got != 0 {
				t.Errorf("retries = %v, want 0", got)
			}
		})
	}
}

// An endless body: the client stops at cap+1 bytes and closes the connection,
// which the upstream sees as a failed write long before it is done.
func TestEndlessResponseCut(t *testing.T) {
	t.Parallel()
	const limit = 1 << 20
	const endless = 1 << 30
	var written atomic.Int64
	writeErr := make(chan error, 1)
	up := newUpstream(t, func(w http.ResponseWriter, _ *http.Request, _ int) {
		w.WriteHeader(200)
		chunk := []byte(strings.Repeat("x", 32<<10))
		for written.Load() < endless {
			n, err := w.Write(chunk)
			written.Add(int64(n))
			if err == nil {
				err = http.NewResponseController(w).Flush()
			}
			if err != nil {
				writeErr <- err
				return
			}
		}
		writeErr <- nil
	})
	var read atomic.Int64
	c, _, _ := newClient(t, jhttp.Upstream{BaseURL: up.URL, MaxResponseBytes: limit},
		jhttp.WithTransportWrapper(countBody(&read)))
	_, err := c.Get(context.Background(), "/stream")
	var big *jhttp.ResponseTooLarge
	if !errors.As(err, &big) {
		t.Fatalf("err = %v (%T), want ResponseTooLarge", err, err)
	}
	if got := read.Load(); got != limit+1 {
		t.Errorf("the client read %d body bytes, want %d", got, limit+1)
	}
	select {
	case err := <-writeErr:
		if err == nil {
			t.Fatalf("the upstream wrote all %d bytes: the client did not go away", endless)
		}
		t.Logf("the upstream's write failed after %d bytes: %v", written.Load(), err)
	case <-time.After(time.Minute): // a hang guard, not a timing assertion
		t.Fatalf("the upstream is still writing after %d bytes: the connection was not closed", written.Load())
	}
	if got := up.hits.Load(); got != 1 {
		t.Errorf("the upstream saw %d requests, want 1", got)
	}
}

// Too large is an answer: never retried, and for the breaker the answer its
// status says (a 200 here, a success): many such calls leave the breaker
// closed with no failure counted, one request each.
func TestResponseTooLargeIsAnAnswer(t *testing.T) {
	t.Parallel()
	var size atomic.Int64
	size.Store(2048)
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request, n int) {
		sized(int(size.Load()), false, 200)(w, r, n)
	})
	c, _, _ := newClient(t, noBudget(jhttp.Upstream{BaseURL: up.URL, MaxResponseBytes: 1024, PolicyConfig: resilience.PolicyConfig{Attempts: 4, BreakerConfig: resilience.BreakerConfig{BreakerFailures: 2}}}))
	const calls = 20
	for range calls {
		_, err := c.Get(context.Background(), "/report")
		var big *jhttp.ResponseTooLarge
		if !errors.As(err, &big) {
			t.Fatalf("err = %v (%T), want ResponseTooLarge", err, err)
		}
	}
	if got := up.hits.Load(); got != calls {
		t.Errorf("the upstream saw %d requests for %d calls, want one each", got, calls)
	}
	s := c.Breaker().Snapshot()
	if s.State.String() != "closed" || s.Consecutive != 0 || s.WindowFailures != 0 {
		t.Errorf("breaker = %+v, want closed with no failure counted", s)
	}
	// The client is unharmed by the connections it closed.
	size.Store(10)
	if resp, err := c.Get(context.Background(), "/report"); err != nil || len(jhttp.BodyBytes(resp)) != 10 {
		t.Fatalf("a small response after the large ones: %v", err)
	}
}

// The cap counts the body as the service gets it: a gzip body of a few
// kilobytes that inflates past the cap (net/http asks for gzip and inflates
// it) is cut at cap+1 inflated bytes.
func TestGzipBodyInflatingPastCap(t *testing.T) {
	t.Parallel()
	const limit = 64 << 10
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request, _ int) {
		if !strings.Contains(r.Header.Get("Accept-Encoding"), "gzip") {
			t.Errorf("Accept-Encoding = %q: the client does not ask for gzip", r.Header.Get("Accept-Encoding"))
		}
		w.Header().Set("Content-Encoding", "gzip")
		gz := gzip.NewWriter(w)
		zeros := make([]byte, 16<<10)
		for range 10 * limit / len(zeros) { // 640 KiB inflated, about 1 KiB on the wire
			if _, err := gz.Write(zeros); err != nil {
				return
			}
		}
		_ = gz.Close()
	})
	var read atomic.Int64
	c, _, _ := newClient(t, jhttp.Upstream{BaseURL: up.URL, MaxResponseBytes: limit},
		jhttp.WithTransportWrapper(countBody(&read)))
	_, err := c.Get(context.Background(), "/bomb")
	var big *jhttp.ResponseTooLarge
	if !errors.As(err, &big) {
		t.Fatalf("err = %v (%T), want ResponseTooLarge", err, err)
	}
	if got := read.Load(); got != limit+1 {
		t.Errorf("the client read %d inflated bytes, want %d", got, limit+1)
	}
}

// A body over the cap on the last attempt wins over an earlier attempt's
// response: the call fails, after the one retry the 503 allowed.
func TestResponseTooLargeAfterRetry(t *testing.T) {
	t.Parallel()
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request, n int) {
		if n == 1 {
			w.WriteHeader(503)
			return
		}
		sized(2048, false, 200)(w, r, n)
	})
	c, _, _ := newClient(t, noBudget(jhttp.Upstream{BaseURL: up.URL, MaxResponseBytes: 1024, PolicyConfig: resilience.PolicyConfig{Attempts: 4}}))
	resp, err := c.Get(context.Background(), "/report")
	var big *jhttp.ResponseTooLarge
	if !errors.As(err, &big) || resp != nil {
		t.Fatalf("resp %v, err = %v (%T), want ResponseTooLarge", resp, err, err)
	}
	if got := up.hits.Load(); got != 2 {
		t.Errorf("the upstream saw %d requests, want 2 (the 503 retried once, the large body not)", got)
	}
}

// A HEAD answer's Content-Length describes a body that is not sent: it is no
// reason to fail.
func TestHeadWithLargeContentLength(t *testing.T) {
	t.Parallel()
	up := newUpstream(t, func(w http.ResponseWriter, _ *http.Request, _ int) {
		w.Header().Set("Content-Length", strconv.Itoa(1<<30))
		w.WriteHeader(200)
	})
	c, _, _ := newClient(t, jhttp.Upstream{BaseURL: up.URL, MaxResponseBytes: 1024})
	resp, err := c.Head(context.Background(), "/big")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("HEAD: %v, %v", resp, err)
	}
}

// Through a service: max_response_bytes from the file, and a route that lets
// the error escape answers 502 problem+json naming the upstream.
func TestResponseTooLargeInService(t *testing.T) {
	t.Parallel()
	up := newUpstream(t, sized(1025, false, 200))
	toml := "[plugins]\nenabled = [\"http\"]\n[plugin.http.upstreams.billing]\nbase_url = \"" + up.URL + "\"\nmax_response_bytes = 1024\n"
	svc := jfasttest.Start(t, jfasttest.Options{
		TOML:    toml,
		Plugins: []framework.Plugin{jhttp.New()},
		Routes: func(app *framework.App, r chi.Router) error {
			billing, err := jhttp.Client(app, "billing")
			if err != nil {
				return err
			}
			if got := billing.Upstream().MaxResponseBytes; got != 1024 {
				t.Errorf("max_response_bytes = %d, want the file's 1024", got)
			}
			r.Method(http.MethodGet, "/report", framework.Handler(func(w http.ResponseWriter, r *http.Request) error {
				resp, err := billing.Get(r.Context(), "/report")
				if err != nil {
					return err
				}
				return framework.JSON(w, http.StatusOK, map[string]int{"bytes": len(jhttp.BodyBytes(resp))})
			}))
			return nil
		},
	})
	res := svc.Get(t, "/report")
	if res.Status != 502 || !strings.HasPrefix(res.Header.Get("Content-Type"), "application/problem+json") {
		t.Fatalf("GET /report: %d %q %s", res.Status, res.Header.Get("Content-Type"), res.Body)
	}
	var body map[string]any
	if err := json.Unmarshal(res.Body, &body); err != nil || body["upstream"] != "billing" || body["status"] != float64(502) {
		t.Fatalf("problem body = %s", res.Body)
	}
	if strings.Contains(string(res.Body), "127.0.0.1") {
		t.Errorf("the problem leaks the upstream's address: %s", res.Body)
	}
}
