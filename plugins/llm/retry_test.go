package llm_test

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jfastframework/jfast/framework/resilience"
	"github.com/jfastframework/jfast/plugins/llm"
	"github.com/jfastframework/jfast/problem"
)

// llmError returns err's *llm.Error, failing the test when there is none.
func llmError(t *testing.T, err error) *llm.Error {
	t.Helper()
	var e *llm.Error
	if !errors.As(err, &e) {
		t.Fatalf("error %v (%T) is not an *llm.Error", err, err)
	}
	return e
}

// A 429 with Retry-After: 1 is waited for — one wait of 1 s on the clock —
// and the retry answers.
func TestRateLimitRetryAfterIsWaited(t *testing.T) {
	t.Parallel()
	p := newProvider(t, status(429, "Retry-After", "1"), complete("hello"))
	clk := autoClock()
	c := client(t, p, llm.ProviderConfig{}, clk)
	resp, err := c.Chat(context.Background(), params("hi"))
	if err != nil {
		t.Fatal(err)
	}
	if resp.Text() != "hello" || resp.Attempts != 2 || p.Requests() != 2 {
		t.Fatalf("text %q, attempts %d, requests %d; want hello, 2, 2", resp.Text(), resp.Attempts, p.Requests())
	}
	if got := clk.Sleeps(); !slices.Equal(got, []time.Duration{time.Second}) {
		t.Fatalf("waits %v, want one of 1s", got)
	}
}

// The x-ratelimit-reset-* header of an exhausted limit is the wait when the
// 429 has no Retry-After.
func TestRateLimitResetHeaderIsWaited(t *testing.T) {
	t.Parallel()
	p := newProvider(t, status(429,
		"X-Ratelimit-Remaining-Requests", "12", "X-Ratelimit-Reset-Requests", "9s",
		"X-Ratelimit-Remaining-Tokens", "0", "X-Ratelimit-Reset-Tokens", "2.5s"), complete("hello"))
	clk := autoClock()
	c := client(t, p, llm.ProviderConfig{}, clk)
	if _, err := c.Chat(context.Background(), params("hi")); err != nil {
		t.Fatal(err)
	}
	if got := clk.Sleeps(); !slices.Equal(got, []time.Duration{2500 * time.Millisecond}) {
		t.Fatalf("waits %v, want one of 2.5s (the exhausted tokens limit's)", got)
	}
}

// A 429 asking for more than the deadline has left comes back at once: a 503
// problem naming the provider, with the provider's Retry-After.
func TestRateLimitLongerThanDeadlineReturnsAtOnce(t *testing.T) {
	t.Parallel()
	p := newProvider(t, status(429, "Retry-After", "60"), complete("hello"))
	clk := autoClock()
	// max_retry_after above 60 s: only the deadline can refuse the wait.
	c := client(t, p, llm.ProviderConfig{MaxRetryAfter: 5 * time.Minute}, clk)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var err error
	took := within(t, 4*time.Second, func() { _, err = c.Chat(ctx, params("hi")) })
	e := llmError(t, err)
	if e.Kind != llm.KindRateLimited || e.RetryAfter != time.Minute || e.StatusCode != 429 {
		t.Fatalf("error %+v, want rate_limited with RetryAfter 1m0s", e)
	}
	if p.Requests() != 1 || len(clk.Sleeps()) != 0 {
		t.Fatalf("requests %d, waits %v; want 1 request and no wait", p.Requests(), clk.Sleeps())
	}
	pr, _ := problem.As(err)
	if pr.Status != http.StatusServiceUnavailable || pr.RetryAfter != time.Minute || pr.Extensions["dependency"] != "primary" {
		t.Fatalf("problem %+v, want 503 naming primary with Retry-After 60", pr)
	}
	t.Logf("returned after %s", took)
}

// A 429 asking for more than max_retry_after comes back at once too.
func TestRateLimitLongerThanMaxRetryAfter(t *testing.T) {
	t.Parallel()
	p := newProvider(t, status(429, "Retry-After", "45"), complete("hello"))
	clk := autoClock()
	c := client(t, p, llm.ProviderConfig{}, clk) // max_retry_after 30s
	_, err := c.Chat(context.Background(), params("hi"))
	if e := llmError(t, err); e.Kind != llm.KindRateLimited || e.RetryAfter != 45*time.Second || p.Requests() != 1 {
		t.Fatalf("error %+v after %d requests, want rate_limited, 45s, 1 request", e, p.Requests())
	}
}

