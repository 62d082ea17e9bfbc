package cache

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/redis/go-redis/v9"

	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/framework/resilience"
	"github.com/jfastframework/jfast/jfasttest"
	"github.com/jfastframework/jfast/problem"
)

// commandTimeout is the tests' command_timeout against the private server: short
// so the test is quick, and the margin below is what a command may take beyond it.
const (
	commandTimeout = 300 * time.Millisecond
	margin         = 400 * time.Millisecond
)

// elapsed runs f and returns how long it took.
func elapsed(f func()) time.Duration {
	start := time.Now()
	f()
	return time.Since(start)
}

// A private redis-server is paused with SIGSTOP (its socket stays open, nothing
// answers) and resumed. While paused: every command answers within
// command_timeout plus a margin (a blocking one within its wait plus
// command_timeout), the breaker opens, then refuses at once with the documented
// message; Remember and the rate limiter fail open, the token store fails closed,
// /ready reports the cache degraded. After SIGCONT and the cool-down the same
// client works, without restart.
func TestPausedRedis(t *testing.T) {
	t.Parallel()
	srv := startRedis(t)
	var computed atomic.Int64
	b := setup(t, setupOpts{
		url:  srv.url(),
		toml: "command_timeout = \"300ms\"\nbreaker_failures = 3\n",
		routes: func(c *Plugin, r chi.Router) {
			r.Method(http.MethodGet, "/get", framework.Handler(func(w http.ResponseWriter, r *http.Request) error {
				v, _, err := c.Get(r.Context(), "k")
				if err != nil {
					return err
				}
				_, err = w.Write(v)
				return err
			}))
			r.Method(http.MethodGet, "/remember", framework.Handler(func(w http.ResponseWriter, r *http.Request) error {
				v, err := RememberJSON(r.Context(), c, "r", time.Minute, func(context.Context) (int64, error) {
					return computed.Add(1), nil
				})
				if err != nil {
					return err
				}
				return framework.JSON(w, http.StatusOK, v)
			}))
			r.With(c.RateLimit(RateLimitOpts{Limit: 1000, Period: time.Minute})).Get("/limited", okHandler)
			r.Method(http.MethodGet, "/revoked", framework.Handler(func(w http.ResponseWriter, r *http.Request) error {
				revoked, err := c.RevocationStore().IsRevoked(r.Context(), "jti")
				if err != nil {
					return err // the auth plugin does the same: fail closed
				}
				return framework.JSON(w, http.StatusOK, revoked)
			}))
		},
	})
	c, ctx := b.cache, context.Background()

	// Healthy.
	if err := c.Set(ctx, "k", []byte("v"), time.Hour); err != nil {
		t.Fatal(err)
	}
	if r := b.svc.Get(t, "/get"); r.Status != 200 || r.String() != "v" {
		t.Fatalf("/get before the pause = %d %s", r.Status, r)
	}
	if r := b.svc.Get(t, "/limited"); r.Header.Get("RateLimit-Limit") != "1000" {
		t.Fatalf("/limited before the pause has no RateLimit headers: %v", r.Header)
	}
	assertSharedBreakerMetrics(t, b, "before the pause", 0, 0)

	srv.pause(t)

	// 1. An ordinary command: command_timeout, and the error says so. Redis
	// answered nothing while it waited: the breaker opens at once.
	var err error
	d := elapsed(func() { _, _, err = c.Get(ctx, "k") })
	var ue *UnavailableError
	if !errors.As(err, &ue) || ue.Timeout != commandTimeout || d > commandTimeout+margin {
		t.Fatalf("GET on a paused Redis: %v after %s; want an UnavailableError within %s", err, d, commandTimeout+margin)
	}
	if !strings.HasPrefix(err.Error(), "redis unreachable: no answer within 300ms") {
		t.Errorf("timeout error = %q", err)
	}
	if s := c.Breaker().Snapshot(); s.State != resilience.StateOpen || s.Opens != 1 {
		t.Fatalf("breaker after one silent hang = %+v, want open", s)
	}
	if !strings.Contains(b.svc.Logs(), "hang=true") {
		t.Errorf("the change does not say a call hung:\n%s", b.svc.Logs())
	}
	// 2. The next call, a pipeline on the raw client, is refused at once:
	// a request's second call does not pay command_timeout again.
	d = elapsed(func() {
		_, err = c.Client().Pipelined(ctx, func(p redis.Pipeliner) error {
			p.Incr(ctx, c.Key("n"))
			p.Expire(ctx, c.Key("n"), time.Minute)
			return nil
		})
	})
	if !errors.Is(err, ErrUnavailable) || !errors.Is(err, resilience.ErrOpen) || d > margin {
		t.Fatalf("pipeline after the hang on a paused Redis: %v after %s; want the open breaker's refusal at once", err, d)
	}
	// 3. After the cool-down a blocking command is the probe, bounded by its
	// own wait plus command_timeout; its hang reopens for a full cool-down.
	// (The earlier connections were closed at their timeouts: the BLPOP
	// dials a new one, whose handshake is bounded by command_timeout.)
	b.clock.Advance(15 * time.Second)
	d = elapsed(func() { err = c.Client().BLPop(ctx, time.Second, c.Key("queue")).Err() })
	if !errors.Is(err, ErrUnavailable) || d > time.Second+commandTimeout+margin {
		t.Fatalf("BLPOP 1s on a paused Redis: %v after %s; want an UnavailableError within 1s + %s", err, d, commandTimeout)
	}
	if s := c.Breaker().Snapshot(); s.State != resilience.StateOpen || s.Opens != 2 {
		t.Fatalf("breaker after the probe hung = %+v, want open a second time", s)
	}

	// Open: calls fail at once, with the documented message and a 503.
	d = elapsed(func() { _, _, err = c.Get(ctx, "k") })
	if d > 100*time.Millisecond {
		t.Errorf("GET with the breaker open took %s; want no I/O", d)
	}
	if want := "redis unreachable: calls to 'redis' are suspended for 15.0s"; err == nil || err.Error() != want {
		t.Fatalf("open-breaker error = %v, want %q", err, want)
	}
	if !errors.Is(err, resilience.ErrOpen) {
		t.Error("open-breaker error does not match resilience.ErrOpen")
	}
	p, ok := problem.As(err)
	if !ok || p.Status != 503 || p.Extensions["dependency"] != "cache" || p.RetryAfter != 15*time.Second {
		t.Fatalf("open-breaker problem = %+v", p)
	}
	r := b.svc.Get(t, "/get")
	var body map[string]any
	_ = json.Unmarshal(r.Body, &body)
	if r.Status != 503 || r.Header.Get("Retry-After") != "15" || body["dependency"] != "cache" ||
		body["detail"] != "redis unreachable: calls to 'redis' are suspended for 15.0s" {
		t.Fatalf("/get with the breaker open = %d %v %s", r.Status, r.Header, r)
	}

	// Remember fails open: computed every time, never a 503, logged once.
	for i := int64(1); i <= 3; i++ {
		r := b.svc.Get(t, "/remember")
		if r.Status != 200 || strings.TrimSpace(r.String()) != strconv.FormatInt(i, 10) {
			t.Fatalf("/remember #%d while Redis is down = %d %s", i, r.Status, r)
		}
	}
	if n := strings.Count(b.svc.Logs(), "remember fails open"); n != 1 {
		t.Errorf("Remember's fail-open was logged %d times, want once per breaker opening", n)
	}

	// The rate limiter fails open, counted in the metric.
	for range 2 {
		r := b.svc.Get(t, "/limited")
		if r.Status != 200 || r.Header.Get("RateLimit-Limit") != "" {
			t.Fatalf("/limited while Redis is down = %d %v", r.Status, r.Header)
		}
	}
	metrics := b.svc.Get(t, "/metrics").String()
	for _, want := range []string{
		`jfast_cache_fail_open_total{component="ratelimit"} 2`,
		`jfast_cache_fail_open_total{component="remember"} 3`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	// Open, and opened twice: by the GET's hang, then by the probe's.
	assertSharedBreakerMetrics(t, b, "while Redis is paused", resilience.StateOpen, 2)

	// The token store fails closed.
	if _, err := c.Tokens().IsRevoked(ctx, "jti"); !errors.Is(err, ErrUnavailable) {
		t.Errorf("IsRevoked while Redis is down = %v, want an UnavailableError", err)
	}
	if r := b.svc.Get(t, "/revoked"); r.Status != 503 || !strings.Contains(r.String(), `"dependency":"cache"`) {
		t.Errorf("/revoked while Redis is down = %d %s, want 503 naming the cache", r.Status, r)
	}

	// /ready: degraded, naming the cache, with the breaker state.
	r = b.svc.Get(t, "/ready")
	var ready struct {
		Status string `json:"status"`
		Checks map[string]struct {
			Healthy  bool           `json:"healthy"`
			Status   string         `json:"status"`
			Detail   string         `json:"detail"`
			Critical bool           `json:"critical"`
			Meta     map[string]any `json:"meta"`
		} `json:"checks"`
	}
	if err := json.Unmarshal(r.Body, &ready); err != nil {
		t.Fatalf("/ready body %s: %v", r, err)
	}
	chk := ready.Checks["cache"]
	br, _ := chk.Meta["breaker"].(map[string]any)
	if r.Status != 200 || ready.Status != "degraded" || chk.Healthy || chk.Critical || chk.Status != "fail" ||
		!strings.Contains(chk.Detail, "suspended") || br["state"] != "open" || br["retry_after"] != 15.0 {
		t.Fatalf("/ready while Redis is down = %d %s", r.Status, r)
	}
	if _, ok := chk.Meta["pool"].(map[string]any); !ok {
		t.Errorf("/ready meta has no pool stats: %v", chk.Meta)
	}

	// Back: after the cool-down the probe succeeds on the same client.
	srv.resume(t)
	b.clock.Advance(15 * time.Second)
	if r := b.svc.Get(t, "/get"); r.Status != 200 || r.String() != "v" {
		t.Fatalf("/get after the resume = %d %s", r.Status, r)
	}
	if s := c.Breaker().Snapshot(); s.State != resilience.StateClosed {
		t.Fatalf("breaker after a successful probe = %v", s.State)
	}
	if r := b.svc.Get(t, "/limited"); r.Status != 200 || r.Header.Get("RateLimit-Limit") != "1000" {
		t.Errorf("/limited after the resume = %d %v", r.Status, r.Header)
	}
	if r := b.svc.Get(t, "/remember"); r.Status != 200 {
		t.Errorf("/remember after the resume = %d", r.Status)
	}
	if r := b.svc.Get(t, "/ready"); r.Status != 200 || !strings.Contains(r.String(), `"status":"ok"`) {
		t.Errorf("/ready after the resume = %d %s", r.Status, r)
	}
}

// Blocking commands are not cut at command_timeout: on a healthy server a BLPOP
// with a 2 s wait returns its empty answer after 2 s, an XREAD BLOCK after its
// wait, and data that arrives mid-wait is returned.
func TestBlockingCommandsAreNotCut(t *testing.T) {
	t.Parallel()
	srv := startRedis(t)
	b := setup(t, setupOpts{url: srv.url(), toml: "command_timeout = \"300ms\"\n"})
	c, ctx := b.cache, context.Background()
	raw := c.Client()

	var err error
	d := elapsed(func() { err = raw.BLPop(ctx, 2*time.Second, c.Key("empty")).Err() })
	if err != redis.Nil || d < 1900*time.Millisecond || d > 2*time.Second+margin {
		t.Fatalf("BLPOP 2s = %v after %s; want redis.Nil after about 2s", err, d)
	}
	d = elapsed(func() {
		err = raw.XRead(ctx, &redis.XReadArgs{Streams: []string{c.Key("s"), "$"}, Block: time.Second}).Err()
	})
	if err != redis.Nil || d < 900*time.Millisecond || d > time.Second+margin {
		t.Fatalf("XREAD BLOCK 1000 = %v after %s; want redis.Nil after about 1s", err, d)
	}
	go func() {
		time.Sleep(500 * time.Millisecond)
		_ = raw.RPush(context.Background(), c.Key("late"), "x").Err()
	}()
	var got []string
	d = elapsed(func() { got, err = raw.BLPop(ctx, 3*time.Second, c.Key("late")).Result() })
	if err != nil || len(got) != 2 || got[1] != "x" || d > time.Second+margin {
		t.Fatalf("BLPOP with data arriving at 0.5s = %v, %v after %s", got, err, d)
	}
	// A caller's shorter deadline still wins over the wait.
	cctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	d = elapsed(func() { err = raw.BLPop(cctx, 5*time.Second, c.Key("empty")).Err() })
	if err == nil || d > 500*time.Millisecond+margin {
		t.Fatalf("BLPOP 5s under a 500ms context = %v after %s", err, d)
	}
	if s := c.Breaker().Snapshot(); s.Consecutive != 0 {
		t.Errorf("blocking commands counted as failures: %+v", s)
	}
}

// With pool_size = 1 and Redis paused, commands queued for the one connection
// are bounded too (PoolTimeout is command_timeout). With critical = true, /ready
// is unavailable when Redis does not answer, and stays unavailable once the
// breaker is open: the verdict follows Redis, not the breaker. Remember's fail-open is logged once per
// breaker opening.
func TestPausedRedisPoolAndReadiness(t *testing.T) {
	t.Parallel()
	srv := startRedis(t)
	b := setup(t, setupOpts{
		url:  srv.url(),
		toml: "command_timeout = \"300ms\"\npool_size = 1\nbreaker_failures = 6\ncritical = true\n",
	})
	c, ctx := b.cache, context.Background()
	if err := c.Set(ctx, "k", []byte("v"), time.Hour); err != nil {
		t.Fatal(err)
	}
	fail := func(n int) {
		t.Helper()
		var wg sync.WaitGroup
		for range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var err error
				d := elapsed(func() { _, _, err = c.Get(ctx, "k") })
				if !errors.Is(err, ErrUnavailable) || d > commandTimeout+margin {
					t.Errorf("GET queued on a paused Redis: %v after %s", err, d)
				}
			}()
		}
		wg.Wait()
	}
	remember := func() {
		t.Helper()
		v, err := c.Remember(ctx, "r", time.Minute, func(context.Context) ([]byte, error) { return []byte("computed"), nil })
		if err != nil || string(v) != "computed" {
			t.Fatalf("Remember while Redis is down = %q, %v", v, err)
		}
	}

	srv.pause(t)
	r := b.svc.Get(t, "/ready")
	if r.Status != 503 || !strings.Contains(r.String(), `"verdict":"unavailable"`) || !strings.Contains(r.String(), `"critical":true`) {
		t.Fatalf("/ready, critical cache paused, breaker closed = %d %s", r.Status, r)
	}
	// The readiness PING hung with nothing answered meanwhile: the breaker
	// is open, and Remember's GET is refused (it computes instead).
	if s := c.Breaker().Snapshot(); s.State != resilience.StateOpen {
		t.Fatalf("breaker after the readiness PING hung = %+v, want open", s)
	}
	if d := elapsed(remember); d > commandTimeout+margin {
		t.Errorf("Remember on a paused Redis took %s, want at most %s", d, commandTimeout+margin)
	}
	fail(4)
	r = b.svc.Get(t, "/ready")
	if r.Status != 503 || !strings.Contains(r.String(), `"verdict":"unavailable"`) || !strings.Contains(r.String(), "suspended") {
		t.Fatalf("/ready, critical cache with the breaker open = %d %s; an open breaker carries the outage that opened it", r.Status, r)
	}
	remember()
	remember()

	srv.resume(t)
	b.clock.Advance(15 * time.Second)
	if _, ok, err := c.Get(ctx, "k"); err != nil || !ok {
		t.Fatalf("GET after the resume = %v, %v", ok, err)
	}
	srv.pause(t)
	fail(6) // the first hang opens it (the others were admitted before: stale)
	fail(1) // refused
	if s := c.Breaker().Snapshot(); s.State != resilience.StateOpen || s.Opens != 2 {
		t.Fatalf("breaker = %+v, want open for the second time", s)
	}
	remember()
	// Once per opening.
	if n := strings.Count(b.svc.Logs(), "remember fails open"); n != 2 {
		t.Errorf("Remember's fail-open logged %d times over two breaker openings, want 2", n)
	}
	srv.resume(t)
}

