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

// The body of /ready is exactly the shape of DESIGN.md §5's example.
func TestReadyJSONShape(t *testing.T) {
	t.Parallel()
	a := readiness.NewAggregator(2*time.Second, readiness.Check{
		Name:     "cache",
		Critical: true, // declared critical, but an open breaker is not a critical failure
		Run: fixed(readiness.Failed("redis unreachable: calls to 'redis' are suspended for 3.2s", false,
			map[string]any{"breaker": map[string]any{"state": "open", "retry_after": 3.2}})),
	})
	resp, body := get(t, a.Handler(), "/ready")

	const design = `{"status": "degraded", "checks": {"cache": {"healthy": false, "status": "fail",
	 "detail": "redis unreachable: calls to 'redis' are suspended for 3.2s", "critical": false,
	 "meta": {"breaker": {"state": "open", "retry_after": 3.2}}}}}`
	var got, want any
	if err := json.Unmarshal([]byte(body), &got); err != nil {
		t.Fatalf("body is not JSON: %v\n%s", err, body)
	}
	if err := json.Unmarshal([]byte(design), &want); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("body:\n got %s\nwant %s", body, design)
	}
	// Member order too: healthy, status, detail, critical, meta.
	const exact = `{"status":"degraded","checks":{"cache":{"healthy":false,"status":"fail",` +
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
		body   string
	}{
		{"no checks", nil, 200, `{"status":"ok","checks":{}}`},
		{"ok", []readiness.Check{{Name: "db", Critical: true, Run: fixed(readiness.Passed("", map[string]any{"pool": 4}))}},
			200, `{"status":"ok","checks":{"db":{"healthy":true,"status":"pass","critical":false,"meta":{"pool":4}}}}`},
		{"unavailable", []readiness.Check{
			{Name: "db", Critical: true, Run: fixed(readiness.Failed("db unreachable: connection refused", true, nil))},
			{Name: "cache", Run: fixed(readiness.Passed("", nil))},
		}, 503, `{"status":"unavailable","checks":{"cache":{"healthy":true,"status":"pass","critical":false},` +
			`"db":{"healthy":false,"status":"fail","detail":"db unreachable: connection refused","critical":true}}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			resp, body := get(t, readiness.NewAggregator(time.Second, tt.checks...).Handler(), "/ready")
			if resp.StatusCode != tt.status || body != tt.body {
				t.Fatalf("got %d %s\nwant %d %s", resp.StatusCode, body, tt.status, tt.body)
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
	want := `{"status":"unavailable","checks":{"cache":{"healthy":true,"status":"pass","critical":false},` +
		`"db":{"healthy":false,"status":"timeout","detail":"no answer within 250ms","critical":true}}}`
	if resp.StatusCode != 503 || body != want {
		t.Fatalf("got %d %s\nwant 503 %s", resp.StatusCode, body, want)
	}
}

// A Meta that cannot be encoded still yields a valid /ready body.
func TestReadyUnencodableMeta(t *testing.T) {
	t.Parallel()
	a := readiness.NewAggregator(time.Second, readiness.Check{Name: "odd",
		Run: fixed(readiness.Failed("x", false, map[string]any{"fn": func() {}}))})
	resp, body := get(t, a.Handler(), "/ready")
	if resp.StatusCode != 200 || body != `{"status":"degraded","checks":{"odd":{"healthy":false,"status":"fail","detail":"x","critical":false}}}` {
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
		return readiness.Failed("request context not passed", false, nil)
	}})
	h := a.Handler()
	withValue := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), key{}, "from-request")))
	})
	if _, body := get(t, withValue, "/ready"); body != `{"status":"ok","checks":{"ctx":{"healthy":true,"status":"pass","critical":false}}}` {
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
		readiness.Check{Name: "db", Critical: true, Run: fixed(readiness.Failed("dial 10.0.0.7:5432 as orders_app: refused", true,
			map[string]any{"database": "orders_prod"}))},
		readiness.Check{Name: "cache", Run: fixed(readiness.Passed("redis at 10.0.0.8:6379", nil))},
	)
	resp, body := get(t, a.RedactedHandler(), "/ready")
	const want = `{"status":"unavailable","checks":{"cache":{"healthy":true,"status":"pass","critical":false},` +
		`"db":{"healthy":false,"status":"fail","critical":true}}}`
	if resp.StatusCode != 503 || body != want || resp.Header.Get("Cache-Control") != "no-store" {
		t.Fatalf("redacted /ready = %d %s\nwant 503 %s", resp.StatusCode, body, want)
	}
	full := a.Run(context.Background())
	if r := full.Redacted(); r.HTTPStatus() != full.HTTPStatus() || r.Checks["db"].Detail != "" || r.Checks["db"].Meta != nil || full.Checks["db"].Detail == "" {
		t.Fatalf("Redacted = %+v (from %+v)", r, full)
	}
}
