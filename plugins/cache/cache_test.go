package cache

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/redis/go-redis/v9"

	"github.com/jfastframework/jfast/framework/resilience"
)

func TestCommands(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	c, ctx := b.cache, context.Background()

	if _, ok, err := c.Get(ctx, "missing"); err != nil || ok {
		t.Fatalf("Get(missing) = ok %v, err %v; want a miss", ok, err)
	}
	if err := c.Set(ctx, "k", []byte("v1"), time.Minute); err != nil {
		t.Fatal(err)
	}
	v, ok, err := c.Get(ctx, "k")
	if err != nil || !ok || string(v) != "v1" {
		t.Fatalf("Get(k) = %q, %v, %v", v, ok, err)
	}
	// The prefix is really in Redis, and the raw client sees the same key.
	if got, err := c.Client().Get(ctx, b.prefix+"k").Result(); err != nil || got != "v1" {
		t.Fatalf("raw GET %sk = %q, %v", b.prefix, got, err)
	}
	if c.Key("k") != b.prefix+"k" || c.KeyPrefix() != b.prefix {
		t.Errorf("Key/KeyPrefix = %q/%q", c.Key("k"), c.KeyPrefix())
	}
	d, ok, err := c.TTL(ctx, "k")
	if err != nil || !ok || d <= 58*time.Second || d > time.Minute {
		t.Errorf("TTL(k) = %s, %v, %v; want about 1m", d, ok, err)
	}
	if err := c.Set(ctx, "k2", []byte("x"), time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := c.Delete(ctx, "k", "k2", "never-there"); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := c.Get(ctx, "k"); ok {
		t.Error("k still there after Delete")
	}
	if err := c.Delete(ctx); err != nil {
		t.Errorf("Delete() with no keys = %v", err)
	}
	if err := c.Set(ctx, "k", []byte("v"), 0); err == nil {
		t.Error("Set with ttl 0 accepted; an entry without expiry is refused")
	}
	if _, ok, err := c.TTL(ctx, "missing"); err != nil || ok {
		t.Errorf("TTL(missing) = %v, %v", ok, err)
	}
}

func TestTTLExpires(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	ctx := context.Background()
	if err := b.cache.Set(ctx, "short", []byte("v"), 400*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := b.cache.Get(ctx, "short"); !ok {
		t.Fatal("value missing right after Set")
	}
	time.Sleep(600 * time.Millisecond) // Redis expires on its own clock
	if _, ok, err := b.cache.Get(ctx, "short"); ok || err != nil {
		t.Fatalf("after its TTL: ok %v, err %v; want a miss", ok, err)
	}
}

type price struct {
	SKU   string   `json:"sku"`
	Cents int      `json:"cents"`
	Tags  []string `json:"tags"`
}

func TestJSONHelpers(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	ctx := context.Background()
	in := price{SKU: "A-1", Cents: 1999, Tags: []string{"x"}}
	if err := SetJSON(ctx, b.cache, "p", in, time.Minute); err != nil {
		t.Fatal(err)
	}
	out, ok, err := GetJSON[price](ctx, b.cache, "p")
	if err != nil || !ok || out.SKU != in.SKU || out.Cents != in.Cents || len(out.Tags) != 1 {
		t.Fatalf("GetJSON = %+v, %v, %v", out, ok, err)
	}
	if _, ok, err := GetJSON[price](ctx, b.cache, "nope"); ok || err != nil {
		t.Errorf("GetJSON(missing) = %v, %v", ok, err)
	}
	_ = b.cache.Set(ctx, "garbage", []byte("{not json"), time.Minute)
	if _, _, err := GetJSON[price](ctx, b.cache, "garbage"); err == nil {
		t.Error("GetJSON of a value that is not JSON returned no error")
	}
	if err := SetJSON(ctx, b.cache, "bad", func() {}, time.Minute); err == nil {
		t.Error("SetJSON of a func returned no error")
	}
}

// 100 concurrent callers of a cold key: one computation, one value for all, and
// the value is then cached.
func TestRememberSingleFlight(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	ctx := context.Background()
	var calls atomic.Int64
	release := make(chan struct{})
	fn := func(ctx context.Context) (price, error) {
		calls.Add(1)
		<-release // hold the computation until every caller is waiting
		return price{SKU: "cold", Cents: 42}, nil
	}
	const n = 100
	var wg sync.WaitGroup
	results := make([]price, n)
	errs := make([]error, n)
	var started sync.WaitGroup
	started.Add(n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			started.Done()
			results[i], errs[i] = RememberJSON(ctx, b.cache, "cold", time.Minute, fn)
		}()
	}
	started.Wait()
	time.Sleep(100 * time.Millisecond) // let the callers reach the flight
	close(release)
	wg.Wait()
	if got := calls.Load(); got != 1 {
		t.Fatalf("fn ran %d times for 100 concurrent callers, want 1", got)
	}
	for i := range n {
		if errs[i] != nil || results[i].Cents != 42 {
			t.Fatalf("caller %d got %+v, %v", i, results[i], errs[i])
		}
	}
	// Cached now: another call does not compute.
	v, err := RememberJSON(ctx, b.cache, "cold", time.Minute, fn)
	if err != nil || v.Cents != 42 || calls.Load() != 1 {
		t.Fatalf("warm Remember = %+v, %v after %d calls", v, err, calls.Load())
	}
	if d, ok, _ := b.cache.TTL(ctx, "cold"); !ok || d > time.Minute || d < 50*time.Second {
		t.Errorf("remembered value's TTL = %s, %v", d, ok)
	}
}

func TestRememberErrorsAndBytes(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	ctx := context.Background()
	boom := errors.New("boom")
	if _, err := b.cache.Remember(ctx, "e", time.Minute, func(context.Context) ([]byte, error) { return nil, boom }); !errors.Is(err, boom) {
		t.Fatalf("fn error = %v, want boom", err)
	}
	if _, ok, _ := b.cache.Get(ctx, "e"); ok {
		t.Error("a failed computation was stored")
	}
	v, err := b.cache.Remember(ctx, "e", time.Minute, func(context.Context) ([]byte, error) { return []byte("ok"), nil })
	if err != nil || string(v) != "ok" {
		t.Fatalf("Remember = %q, %v", v, err)
	}
	if _, err := b.cache.Remember(ctx, "e", 0, nil); err == nil {
		t.Error("Remember with ttl 0 accepted")
	}
	// A stored value that does not decode is recomputed and replaced.
	_ = b.cache.Set(ctx, "j", []byte("not json"), time.Minute)
	p, err := RememberJSON(ctx, b.cache, "j", time.Minute, func(context.Context) (price, error) { return price{Cents: 7}, nil })
	if err != nil || p.Cents != 7 {
		t.Fatalf("RememberJSON over garbage = %+v, %v", p, err)
	}
	if got, _, _ := GetJSON[price](ctx, b.cache, "j"); got.Cents != 7 {
		t.Errorf("garbage not replaced: %+v", got)
	}
	// A caller that gives up gets its context's error; the computation goes on
	// for the others and is stored.
	release := make(chan struct{})
	cctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		_, err := b.cache.Remember(cctx, "slow", time.Minute, func(context.Context) ([]byte, error) {
			<-release
			return []byte("late"), nil
		})
		done <- err
	}()
	time.Sleep(50 * time.Millisecond)
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled caller got %v", err)
	}
	close(release)
	deadline := time.Now().Add(5 * time.Second)
	for {
		if v, ok, _ := b.cache.Get(ctx, "slow"); ok && string(v) == "late" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the computation of a cancelled leader was not stored")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Misses and error replies are answers from Redis: they never open the breaker.
func TestMissesAndErrorRepliesKeepBreakerClosed(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{toml: "breaker_failures = 2\nbreaker_minimum_calls = 2\n"})
	ctx := context.Background()
	for i := range 30 {
		if _, _, err := b.cache.Get(ctx, fmt.Sprintf("miss-%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	raw := b.cache.Client()
	_ = raw.LPush(ctx, b.prefix+"list", "x").Err()
	for range 5 {
		err := raw.Get(ctx, b.prefix+"list").Err() // WRONGTYPE
		var re redis.Error
		if !errors.As(err, &re) || errors.Is(err, ErrUnavailable) {
			t.Fatalf("WRONGTYPE reply = %v, want the reply error as go-redis makes it", err)
		}
	}
	if s := b.cache.Breaker().Snapshot(); s.State != resilience.StateClosed || s.Consecutive != 0 {
		t.Fatalf("breaker after misses and error replies = %+v, want closed", s)
	}
}

func TestCommandWait(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cases := []struct {
		cmd      redis.Cmder
		wait     time.Duration
		blocking bool
	}{
		{redis.NewStringCmd(ctx, "get", "k"), 0, false},
		{redis.NewStringSliceCmd(ctx, "blpop", "a", "b", int64(2)), 2 * time.Second, true},
		{redis.NewStringSliceCmd(ctx, "BRPOP", "a", "0.5"), 500 * time.Millisecond, true},
		{redis.NewStringCmd(ctx, "blmove", "a", "b", "left", "right", int64(0)), 0, true},
		{redis.NewStringCmd(ctx, "brpoplpush", "a", "b", int64(3)), 3 * time.Second, true},
		{redis.NewStringCmd(ctx, "bzpopmin", "z", float64(1.5)), 1500 * time.Millisecond, true},
		{redis.NewStringCmd(ctx, "blmpop", int64(4), int64(1), "a", "left"), 4 * time.Second, true},
		{redis.NewStringCmd(ctx, "xread", "count", int64(1), "block", int64(1500), "streams", "s", "$"), 1500 * time.Millisecond, true},
		{redis.NewStringCmd(ctx, "xread", "streams", "s", "0"), 0, false},
		{redis.NewStringCmd(ctx, "xreadgroup", "group", "g", "c", "BLOCK", "200", "streams", "s", ">"), 200 * time.Millisecond, true},
		{redis.NewStringCmd(ctx, "xread", "streams", "block", "0"), 0, false},
		{redis.NewStringCmd(ctx, "xreadgroup", "group", "block", "7", "streams", "s", ">"), 0, false},
		{redis.NewIntCmd(ctx, "wait", int64(1), int64(100)), 100 * time.Millisecond, true},
		{redis.NewIntCmd(ctx, "waitaof", int64(1), int64(0), int64(250)), 250 * time.Millisecond, true},
		{redis.NewStringCmd(ctx, "bitcount", "k"), 0, false},
	}
	for _, tc := range cases {
		w, blocking := commandWait(tc.cmd)
		if w != tc.wait || blocking != tc.blocking {
			t.Errorf("%v: wait %s blocking %v, want %s %v", tc.cmd.Args(), w, blocking, tc.wait, tc.blocking)
		}
	}
}

// The 503 body says what failed without internals: no address, no cause text
// other than the breaker's own message.
func TestUnavailableErrorProblem(t *testing.T) {
	t.Parallel()
	cause := errors.New("dial tcp 10.1.2.3:6379: connect: connection refused")
	cases := []struct {
		err        *UnavailableError
		msg        string
		detail     string
		retryAfter time.Duration
	}{
		{&UnavailableError{Err: cause}, "redis unreachable: " + cause.Error(), "redis unreachable", 0},
		{&UnavailableError{Err: context.DeadlineExceeded, Timeout: time.Second},
			"redis unreachable: no answer within 1s: context deadline exceeded", "redis unreachable: no answer within 1s", 0},
	}
	for _, tc := range cases {
		if tc.err.Error() != tc.msg {
			t.Errorf("Error() = %q, want %q", tc.err.Error(), tc.msg)
		}
		p := tc.err.Problem()
		if p.Status != 503 || p.Detail != tc.detail || p.Extensions["dependency"] != "cache" || p.RetryAfter != tc.retryAfter {
			t.Errorf("Problem() = %+v", p)
		}
		if !errors.Is(tc.err, ErrUnavailable) || !errors.Is(tc.err, tc.err.Err) {
			t.Errorf("errors.Is does not reach ErrUnavailable and the cause for %v", tc.err)
		}
	}
}

// TestRememberPanicReachesTheCallers: a panicking fn runs in the flight's own
// goroutine; it must come back as a panic in the callers' goroutines (where the
// recovery middleware turns it into a 500), not end the process. The route
// answers 500 problem+json, the service keeps serving, and the key is not stuck.
func TestRememberPanicReachesTheCallers(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{routes: func(c *Plugin, r chi.Router) {
		r.Get("/boom", func(w http.ResponseWriter, r *http.Request) {
			v, _ := c.Remember(r.Context(), "boom", time.Minute, func(context.Context) ([]byte, error) {
				var m map[string]int
				//lint:ignore SA5000 the test needs a real runtime panic
				m["x"] = 1 // nil map: panics
				return []byte("never"), nil
			})
			w.Write(v)
		})
	}})
	r := b.svc.Get(t, "/boom")
	if r.Status != http.StatusInternalServerError || !strings.Contains(r.Header.Get("Content-Type"), "application/problem+json") {
		t.Fatalf("panicking fn: %d %s %s", r.Status, r.Header.Get("Content-Type"), r.Body)
	}
	// Called directly, the panic is raised in the caller's goroutine and
	// carries fn's panic value.
	func() {
		defer func() {
			v := recover()
			err, ok := v.(error)
			if !ok || !strings.Contains(err.Error(), "assignment to entry in nil map") {
				t.Errorf("recovered %v, want fn's panic", v)
			}
		}()
		_, _ = b.cache.Remember(context.Background(), "boom", time.Minute, func(context.Context) ([]byte, error) {
			var m map[string]int
			//lint:ignore SA5000 the test needs a real runtime panic
			m["x"] = 1
			return nil, nil
		})
		t.Error("Remember returned after fn panicked")
	}()
	v, err := b.cache.Remember(context.Background(), "boom", time.Minute, func(context.Context) ([]byte, error) { return []byte("ok"), nil })
	if err != nil || string(v) != "ok" {
		t.Fatalf("Remember after a panic = %q, %v", v, err)
	}
}

// TestRememberTypesOfOneKeyDoNotShareAFlight: Remember and RememberJSON[T] on
// the same key at the same time each get a value of their own type (a shared
// flight handed one the other's result and panicked on its type).
func TestRememberTypesOfOneKeyDoNotShareAFlight(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	ctx := context.Background()
	rawStarted, jsonDone := make(chan struct{}), make(chan struct{})
	raw := make(chan error, 1)
	go func() {
		v, err := b.cache.Remember(ctx, "shared", time.Minute, func(context.Context) ([]byte, error) {
			close(rawStarted)
			select { // hold this flight until the JSON caller has its answer
			case <-jsonDone:
			case <-time.After(3 * time.Second):
			}
			return []byte(`{"sku":"raw","cents":1}`), nil
		})
		if err == nil && string(v) != `{"sku":"raw","cents":1}` {
			err = fmt.Errorf("raw Remember = %q", v)
		}
		raw <- err
	}()
	<-rawStarted
	start := time.Now()
	p, err := RememberJSON(ctx, b.cache, "shared", time.Minute, func(context.Context) (price, error) {
		return price{SKU: "json", Cents: 2}, nil
	})
	close(jsonDone)
	if err != nil || p.SKU != "json" {
		t.Fatalf("RememberJSON during a raw Remember of the same key = %+v, %v", p, err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("RememberJSON waited %s on the raw flight", d)
	}
	if err := <-raw; err != nil {
		t.Fatal(err)
	}
}