// 429s never open the breaker, however many.
func TestRateLimitNeverOpensBreaker(t *testing.T) {
	t.Parallel()
	p := newProvider(t, status(429))
	c := client(t, p, llm.ProviderConfig{PolicyConfig: resilience.PolicyConfig{Attempts: 1, BreakerConfig: resilience.BreakerConfig{BreakerFailures: 1}}}, autoClock())
	for range 5 {
		if _, err := c.Chat(context.Background(), params("hi")); llmError(t, err).Kind != llm.KindRateLimited {
			t.Fatalf("want rate_limited, got %v", err)
		}
	}
	if s := c.Breaker().Snapshot(); s.State != resilience.StateClosed || p.Requests() != 5 {
		t.Fatalf("breaker %s after %d requests, want closed after 5", s.State, p.Requests())
	}
}

// 500 twice then 200: the call succeeds on its third attempt.
func TestServerErrorsAreRetried(t *testing.T) {
	t.Parallel()
	p := newProvider(t, status(500), status(500), complete("hello"))
	clk := autoClock()
	c := client(t, p, llm.ProviderConfig{}, clk)
	resp, err := c.Chat(context.Background(), params("hi"))
	if err != nil {
		t.Fatal(err)
	}
	if resp.Attempts != 3 || p.Requests() != 3 || resp.Text() != "hello" || resp.Provider != "primary" {
		t.Fatalf("%+v after %d requests, want hello from primary in 3 attempts", resp, p.Requests())
	}
	// Full jitter: the waits are in [0, 500ms] and [0, 1s].
	if w := clk.Sleeps(); len(w) != 2 || w[0] > 500*time.Millisecond || w[1] > time.Second {
		t.Fatalf("waits %v, want two within the backoff ceilings", w)
	}
}

// Every 5xx that outlives its retries is a 503 naming the provider, and
// the call counts toward the breaker (once, whatever its attempts), which
// then refuses without a request.
func TestServerErrorsOpenBreaker(t *testing.T) {
	t.Parallel()
	for _, code := range []int{500, 502, 503, 504} {
		p := newProvider(t, status(code))
		c := client(t, p, llm.ProviderConfig{PolicyConfig: resilience.PolicyConfig{Attempts: 2, BreakerConfig: resilience.BreakerConfig{BreakerFailures: 1}}}, autoClock())
		_, err := c.Chat(context.Background(), params("hi"))
		e := llmError(t, err)
		if e.Kind != llm.KindStatus || e.StatusCode != code || e.Attempts != 2 {
			t.Fatalf("%d: error %+v, want status %d after 2 attempts", code, e, code)
		}
		if pr, _ := problem.As(err); pr.Status != 503 || pr.Extensions["dependency"] != "primary" {
			t.Fatalf("%d: problem %+v, want 503 naming primary", code, pr)
		}
		_, err = c.Chat(context.Background(), params("hi"))
		if e := llmError(t, err); e.Kind != llm.KindCircuitOpen || !errors.Is(err, resilience.ErrOpen) || p.Requests() != 2 {
			t.Fatalf("%d: second call %+v after %d requests, want circuit_open after 2", code, e, p.Requests())
		}
	}
}

// 400, 401, 403, 404 and 422 come back at once, never retried, as a 502
// naming the provider; they never count toward the breaker.
func TestClientErrorsAreNotRetried(t *testing.T) {
	t.Parallel()
	for _, code := range []int{400, 401, 403, 404, 422} {
		p := newProvider(t, status(code), complete("hello"))
		c := client(t, p, llm.ProviderConfig{PolicyConfig: resilience.PolicyConfig{BreakerConfig: resilience.BreakerConfig{BreakerFailures: 1}}}, autoClock())
		_, err := c.Chat(context.Background(), params("hi"))
		e := llmError(t, err)
		if e.Kind != llm.KindStatus || e.StatusCode != code || p.Requests() != 1 {
			t.Fatalf("%d: error %+v after %d requests, want status %d after 1", code, e, p.Requests(), code)
		}
		if pr, _ := problem.As(err); pr.Status != 502 || pr.Extensions["upstream"] != "primary" {
			t.Fatalf("%d: problem %+v, want 502 naming primary", code, pr)
		}
		if c.Breaker().Snapshot().State != resilience.StateClosed {
			t.Fatalf("%d opened the breaker", code)
		}
	}
}