// Pub/sub is not cut at command_timeout either: a receive waits as long as it is
// asked to.
func TestPubSubIsNotCut(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{toml: "command_timeout = \"300ms\"\n"})
	c, ctx := b.cache, context.Background()
	sub := c.Client().Subscribe(ctx, c.Key("ch"))
	defer sub.Close()
	if _, err := sub.ReceiveTimeout(ctx, time.Second); err != nil { // the subscription confirmation
		t.Fatal(err)
	}
	var err error
	d := elapsed(func() { _, err = sub.ReceiveTimeout(ctx, 1200*time.Millisecond) })
	if err == nil || d < 1100*time.Millisecond || d > 1200*time.Millisecond+margin {
		t.Fatalf("ReceiveTimeout 1.2s on a quiet channel: %v after %s", err, d)
	}
	go func() {
		time.Sleep(500 * time.Millisecond)
		_ = c.Client().Publish(context.Background(), c.Key("ch"), "hello").Err()
	}()
	msg, err := sub.ReceiveTimeout(ctx, 3*time.Second)
	if m, ok := msg.(*redis.Message); err != nil || !ok || m.Payload != "hello" {
		t.Fatalf("message after 0.5s = %v, %v", msg, err)
	}
}

// assertSharedBreakerMetrics checks the breaker in /metrics: in the
// families every plugin that calls out shares, under plugin "cache" and
// dependency "redis", its state series (there from the start) at state and
// its transitions to open (from closed, and from half_open: a failed probe)
// summing to opens; and no breaker family of the plugin's own beside them.
func assertSharedBreakerMetrics(t *testing.T, b bundle, when string, state resilience.State, opens float64) {
	t.Helper()
	metrics := b.svc.Get(t, "/metrics").String()
	if want := fmt.Sprintf(`jfast_client_breaker_state{dependency="redis",plugin="cache"} %d`, state); !strings.Contains(metrics, want) {
		t.Errorf("/metrics %s lacks %q", when, want)
	}
	got := 0.0
	for _, from := range []string{"closed", "half_open"} {
		got += jfasttest.Metric(t, b.svc.App.Metrics(), "jfast_client_breaker_transitions_total",
			"plugin", "cache", "dependency", "redis", "from", from, "to", "open")
	}
	if got != opens {
		t.Errorf("%s: jfast_client_breaker_transitions_total{plugin=\"cache\",dependency=\"redis\",to=\"open\"} = %v, want %v", when, got, opens)
	}
	for _, line := range strings.Split(metrics, "\n") {
		if strings.HasPrefix(line, "jfast_cache_") && strings.Contains(line, "breaker") {
			t.Errorf("/metrics %s has a cache family of the breaker's own beside jfast_client_breaker_*: %s", when, line)
		}
	}
}

