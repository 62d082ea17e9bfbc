package http_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/framework/resilience"
	"github.com/jfastframework/jfast/jfasttest"
	jhttp "github.com/jfastframework/jfast/plugins/http"
)

func TestRetryRules(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name     string
		method   string
		status   int
		opts     []jhttp.CallOption
		requests int
	}{
		{"GET 503 is retried", http.MethodGet, 503, nil, 3},
		{"GET 502 is retried", http.MethodGet, 502, nil, 3},
		{"GET 504 is retried", http.MethodGet, 504, nil, 3},
		{"GET 429 is retried", http.MethodGet, 429, nil, 3},
		{"GET 500 is not retried", http.MethodGet, 500, nil, 1},
		{"GET 501 is not retried", http.MethodGet, 501, nil, 1},
		{"GET 404 is not retried", http.MethodGet, 404, nil, 1},
		{"GET 400 is not retried", http.MethodGet, 400, nil, 1},
		{"GET 409 is not retried", http.MethodGet, 409, nil, 1},
		{"GET 200 is not retried", http.MethodGet, 200, nil, 1},
		{"HEAD 503 is retried", http.MethodHead, 503, nil, 3},
		{"PUT 503 is retried", http.MethodPut, 503, nil, 3},
		{"DELETE 503 is retried", http.MethodDelete, 503, nil, 3},
		{"OPTIONS 503 is retried", http.MethodOptions, 503, nil, 3},
		{"POST 503 is not retried", http.MethodPost, 503, nil, 1},
		{"PATCH 503 is not retried", http.MethodPatch, 503, nil, 1},
		{"POST with an idempotency key is retried", http.MethodPost, 503, []jhttp.CallOption{jhttp.IdempotencyKey("charge-7")}, 3},
		{"PATCH with an idempotency key is retried", http.MethodPatch, 503, []jhttp.CallOption{jhttp.IdempotencyKey("k")}, 3},
		{"POST with Retry(true) is retried", http.MethodPost, 503, []jhttp.CallOption{jhttp.Retry(true)}, 3},
		{"POST with Retry(true) is not retried on 500", http.MethodPost, 500, []jhttp.CallOption{jhttp.Retry(true)}, 1},
		{"GET with Retry(false) is not retried", http.MethodGet, 503, []jhttp.CallOption{jhttp.Retry(false)}, 1},
		{"Retry(false) wins over an idempotency key", http.MethodPost, 503, []jhttp.CallOption{jhttp.Retry(false), jhttp.IdempotencyKey("k")}, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			up := newUpstream(t, status(tc.status))
			c, clk, reg := newClient(t, noBudget(jhttp.Upstream{BaseURL: up.URL}))
			var body any
			if tc.method == http.MethodPost || tc.method == http.MethodPatch || tc.method == http.MethodPut {
				body = map[string]int{"amount": 5}
			}
			resp, err := c.Do(context.Background(), tc.method, "/x", body, tc.opts...)
			if err != nil {
				t.Fatalf("a call that got a response must not fail: %v", err)
			}
			if resp.StatusCode != tc.status {
				t.Errorf("status = %d, want the last response's %d", resp.StatusCode, tc.status)
			}
			if got := int(up.hits.Load()); got != tc.requests {
				t.Errorf("upstream got %d requests, want %d", got, tc.requests)
			}
			if got := len(clk.Sleeps()); got != tc.requests-1 {
				t.Errorf("%d waits between attempts, want %d", got, tc.requests-1)
			}
			if got := metric(t, reg, "jfast_client_attempts_total", "dependency", "billing"); int(got) != tc.requests {
				t.Errorf("attempts metric = %v, want %d", got, tc.requests)
			}
			if got := metric(t, reg, "jfast_client_retries_total", "dependency", "billing"); int(got) != tc.requests-1 {
				t.Errorf("retries metric = %v, want %d", got, tc.requests-1)
			}
		})
	}
}

