package http_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/jfastframework/jfast/framework"
	jhttp "github.com/jfastframework/jfast/plugins/http"
	"github.com/jfastframework/jfast/requestid"
)

func TestWhatTravels(t *testing.T) {
	t.Parallel()
	up := newUpstream(t, status(200))
	ctx := requestid.NewContext(context.Background(), "req-42")
	ctx = framework.ContextWithBearerToken(ctx, "tok-1")

	t.Run("request ID and configured headers", func(t *testing.T) {
		c, _, _ := newClient(t, jhttp.Upstream{BaseURL: up.URL, Headers: map[string]string{"x-team": "orders", "Accept": "application/json"}})
		before := up.hits.Load()
		if _, err := c.Get(ctx, "/x"); err != nil {
			t.Fatal(err)
		}
		r := up.request(int(before))
		if got := r.Header.Get("X-Request-ID"); got != "req-42" {
			t.Errorf("X-Request-ID = %q", got)
		}
		if got := r.Header.Get("X-Team"); got != "orders" {
			t.Errorf("X-Team = %q", got)
		}
		if got := r.Header.Get("Authorization"); got != "" {
			t.Errorf("Authorization = %q sent to an upstream without forward_authorization", got)
		}
	})
	t.Run("no request ID is invented", func(t *testing.T) {
		c, _, _ := newClient(t, jhttp.Upstream{BaseURL: up.URL})
		before := up.hits.Load()
		if _, err := c.Get(context.Background(), "/x"); err != nil {
			t.Fatal(err)
		}
		if got, ok := up.request(int(before)).Header["X-Request-Id"]; ok {
			t.Errorf("X-Request-ID = %q invented in a call without one", got)
		}
	})
	t.Run("bearer only with forward_authorization", func(t *testing.T) {
		c, _, _ := newClient(t, jhttp.Upstream{BaseURL: up.URL, ForwardAuthorization: true})
		before := up.hits.Load()
		if _, err := c.Get(ctx, "/x"); err != nil {
			t.Fatal(err)
		}
		if got := up.request(int(before)).Header.Get("Authorization"); got != "Bearer tok-1" {
			t.Errorf("Authorization = %q, want the caller's bearer", got)
		}
		// No bearer in the context: nothing is sent (and never Basic).
		if _, err := c.Get(context.Background(), "/x"); err != nil {
			t.Fatal(err)
		}
		if got := up.request(int(before) + 1).Header.Get("Authorization"); got != "" {
			t.Errorf("Authorization = %q without a caller token", got)
		}
	})
	t.Run("per-call headers win over everything", func(t *testing.T) {
		c, _, _ := newClient(t, jhttp.Upstream{BaseURL: up.URL, ForwardAuthorization: true, Headers: map[string]string{"X-Team": "orders"}})
		before := up.hits.Load()
		_, err := c.Post(ctx, "/x", map[string]int{"a": 1},
			jhttp.Header("x-team", "payments"),
			jhttp.Header("X-Request-ID", "mine"),
			jhttp.Headers(http.Header{"Authorization": {"Bearer other"}, "content-type": {"application/vnd.x+json"}}),
			jhttp.Header("Idempotency-Key", "k2"),
			jhttp.IdempotencyKey("k1"))
		if err != nil {
			t.Fatal(err)
		}
		r := up.request(int(before))
		for name, want := range map[string]string{
			"X-Team": "payments", "X-Request-ID": "mine", "Authorization": "Bearer other",
			"Content-Type": "application/vnd.x+json",
		} {
			if got := r.Header.Values(name); len(got) != 1 || got[0] != want {
				t.Errorf("%s = %q, want %q", name, got, want)
			}
		}
	})
}

// Only the framework's verified bearer token travels: a Basic credential the
// caller sent is never forwarded, and a base_url with credentials is refused.
func TestBasicNeverForwarded(t *testing.T) {
	t.Parallel()
	up := newUpstream(t, status(200))
	c, _, _ := newClient(t, jhttp.Upstream{BaseURL: up.URL, ForwardAuthorization: true})
	inbound := httptestRequestWithBasic()
	if _, err := c.Get(inbound.Context(), "/x"); err != nil {
		t.Fatal(err)
	}
	if got := up.request(0).Header.Get("Authorization"); got != "" {
		t.Errorf("Authorization = %q forwarded from a Basic caller", got)
	}
	u, _ := url.Parse(up.URL)
	u.User = url.UserPassword("user", "secret")
	_, err := jhttp.NewClient(jhttp.Upstream{Name: "billing", BaseURL: u.String()})
	if err == nil || !strings.Contains(err.Error(), "credentials") || strings.Contains(err.Error(), "secret") {
		t.Fatalf("NewClient with credentials in base_url: %v", err)
	}
}

func httptestRequestWithBasic() *http.Request {
	r, _ := http.NewRequest(http.MethodGet, "http://svc/orders", nil)
	r.SetBasicAuth("alice", "password")
	return r
}

