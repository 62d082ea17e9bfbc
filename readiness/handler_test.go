package readiness_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"testing"
	"time"

	"github.com/jfastframework/jfast/readiness"
)

func get(t *testing.T, h http.Handler, path string) (*http.Response, string) {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	resp, err := srv.Client().Get(srv.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(b)
}

// The body of a 200 /ready is the shape docs/readiness.md shows, plus the
// verdict member every answer carries.
func TestReadyJSONShape(t *testing.T) {
	t.Parallel()
	a := readiness.NewAggregator(2*time.Second, readiness.Check{
		Name: "cache", // not declared critical: an unreachable cache only degrades
		Run: fixed(readiness.Unreachable("redis unreachable: calls to 'redis' are suspended for 3.2s",
			map[string]any{"breaker": map[string]any{"state": "open", "retry_after": 3.2}})),
	})
	resp, body := get(t, a.Handler(), "/ready")

	const design = `{"status": "degraded", "checks": {"cache": {"healthy": false, "status": "fail",
	 "detail": "redis unreachable: calls to 'redis' are suspended for 3.2s", "critical": false,
	 "meta": {"breaker": {"state": "open", "retry_after": 3.2}}}}}`
	var got, want map[string]any
	if err := json.Unmarshal([]byte(body), &got); err != nil {
		t.Fatalf("body is not JSON: %v\n%s", err, body)
	}
	if err := json.Unmarshal([]byte(design), &want); err != nil {
		t.Fatal(err)
	}
	want["verdict"] = "degraded"
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("body:\n got %s\nwant %s", body, design)
	}
	// Member order too: healthy, status, detail, critical, meta.
	const exact = `{"status":"degraded","verdict":"degraded","checks":{"cache":{"healthy":false,"status":"fail",` +
		`"detail":"redis unreachable: calls to 'redis' are suspended for 3.2s","critical":false,` +
		`"meta":{"breaker":{"retry_after":3.2,"state":"open"}}}}}`
	if body != exact {
		t.Fatalf("body:\n got %s\nwant %s", body, exact)
	}
	if resp.StatusCode != 200 {
		t.Errorf("status = %d, want 200 for degraded", resp.StatusCode)
	}
	if got := resp.Header.Get("Content-Type"); got != "application/json" {
		t.Errorf("Content-Type = %q", got)
	}
	if got := resp.Header.Get("Cache-Control"); got != "no-store" {
		t.Errorf("Cache-Control = %q, want no-store", got)
	}
}