func TestIdempotencyKeyOnEveryAttempt(t *testing.T) {
	t.Parallel()
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request, n int) {
		if n < 3 {
			w.WriteHeader(503)
			return
		}
		w.WriteHeader(201)
	})
	c, _, _ := newClient(t, noBudget(jhttp.Upstream{BaseURL: up.URL}))
	resp, err := c.Post(context.Background(), "/payments", map[string]any{"order_id": 7}, jhttp.IdempotencyKey("charge-7"))
	if err != nil || resp.StatusCode != 201 {
		t.Fatalf("got %v, %v; want 201", resp, err)
	}
	for i := range 3 {
		r := up.request(i)
		if got := r.Header.Get("Idempotency-Key"); got != "charge-7" {
			t.Errorf("attempt %d: Idempotency-Key = %q", i+1, got)
		}
	}
}

// A dropped connection (the upstream closes it without answering) is retried
// for a GET and returned as UpstreamUnavailable when retries run out.
func TestDroppedConnectionRetried(t *testing.T) {
	t.Parallel()
	up := newUpstream(t, func(w http.ResponseWriter, _ *http.Request, _ int) {
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			_ = conn.Close()
		}
	})
	c, _, reg := newClient(t, noBudget(jhttp.Upstream{BaseURL: up.URL}))
	_, err := c.Get(context.Background(), "/x")
	var ua *jhttp.UpstreamUnavailable
	if !errors.As(err, &ua) {
		t.Fatalf("err = %v (%T), want *UpstreamUnavailable", err, err)
	}
	var ue *jhttp.UpstreamError
	if !errors.As(err, &ue) || ue.Upstream != "billing" {
		t.Fatalf("errors.As(*UpstreamError) = %v, %+v", errors.As(err, &ue), ue)
	}
	if got := up.hits.Load(); got != 3 {
		t.Errorf("upstream got %d requests, want 3", got)
	}
	if got := metric(t, reg, "jfast_client_calls_total", "outcome", "unavailable"); got != 1 {
		t.Errorf("unavailable calls = %v, want 1", got)
	}

	// A POST is not retried.
	up.hits.Store(0)
	if _, err := c.Post(context.Background(), "/x", "body"); !errors.As(err, &ua) {
		t.Fatalf("POST err = %v", err)
	}
	if got := up.hits.Load(); got != 1 {
		t.Errorf("POST: upstream got %d requests, want 1", got)
	}
}

// A connect error (nothing listens) is retried and ends as UpstreamUnavailable.
func TestConnectErrorRetried(t *testing.T) {
	t.Parallel()
	addr := jfasttest.RefusedAddr(t)
	c, clk, _ := newClient(t, noBudget(jhttp.Upstream{BaseURL: "http://" + addr}))
	_, err := c.Get(context.Background(), "/x")
	var ua *jhttp.UpstreamUnavailable
	if !errors.As(err, &ua) {
		t.Fatalf("err = %v (%T), want *UpstreamUnavailable", err, err)
	}
	if got := len(clk.Sleeps()); got != 2 {
		t.Errorf("%d waits, want 2 (two retries)", got)
	}
}

// Once the retries run out the last response is returned, and a response
// from an earlier attempt is returned when the last attempt got none.
func TestLastResponseReturned(t *testing.T) {
	t.Parallel()
	up := newUpstream(t, func(w http.ResponseWriter, _ *http.Request, n int) {
		if n == 3 {
			conn, _, _ := w.(http.Hijacker).Hijack()
			_ = conn.Close()
			return
		}
		// A new connection per attempt: net/http resends a request once by
		// itself when a reused keep-alive connection turns out closed.
		w.Header().Set("Connection", "close")
		w.Header().Set("X-Attempt", string(rune('0'+n)))
		w.WriteHeader(503)
	})
	c, _, _ := newClient(t, noBudget(jhttp.Upstream{BaseURL: up.URL}))
	resp, err := c.Get(context.Background(), "/x")
	if err != nil {
		t.Fatalf("err = %v; a call that got a response returns it", err)
	}
	if resp.StatusCode != 503 || resp.Header.Get("X-Attempt") != "2" {
		t.Errorf("got %d attempt %q, want the 503 of attempt 2", resp.StatusCode, resp.Header.Get("X-Attempt"))
	}
}