func TestRedirectsNotFollowed(t *testing.T) {
	t.Parallel()
	elsewhere := newUpstream(t, status(200))
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request, _ int) {
		http.Redirect(w, r, elsewhere.URL+"/stolen", http.StatusFound)
	})
	c, _, _ := newClient(t, jhttp.Upstream{BaseURL: up.URL, ForwardAuthorization: true})
	ctx := framework.ContextWithBearerToken(context.Background(), "tok-1")
	resp, err := c.Get(ctx, "/x")
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusFound || resp.Header.Get("Location") != elsewhere.URL+"/stolen" {
		t.Fatalf("got %d %q, want the 302 as is", resp.StatusCode, resp.Header.Get("Location"))
	}
	if got := elsewhere.hits.Load(); got != 0 {
		t.Fatalf("the redirect was followed (%d requests elsewhere)", got)
	}
}

func TestBodies(t *testing.T) {
	t.Parallel()
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request, _ int) {
		b, _ := io.ReadAll(r.Body)
		w.Header().Set("X-Content-Type", r.Header.Get("Content-Type"))
		_, _ = w.Write(b)
	})
	c, _, _ := newClient(t, jhttp.Upstream{BaseURL: up.URL})
	cases := []struct {
		body        any
		wantBody    string
		contentType string
	}{
		{[]byte{1, 2, 3}, "\x01\x02\x03", "application/octet-stream"},
		{"hello", "hello", "text/plain; charset=utf-8"},
		{url.Values{"a": {"1"}, "b": {"x y"}}, "a=1&b=x+y", "application/x-www-form-urlencoded"},
		{map[string]int{"n": 7}, `{"n":7}`, "application/json"},
		{jhttp.JSON{Value: `{"raw":true}`}, `{"raw":true}`, "application/json"},
		{jhttp.JSON{Value: []int{1, 2}}, `[1,2]`, "application/json"},
	}
	for _, tc := range cases {
		resp, err := c.Put(context.Background(), "/echo", tc.body)
		if err != nil {
			t.Fatal(err)
		}
		if got := string(jhttp.BodyBytes(resp)); got != tc.wantBody {
			t.Errorf("%T body = %q, want %q", tc.body, got, tc.wantBody)
		}
		if got := resp.Header.Get("X-Content-Type"); got != tc.contentType {
			t.Errorf("%T Content-Type = %q, want %q", tc.body, got, tc.contentType)
		}
	}

	// The body is read before the call returns, and can be read again.
	resp, err := c.Post(context.Background(), "/echo", map[string]string{"k": "v"})
	if err != nil {
		t.Fatal(err)
	}
	first, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	second, _ := io.ReadAll(resp.Body)
	if string(first) != `{"k":"v"}` || string(second) != string(first) {
		t.Errorf("reads: %q then %q", first, second)
	}
	var v map[string]string
	if err := jhttp.DecodeJSON(resp, &v); err != nil || v["k"] != "v" {
		t.Errorf("DecodeJSON: %v, %v", v, err)
	}

	// A streaming body, an unencodable value or a path not starting with /
	// is refused before anything is sent.
	before := up.hits.Load()
	if _, err := c.Post(context.Background(), "/echo", strings.NewReader("x")); err == nil {
		t.Error("an io.Reader body was accepted")
	}
	if _, err := c.Post(context.Background(), "/echo", func() {}); err == nil {
		t.Error("a func body was accepted")
	}
	if _, err := c.Get(context.Background(), "@evil.example/x"); err == nil {
		t.Error("a path without a leading / was accepted")
	}
	if up.hits.Load() != before {
		t.Error("a refused call sent a request")
	}
}

// The telemetry seam: a TransportWrapper sees every attempt under the context
// a CallObserver returned, and the observer sees the call's end once.
func TestTelemetrySeam(t *testing.T) {
	t.Parallel()
	up := newUpstream(t, status(503))
	type spanKey struct{}
	var attempts atomic.Int64
	var ended []string
	wrap := func(upstream string, rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(r *http.Request) (*http.Response, error) {
			attempts.Add(1)
			r = r.Clone(r.Context())
			r.Header.Set("traceparent", r.Context().Value(spanKey{}).(string)+"-"+upstream)
			return rt.RoundTrip(r)
		})
	}
	observe := func(ctx context.Context, upstream, method string) (context.Context, func(int, int, error)) {
		return context.WithValue(ctx, spanKey{}, "span"), func(status, n int, err error) {
			ended = append(ended, method+" "+upstream+" "+http.StatusText(status)+" "+string(rune('0'+n)))
		}
	}
	c, _, _ := newClient(t, noBudget(jhttp.Upstream{BaseURL: up.URL}), jhttp.WithTransportWrapper(wrap), jhttp.WithCallObserver(observe))
	if _, err := c.Get(context.Background(), "/x"); err != nil {
		t.Fatal(err)
	}
	if attempts.Load() != 3 || up.request(2).Header.Get("traceparent") != "span-billing" {
		t.Errorf("wrapper saw %d attempts, traceparent %q", attempts.Load(), up.request(2).Header.Get("traceparent"))
	}
	if len(ended) != 1 || ended[0] != "GET billing Service Unavailable 3" {
		t.Errorf("observer saw %q", ended)
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func TestClosedClient(t *testing.T) {
	t.Parallel()
	up := newUpstream(t, status(200))
	c, _, _ := newClient(t, jhttp.Upstream{BaseURL: up.URL})
	_ = c.Close()
	_, err := c.Get(context.Background(), "/x")
	var ua *jhttp.UpstreamUnavailable
	if !errors.As(err, &ua) || up.hits.Load() != 0 {
		t.Fatalf("after Close: %v, %d requests", err, up.hits.Load())
	}
}