func TestReadyStatusCodes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		checks []readiness.Check
		status int
		ctype  string
		body   string
	}{
		{"no checks", nil, 200, "application/json", `{"status":"ok","verdict":"ok","checks":{}}`},
		{"ok", []readiness.Check{{Name: "db", Critical: true, Run: fixed(readiness.Passed("", map[string]any{"pool": 4}))}},
			200, "application/json", `{"status":"ok","verdict":"ok","checks":{"db":{"healthy":true,"status":"pass","critical":false,"meta":{"pool":4}}}}`},
		{"declared critical, impaired", []readiness.Check{{Name: "mail", Critical: true, Run: fixed(readiness.Impaired("last delivery failed", nil))}},
			200, "application/json", `{"status":"degraded","verdict":"degraded","checks":{"mail":{"healthy":false,"status":"fail","detail":"last delivery failed","critical":false}}}`},
		{"unavailable", []readiness.Check{
			{Name: "db", Critical: true, Run: fixed(readiness.Unreachable("db unreachable: connection refused", nil))},
			{Name: "cache", Run: fixed(readiness.Passed("", nil))},
		}, 503, "application/problem+json", `{"type":"about:blank","title":"Service Unavailable","status":503,` +
			`"detail":"critical check failed: db","instance":"/ready",` +
			`"checks":{"cache":{"healthy":true,"status":"pass","critical":false},` +
			`"db":{"healthy":false,"status":"fail","detail":"db unreachable: connection refused","critical":true}},"verdict":"unavailable"}`},
		{"two critical failures", []readiness.Check{
			{Name: "queue", Critical: true, Run: fixed(readiness.Unreachable("queue (postgres) unreachable", nil))},
			{Name: "db", Critical: true, Run: fixed(readiness.Unreachable("db unreachable", nil))},
			{Name: "cache", Run: fixed(readiness.Unreachable("redis unreachable", nil))},
		}, 503, "application/problem+json", `{"type":"about:blank","title":"Service Unavailable","status":503,` +
			`"detail":"critical checks failed: db, queue","instance":"/ready",` +
			`"checks":{"cache":{"healthy":false,"status":"fail","detail":"redis unreachable","critical":false},` +
			`"db":{"healthy":false,"status":"fail","detail":"db unreachable","critical":true},` +
			`"queue":{"healthy":false,"status":"fail","detail":"queue (postgres) unreachable","critical":true}},"verdict":"unavailable"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			resp, body := get(t, readiness.NewAggregator(time.Second, tt.checks...).Handler(), "/ready")
			if resp.StatusCode != tt.status || body != tt.body {
				t.Fatalf("got %d %s\nwant %d %s", resp.StatusCode, body, tt.status, tt.body)
			}
			if got := resp.Header.Get("Content-Type"); got != tt.ctype {
				t.Errorf("Content-Type = %q, want %q", got, tt.ctype)
			}
			if got := resp.Header.Get("Cache-Control"); got != "no-store" {
				t.Errorf("Cache-Control = %q, want no-store", got)
			}
			// Either answer decodes into a Result with its verdict.
			var res readiness.Result
			if err := json.Unmarshal([]byte(body), &res); err != nil {
				t.Fatal(err)
			}
			if want := map[int]readiness.Overall{200: res.Status, 503: readiness.Unavailable}[tt.status]; res.Status != want || res.Status == "" || len(res.Checks) != len(tt.checks) {
				t.Errorf("decoded %+v", res)
			}
		})
	}
}

// /ready over a real socket answers within timeout + 100 ms when a check
// hangs.
func TestReadyBoundedOverHTTP(t *testing.T) {
	t.Parallel()
	run, release := blocked(t)
	defer release()
	a := readiness.NewAggregator(250*time.Millisecond,
		readiness.Check{Name: "db", Critical: true, Run: run},
		readiness.Check{Name: "cache", Run: fixed(readiness.Passed("", nil))})
	start := time.Now()
	resp, body := get(t, a.Handler(), "/ready")
	if took := time.Since(start); took > 350*time.Millisecond {
		t.Fatalf("/ready took %v, want at most 350ms", took)
	}
	want := `{"type":"about:blank","title":"Service Unavailable","status":503,"detail":"critical check failed: db","instance":"/ready",` +
		`"checks":{"cache":{"healthy":true,"status":"pass","critical":false},` +
		`"db":{"healthy":false,"status":"timeout","detail":"no answer within 250ms","critical":true}},"verdict":"unavailable"}`
	if resp.StatusCode != 503 || body != want {
		t.Fatalf("got %d %s\nwant 503 %s", resp.StatusCode, body, want)
	}
}

// A Meta that cannot be encoded still yields a valid /ready body.
func TestReadyUnencodableMeta(t *testing.T) {
	t.Parallel()
	a := readiness.NewAggregator(time.Second, readiness.Check{Name: "odd",
		Run: fixed(readiness.Impaired("x", map[string]any{"fn": func() {}}))})
	resp, body := get(t, a.Handler(), "/ready")
	if resp.StatusCode != 200 || body != `{"status":"degraded","verdict":"degraded","checks":{"odd":{"healthy":false,"status":"fail","detail":"x","critical":false}}}` {
		t.Fatalf("got %d %s", resp.StatusCode, body)
	}
}

// /ready runs the checks with the request's context.
func TestReadyUsesRequestContext(t *testing.T) {
	t.Parallel()
	type key struct{}
	a := readiness.NewAggregator(time.Second, readiness.Check{Name: "ctx", Run: func(ctx context.Context) readiness.Report {
		if ctx.Value(key{}) == "from-request" {
			return readiness.Passed("", nil)
		}
		return readiness.Impaired("request context not passed", nil)
	}})
	h := a.Handler()
	withValue := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), key{}, "from-request")))
	})
	if _, body := get(t, withValue, "/ready"); body != `{"status":"ok","verdict":"ok","checks":{"ctx":{"healthy":true,"status":"pass","critical":false}}}` {
		t.Fatalf("body %s", body)
	}
}

func TestLive(t *testing.T) {
	t.Parallel()
	resp, body := get(t, readiness.LiveHandler(), "/live")
	if resp.StatusCode != 200 || body != `{"status":"ok"}` {
		t.Fatalf("got %d %s", resp.StatusCode, body)
	}
	if got := resp.Header.Get("Cache-Control"); got != "no-store" {
		t.Errorf("Cache-Control = %q, want no-store", got)
	}
	if got := resp.Header.Get("Content-Type"); got != "application/json" {
		t.Errorf("Content-Type = %q", got)
	}
}

// The redacted /ready keeps the status code, the overall status and each
// check's healthy, status and critical, and drops detail and meta.
func TestRedactedHandler(t *testing.T) {
	t.Parallel()
	a := readiness.NewAggregator(2*time.Second,
		readiness.Check{Name: "db", Critical: true, Run: fixed(readiness.Unreachable("dial 10.0.0.7:5432 as orders_app: refused",
			map[string]any{"database": "orders_prod"}))},
		readiness.Check{Name: "cache", Run: fixed(readiness.Passed("redis at 10.0.0.8:6379", nil))},
	)
	resp, body := get(t, a.RedactedHandler(), "/ready")
	const want = `{"type":"about:blank","title":"Service Unavailable","status":503,"detail":"critical check failed: db","instance":"/ready",` +
		`"checks":{"cache":{"healthy":true,"status":"pass","critical":false},` +
		`"db":{"healthy":false,"status":"fail","critical":true}},"verdict":"unavailable"}`
	if resp.StatusCode != 503 || body != want || resp.Header.Get("Cache-Control") != "no-store" {
		t.Fatalf("redacted /ready = %d %s\nwant 503 %s", resp.StatusCode, body, want)
	}
	full := a.Run(context.Background())
	if r := full.Redacted(); r.HTTPStatus() != full.HTTPStatus() || r.Checks["db"].Detail != "" || r.Checks["db"].Meta != nil || full.Checks["db"].Detail == "" {
		t.Fatalf("Redacted = %+v (from %+v)", r, full)
	}
}