// A blocking command sent through Do is read by go-redis with
// command_timeout, not with its wait: one whose wait is 0 (forever) or
// reaches command_timeout is refused before it is sent, naming the typed
// method, and counts nothing (on a healthy Redis its cut would have been
// taken for a hang, opening the breaker for every user of the cache); one
// with a shorter wait is sent and answers.
func TestBlockingCommandThroughDo(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{toml: "command_timeout = \"300ms\"\n"})
	c, ctx := b.cache, context.Background()
	raw := c.Client()
	for _, args := range [][]any{
		{"BLPOP", c.Key("empty"), 1},
		{"blpop", c.Key("empty"), 0},
		{"XREAD", "BLOCK", 300, "STREAMS", c.Key("s"), "$"},
		{"WAIT", 0, 5000},
	} {
		err := raw.Do(ctx, args...).Err()
		if err == nil || errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "use the client's typed method") {
			t.Errorf("Do%v = %v; want it refused before it is sent, naming the typed method", args, err)
		}
	}
	if s := c.Breaker().Snapshot(); s.State != resilience.StateClosed || s.Consecutive != 0 {
		t.Errorf("the refused commands reached the breaker: %+v", s)
	}
	if err := raw.Do(ctx, "BLPOP", c.Key("empty"), "0.05").Err(); err != redis.Nil {
		t.Errorf("Do BLPOP with a 50 ms wait = %v, want redis.Nil", err)
	}
}