func TestFullJitterBounds(t *testing.T) {
	t.Parallel()
	up := newUpstream(t, status(503))
	base, maxD := 100*time.Millisecond, 400*time.Millisecond
	c, clk, _ := newClient(t, noBudget(jhttp.Upstream{BaseURL: up.URL, PolicyConfig: resilience.PolicyConfig{Attempts: 6, Timeout: time.Hour, BackoffBase: base, BackoffMax: maxD, BreakerConfig: resilience.BreakerConfig{BreakerFailures: 1000, BreakerMinimumCalls: 1000}}}))
	const calls = 40
	for range calls {
		if _, err := c.Get(context.Background(), "/x"); err != nil {
			t.Fatal(err)
		}
	}
	sleeps := clk.Sleeps()
	if len(sleeps) != calls*5 {
		t.Fatalf("%d waits, want %d", len(sleeps), calls*5)
	}
	distinct := map[time.Duration]bool{}
	for i, d := range sleeps {
		n := i%5 + 1
		ceiling := min(base<<(n-1), maxD)
		if d < 0 || d > ceiling {
			t.Errorf("wait before retry %d = %s, want in [0, %s]", n, d, ceiling)
		}
		distinct[d] = true
	}
	if len(distinct) < calls {
		t.Errorf("only %d distinct waits in %d: not jittered", len(distinct), len(sleeps))
	}
}

func TestRetryAfter(t *testing.T) {
	t.Parallel()
	t.Run("seconds are waited exactly", func(t *testing.T) {
		t.Parallel()
		up := newUpstream(t, status(503, "Retry-After", "2"))
		c, clk, _ := newClient(t, noBudget(jhttp.Upstream{BaseURL: up.URL, PolicyConfig: resilience.PolicyConfig{Timeout: time.Minute}}))
		if _, err := c.Get(context.Background(), "/x"); err != nil {
			t.Fatal(err)
		}
		assertSleeps(t, clk.Sleeps(), 2*time.Second, 2*time.Second)
	})
	t.Run("an HTTP date is waited exactly", func(t *testing.T) {
		t.Parallel()
		var clkNow func() time.Time
		up := newUpstream(t, func(w http.ResponseWriter, _ *http.Request, _ int) {
			w.Header().Set("Retry-After", clkNow().Add(3*time.Second).UTC().Format(http.TimeFormat))
			w.WriteHeader(429)
		})
		c, clk, _ := newClient(t, noBudget(jhttp.Upstream{BaseURL: up.URL, PolicyConfig: resilience.PolicyConfig{Timeout: time.Minute}}))
		clkNow = clk.Now
		if _, err := c.Get(context.Background(), "/x"); err != nil {
			t.Fatal(err)
		}
		assertSleeps(t, clk.Sleeps(), 3*time.Second, 3*time.Second)
	})
	t.Run("more than max_retry_after returns the response", func(t *testing.T) {
		t.Parallel()
		up := newUpstream(t, status(503, "Retry-After", "31"))
		c, clk, _ := newClient(t, noBudget(jhttp.Upstream{BaseURL: up.URL, PolicyConfig: resilience.PolicyConfig{Timeout: time.Hour}}))
		resp, err := c.Get(context.Background(), "/x")
		if err != nil || resp.StatusCode != 503 || resp.Header.Get("Retry-After") != "31" {
			t.Fatalf("got %v, %v; want the 503 with its Retry-After", resp, err)
		}
		if up.hits.Load() != 1 || len(clk.Sleeps()) != 0 {
			t.Errorf("%d requests, %d waits; want 1 and none", up.hits.Load(), len(clk.Sleeps()))
		}
	})
	t.Run("exactly max_retry_after is waited", func(t *testing.T) {
		t.Parallel()
		up := newUpstream(t, status(503, "Retry-After", "30"))
		c, clk, _ := newClient(t, noBudget(jhttp.Upstream{BaseURL: up.URL, PolicyConfig: resilience.PolicyConfig{Attempts: 2, Timeout: time.Hour}}))
		if _, err := c.Get(context.Background(), "/x"); err != nil {
			t.Fatal(err)
		}
		assertSleeps(t, clk.Sleeps(), 30*time.Second)
	})
	t.Run("garbage falls back to backoff", func(t *testing.T) {
		t.Parallel()
		up := newUpstream(t, status(503, "Retry-After", "soon"))
		c, clk, _ := newClient(t, noBudget(jhttp.Upstream{BaseURL: up.URL, PolicyConfig: resilience.PolicyConfig{Attempts: 2}}))
		if _, err := c.Get(context.Background(), "/x"); err != nil {
			t.Fatal(err)
		}
		s := clk.Sleeps()
		if len(s) != 1 || s[0] > jhttp.DefaultBackoffBase {
			t.Errorf("waits = %v, want one backoff wait within %s", s, jhttp.DefaultBackoffBase)
		}
	})
}