// With ratio 0.1, twenty calls to a provider that only answers 503, 3
// attempts each, on a clock that barely moves: the budget lets few retries
// through (60 requests without it).
func TestRetryBudgetBoundsRetries(t *testing.T) {
	t.Parallel()
	p := newProvider(t, status(503))
	c := client(t, p, llm.ProviderConfig{PolicyConfig: resilience.PolicyConfig{RetryBudgetRatio: 0.1, BackoffBase: time.Nanosecond, BackoffMax: time.Nanosecond, BreakerConfig: resilience.BreakerConfig{BreakerFailures: 1000, BreakerMinimumCalls: 1000}}}, autoClock())
	for range 20 {
		_, _ = c.Chat(context.Background(), params("hi"))
	}
	// 20 first attempts, 2 retries for min_per_second, and 10 % of 20.
	if n := p.Requests(); n > 24 {
		t.Fatalf("%d requests, want at most 24", n)
	}
}

// The request the SDK sends carries the provider's model and key; a
// request naming a model keeps it.
func TestRequestCarriesModelAndKey(t *testing.T) {
	t.Parallel()
	p := newProvider(t, complete("hello"))
	c := client(t, p, llm.ProviderConfig{APIKey: "sk-test-key", Model: "default-model"}, autoClock())
	if _, err := c.Chat(context.Background(), params("hi")); err != nil {
		t.Fatal(err)
	}
	q := params("hi")
	q.Model = "asked-model"
	if _, err := c.Chat(context.Background(), q); err != nil {
		t.Fatal(err)
	}
	b := p.Bodies()
	if !strings.Contains(b[0], `"model":"default-model"`) || !strings.Contains(b[1], `"model":"asked-model"`) {
		t.Fatalf("bodies %q, want the default model then the asked one", b)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.auths[0] != "Bearer sk-test-key" {
		t.Fatalf("Authorization %q, want the key", p.auths[0])
	}
}

// The breaker counts a call once, whatever its attempts: a call whose three
// attempts all fail leaves a 2-failure breaker closed, and the next such
// call opens it. Its deadline check runs on the client's clock: an attempt
// that took 70 s of a 120 s timeout (on the test clock) leaves no room
// for another, so the second call makes one request only.
func TestOneBreakerTicketPerCall(t *testing.T) {
	t.Parallel()
	clk := autoClock()
	slow := func(w http.ResponseWriter, r *http.Request) {
		clk.Advance(70 * time.Second)
		status(503)(w, r)
	}
	p := newProvider(t, status(503), status(503), status(503), slow)
	c := client(t, p, llm.ProviderConfig{PolicyConfig: resilience.PolicyConfig{
		RetryBudgetRatio: 1, RetryBudgetMinPerSecond: 100,
		BreakerConfig: resilience.BreakerConfig{BreakerFailures: 2},
	}}, clk)
	_, err := c.Chat(context.Background(), params("hi"))
	if e := llmError(t, err); e.Attempts != 3 || c.Breaker().Snapshot().State != resilience.StateClosed {
		t.Fatalf("first call %+v, breaker %s; want 3 attempts and a closed breaker", e, c.Breaker().Snapshot().State)
	}
	_, err = c.Chat(context.Background(), params("hi"))
	if e := llmError(t, err); e.Attempts != 1 || p.Requests() != 4 {
		t.Fatalf("second call %+v after %d requests, want 1 attempt (no time left for another), 4 requests", e, p.Requests())
	}
	if st := c.Breaker().Snapshot().State; st != resilience.StateOpen {
		t.Fatalf("breaker %s after two failed calls, want open", st)
	}
}