func assertSleeps(t *testing.T, got []time.Duration, want ...time.Duration) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("waits = %v, want %v", got, want)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("waits = %v, want %v", got, want)
		}
	}
}

// No retry starts that the total deadline (or the caller's deadline, when
// sooner) cannot finish: the last response is returned instead.
func TestRetryWithinDeadline(t *testing.T) {
	t.Parallel()
	t.Run("timeout", func(t *testing.T) {
		t.Parallel()
		up := newUpstream(t, status(503, "Retry-After", "1"))
		c, clk, _ := newClient(t, noBudget(jhttp.Upstream{BaseURL: up.URL, PolicyConfig: resilience.PolicyConfig{Attempts: 6, Timeout: 2500 * time.Millisecond}}))
		resp, err := c.Get(context.Background(), "/x")
		if err != nil || resp.StatusCode != 503 {
			t.Fatalf("got %v, %v", resp, err)
		}
		// Attempts at 0 s, 1 s and 2 s; a wait of 1 s at 2 s would end past 2.5 s.
		if got := up.hits.Load(); got != 3 {
			t.Errorf("%d requests, want 3", got)
		}
		assertSleeps(t, clk.Sleeps(), time.Second, time.Second)
	})
	t.Run("a wait longer than what is left", func(t *testing.T) {
		t.Parallel()
		up := newUpstream(t, status(503, "Retry-After", "1"))
		c, clk, _ := newClient(t, noBudget(jhttp.Upstream{BaseURL: up.URL, PolicyConfig: resilience.PolicyConfig{Timeout: 300 * time.Millisecond}}))
		if _, err := c.Get(context.Background(), "/x"); err != nil {
			t.Fatal(err)
		}
		if up.hits.Load() != 1 || len(clk.Sleeps()) != 0 {
			t.Errorf("%d requests, %d waits; want 1 request and no wait", up.hits.Load(), len(clk.Sleeps()))
		}
	})
	t.Run("the caller's deadline when sooner", func(t *testing.T) {
		t.Parallel()
		up := newUpstream(t, status(503, "Retry-After", "1"))
		c, clk, _ := newClient(t, noBudget(jhttp.Upstream{BaseURL: up.URL, PolicyConfig: resilience.PolicyConfig{Timeout: time.Minute}}))
		resp, err := c.Get(ctxTimeout(t, 800*time.Millisecond), "/x")
		if err != nil || resp.StatusCode != 503 {
			t.Fatalf("got %v, %v", resp, err)
		}
		if up.hits.Load() != 1 || len(clk.Sleeps()) != 0 {
			t.Errorf("%d requests, %d waits; want 1 request and no wait", up.hits.Load(), len(clk.Sleeps()))
		}
	})
}

// The budget during an outage: with a ratio of 0.1, twenty calls to an
// upstream that only answers 503 (3 attempts each, a clock that does not
// move) make at most 23 requests; without the budget, 60.
func TestRetryBudgetDuringOutage(t *testing.T) {
	t.Parallel()
	run := func(t *testing.T, u jhttp.Upstream) (int64, float64) {
		// Retry-After: 0 makes every wait zero, so the clock never moves.
		up := newUpstream(t, status(503, "Retry-After", "0"))
		u.BaseURL = up.URL
		u.Attempts = 3
		u.BreakerFailures = 1000
		u.BreakerMinimumCalls = 1000
		c, clk, reg := newClient(t, u)
		start := clk.Now()
		for range 20 {
			resp, err := c.Get(context.Background(), "/x")
			if err != nil || resp.StatusCode != 503 {
				t.Fatalf("got %v, %v", resp, err)
			}
		}
		if !clk.Now().Equal(start) {
			t.Fatalf("the clock moved")
		}
		return up.hits.Load(), metric(t, reg, "jfast_client_retry_budget_refusals_total", "dependency", "billing")
	}
	withBudget, refusals := run(t, jhttp.Upstream{PolicyConfig: resilience.PolicyConfig{RetryBudgetRatio: 0.1, RetryBudgetMinPerSecond: 1}})
	if withBudget < 20 || withBudget > 23 {
		t.Errorf("with a budget of 0.1: %d requests, want 20..23", withBudget)
	}
	if refusals != 20 {
		t.Errorf("budget refusals = %v, want 20 (every call ended by the budget)", refusals)
	}
	without, _ := run(t, noBudget(jhttp.Upstream{}))
	if without != 60 {
		t.Errorf("without a budget: %d requests, want 60", without)
	}
	t.Logf("twenty calls to an always-503 upstream: %d requests with ratio 0.1, %d without a budget", withBudget, without)
}

var _ = resilience.ErrOpen

// The first attempt of a call sends the request the call made (its context
// filled in then, no copy); a retry sends a copy: each gets the whole body
// and its own Jfast-Timeout-Ms, and the response's request is the last
// attempt's, under the call's deadline.
func TestRetrySendsTheCallsRequestAgain(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var bodies, timeouts []string
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request, n int) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		bodies, timeouts = append(bodies, string(b)), append(timeouts, r.Header.Get(framework.TimeoutHeader))
		mu.Unlock()
		if n == 1 {
			w.WriteHeader(503)
			return
		}
		w.WriteHeader(201)
	})
	c, _, _ := newClient(t, noBudget(jhttp.Upstream{BaseURL: up.URL}))
	resp, err := c.Post(context.Background(), "/payments", map[string]any{"order_id": 7}, jhttp.IdempotencyKey("charge-7"))
	if err != nil || resp.StatusCode != 201 {
		t.Fatalf("got %v, %v; want 201", resp, err)
	}
	mu.Lock()
	defer mu.Unlock()
	for i, b := range bodies {
		if b != `{"order_id":7}` || timeouts[i] == "" {
			t.Errorf("attempt %d: body %q, %s %q; want the whole body and a time left", i+1, b, framework.TimeoutHeader, timeouts[i])
		}
	}
	if len(bodies) != 2 {
		t.Fatalf("%d attempts, want 2", len(bodies))
	}
	if _, ok := resp.Request.Context().Deadline(); !ok || resp.Request.Header.Get(framework.TimeoutHeader) != timeouts[1] {
		t.Errorf("the response's request: deadline %v, %s %q; want the call's deadline and the last attempt's %q",
			ok, framework.TimeoutHeader, resp.Request.Header.Get(framework.TimeoutHeader), timeouts[1])
	}
}

// A POST whose connection is refused sent nothing: it is made again, as a
// GET is, within attempts; Retry(false) still means one attempt.
func TestRefusedPostIsMadeAgain(t *testing.T) {
	t.Parallel()
	c, _, reg := newClient(t, noBudget(jhttp.Upstream{BaseURL: "http://" + jfasttest.RefusedAddr(t)}))
	var ua *jhttp.UpstreamUnavailable
	if _, err := c.Post(t.Context(), "/x", "body"); !errors.As(err, &ua) {
		t.Fatalf("POST err = %v, want UpstreamUnavailable", err)
	}
	if got := metric(t, reg, "jfast_client_attempts_total"); got != 3 {
		t.Fatalf("a refused POST made %v attempts, want 3 (attempts' default): it sent nothing", got)
	}
	if _, err := c.Post(t.Context(), "/x", "body", jhttp.Retry(false)); !errors.As(err, &ua) {
		t.Fatalf("POST err = %v, want UpstreamUnavailable", err)
	}
	if got := metric(t, reg, "jfast_client_attempts_total"); got != 4 {
		t.Fatalf("Retry(false): %v attempts in all, want 4 (one more)", got)
	}
}
