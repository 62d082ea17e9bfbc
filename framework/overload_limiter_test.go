package framework_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/framework/resilience"
	"github.com/jfastframework/jfast/jfasttest"
)

// limiterSetup returns a Limiter on a test clock with windows of 10 ms, so
// one batch of requests taking 10 ms closes a window.
func limiterSetup(t *testing.T, edit func(*framework.OverloadConfig)) (*framework.Limiter, *resilience.TestClock, framework.OverloadConfig) {
	t.Helper()
	cfg := framework.DefaultOverloadConfig()
	cfg.Window = 10 * time.Millisecond
	cfg.BaselineWindow = time.Second
	if edit != nil {
		edit(&cfg)
	}
	clk := resilience.NewTestClock(time.Unix(1_700_000_000, 0))
	return framework.NewLimiter(cfg, clk), clk, cfg
}

// window runs n requests that each take latency, at most the limit at a
// time, then closes the window: a request that is abandoned (no sample) a
// window's time later. The limit has then moved on exactly these n.
func window(t *testing.T, l *framework.Limiter, clk *resilience.TestClock, cfg framework.OverloadConfig, n int, latency time.Duration) {
	t.Helper()
	for n > 0 {
		k := min(n, l.State().Limit)
		permits := make([]framework.Permit, k)
		for i := range permits {
			p, err := l.Acquire(context.Background(), framework.PriorityNormal)
			if err != nil {
				t.Fatalf("request %d of %d (limit %d): %v", i, k, l.State().Limit, err)
			}
			permits[i] = p
		}
		clk.Advance(latency)
		for _, p := range permits {
			p.Release()
		}
		n -= k
	}
	p, err := l.Acquire(context.Background(), framework.PriorityNormal)
	if err != nil {
		t.Fatal(err)
	}
	clk.Advance(cfg.Window)
	p.Abandon()
}

func TestLimitGrowsWhileLatencyHoldsAndTheLimitIsUsed(t *testing.T) {
	t.Parallel()
	l, clk, cfg := limiterSetup(t, nil)
	want := float64(cfg.InitialLimit)
	for range 6 {
		window(t, l, clk, cfg, int(want), 10*time.Millisecond)
		want += math.Sqrt(want)
		if got := l.State().Limit; got != int(want) {
			t.Fatalf("limit = %d, want %d (the limit grows by its square root per window)", got, int(want))
		}
	}
	if s := l.State(); s.Baseline != 10*time.Millisecond || s.Recent != 10*time.Millisecond {
		t.Fatalf("baseline %v, recent %v; want 10ms both", s.Baseline, s.Recent)
	}
}

func TestLimitStaysWhenNotUsed(t *testing.T) {
	t.Parallel()
	l, clk, cfg := limiterSetup(t, nil)
	for range 5 {
		// 9 at once, under half of the limit of 20: the service is not
		// limited, so its latency says nothing about a higher limit.
		window(t, l, clk, cfg, cfg.InitialLimit/2-1, 10*time.Millisecond)
	}
	if got := l.State().Limit; got != cfg.InitialLimit {
		t.Fatalf("limit = %d, want it unchanged at %d", got, cfg.InitialLimit)
	}
}

func TestLimitShrinksWhenLatencyRisesPastTolerance(t *testing.T) {
	t.Parallel()
	l, clk, cfg := limiterSetup(t, func(c *framework.OverloadConfig) {
		// The baseline of 10 ms must last the whole descent to min_limit
		// (windows of 100 ms requests, at most the limit at a time).
		c.InitialLimit, c.BaselineWindow = 100, 10*time.Second
	})
	window(t, l, clk, cfg, 100, 10*time.Millisecond) // baseline 10 ms
	limit := float64(l.State().Limit)
	// 12 ms is within tolerance (1.5 × 10 ms): the limit is used and grows.
	window(t, l, clk, cfg, int(limit), 12*time.Millisecond)
	limit += math.Sqrt(limit)
	if got := l.State().Limit; got != int(limit) {
		t.Fatalf("at 12 ms limit = %d, want %d", got, int(limit))
	}
	// 20 ms: gradient 1.5 × 10 / 20 = 0.75.
	window(t, l, clk, cfg, 20, 20*time.Millisecond)
	limit *= cfg.Tolerance * 10 / 20
	if got := l.State().Limit; got != int(limit) {
		t.Fatalf("at 20 ms limit = %d, want %d", got, int(limit))
	}
	// 100 ms: the gradient 0.15 is held at 0.5, a halving per window, down
	// to min_limit.
	for l.State().Limit > cfg.MinLimit {
		before := l.State().Limit
		window(t, l, clk, cfg, 10, 100*time.Millisecond)
		after := l.State().Limit
		if after < before/2 || after >= before {
			t.Fatalf("limit went from %d to %d; want at most a halving", before, after)
		}
	}
	window(t, l, clk, cfg, 10, 100*time.Millisecond)
	if got := l.State().Limit; got != cfg.MinLimit {
		t.Fatalf("limit = %d, want min_limit %d", got, cfg.MinLimit)
	}
}

func TestBaselineForgetsAfterBaselineWindow(t *testing.T) {
	t.Parallel()
	l, clk, cfg := limiterSetup(t, func(c *framework.OverloadConfig) { c.InitialLimit, c.MinLimit = 10, 10 })
	window(t, l, clk, cfg, 10, 10*time.Millisecond)
	// The dependency becomes slower for good: 40 ms. Within baseline_window
	// the baseline is still 10 ms.
	for clk.Now().Sub(time.Unix(1_700_000_000, 0)) < cfg.BaselineWindow {
		window(t, l, clk, cfg, 10, 40*time.Millisecond)
	}
	window(t, l, clk, cfg, 10, 40*time.Millisecond)
	if got := l.State().Baseline; got != 40*time.Millisecond {
		t.Fatalf("baseline = %v after baseline_window at 40 ms, want 40ms", got)
	}
}

// queued starts a request that must wait, and returns a channel that gets
// its outcome. Admitted, it appends name to order (when not nil) and
// releases its slot at once.
func queued(l *framework.Limiter, ctx context.Context, class framework.Priority, name string, order *[]string) <-chan error {
	out := make(chan error, 1)
	go func() {
		p, err := l.Acquire(ctx, class)
		if err == nil {
			if order != nil {
				*order = append(*order, name) // the one slot serialises the waiters
			}
			p.Release()
		}
		out <- err
	}()
	return out
}

func fill(t *testing.T, l *framework.Limiter) []framework.Permit {
	t.Helper()
	var held []framework.Permit
	for l.State().InFlight < l.State().Limit {
		p, err := l.Acquire(context.Background(), framework.PriorityNormal)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, p)
	}
	return held
}

func shedReason(err error) string {
	var shed *framework.ShedError
	if errors.As(err, &shed) {
		return shed.Reason
	}
	return ""
}

func TestQueueServesNewestFirstAndHigherClassesFirst(t *testing.T) {
	t.Parallel()
	l, clk, _ := limiterSetup(t, func(c *framework.OverloadConfig) { c.InitialLimit, c.MinLimit = 1, 1 })
	held := fill(t, l)
	var order []string
	old := queued(l, context.Background(), framework.PriorityNormal, "old", &order)
	clk.BlockUntil(1)
	newer := queued(l, context.Background(), framework.PriorityNormal, "newer", &order)
	clk.BlockUntil(2)
	low := queued(l, context.Background(), framework.PrioritySheddable, "sheddable", &order)
	clk.BlockUntil(3)
	crit := queued(l, context.Background(), framework.PriorityCritical, "critical", &order)
	clk.BlockUntil(4)

	// One slot: each admitted waiter releases it at once to the next.
	held[0].Release()
	for i, ch := range []<-chan error{crit, newer, old, low} {
		if err := <-ch; err != nil {
			t.Fatalf("waiter %d: %v", i, err)
		}
	}
	if want := []string{"critical", "newer", "old", "sheddable"}; !slices.Equal(order, want) {
		t.Fatalf("admitted in the order %v, want %v", order, want)
	}
	if s := l.State(); s.InFlight != 0 || s.Queued != 0 {
		t.Fatalf("state %+v after all released", s)
	}
}

func TestQueueFullShedsTheOldestOfTheLowestClass(t *testing.T) {
	t.Parallel()
	l, clk, _ := limiterSetup(t, func(c *framework.OverloadConfig) { c.InitialLimit, c.MinLimit, c.Queue = 1, 1, 2 })
	held := fill(t, l)
	first := queued(l, context.Background(), framework.PriorityNormal, "", nil)
	clk.BlockUntil(1)
	second := queued(l, context.Background(), framework.PriorityNormal, "", nil)
	clk.BlockUntil(2)

	// A normal newcomer to a full queue of normal ones takes the oldest's place.
	third := queued(l, context.Background(), framework.PriorityNormal, "", nil)
	if got := shedReason(<-first); got != framework.ShedQueueFull {
		t.Fatalf("the oldest waiter got %q, want %q", got, framework.ShedQueueFull)
	}
	clk.BlockUntil(2)
	// A sheddable newcomer outranks nobody: it is shed at once.
	if _, err := l.Acquire(context.Background(), framework.PrioritySheddable); shedReason(err) != framework.ShedQueueFull {
		t.Fatalf("sheddable newcomer: %v, want queue_full", err)
	}
	// A critical one takes the place of the oldest normal one.
	crit := queued(l, context.Background(), framework.PriorityCritical, "", nil)
	if got := shedReason(<-second); got != framework.ShedQueueFull {
		t.Fatalf("second waiter got %q, want %q", got, framework.ShedQueueFull)
	}
	clk.BlockUntil(2)
	held[0].Release()
	for _, ch := range []<-chan error{crit, third} {
		if err := <-ch; err != nil {
			t.Fatal(err)
		}
	}
	shed := l.State().Shed[framework.ShedQueueFull]
	if shed["normal"] != 2 || shed["sheddable"] != 1 || shed["critical"] != 0 {
		t.Fatalf("queue_full counts %v, want normal 2, sheddable 1", shed)
	}
}

func TestQueueTimeoutAndClientGone(t *testing.T) {
	t.Parallel()
	l, clk, cfg := limiterSetup(t, func(c *framework.OverloadConfig) { c.InitialLimit, c.MinLimit = 1, 1 })
	held := fill(t, l)
	defer held[0].Release()

	waited := queued(l, context.Background(), framework.PriorityNormal, "", nil)
	clk.BlockUntil(1)
	clk.Advance(cfg.QueueTimeout - time.Millisecond)
	select {
	case err := <-waited:
		t.Fatalf("shed before queue_timeout: %v", err)
	default:
	}
	clk.Advance(time.Millisecond)
	err := <-waited
	if shedReason(err) != framework.ShedQueueTimeout {
		t.Fatalf("after queue_timeout: %v, want queue_timeout", err)
	}
	var shed *framework.ShedError
	errors.As(err, &shed)
	if p := shed.Problem(); p.Status != 503 || p.RetryAfter != cfg.RetryAfter {
		t.Fatalf("shed renders as %d with Retry-After %v, want 503 with %v", p.Status, p.RetryAfter, cfg.RetryAfter)
	}

	ctx, cancel := context.WithCancel(context.Background())
	gone := queued(l, ctx, framework.PriorityNormal, "", nil)
	clk.BlockUntil(1)
	cancel()
	if got := shedReason(<-gone); got != framework.ShedClientGone {
		t.Fatalf("a waiter whose client left got %q, want %q", got, framework.ShedClientGone)
	}
	if s := l.State(); s.Queued != 0 || s.InFlight != 1 {
		t.Fatalf("state %+v, want one in flight and none queued", s)
	}
}

func TestExemptNeverWaits(t *testing.T) {
	t.Parallel()
	l, _, _ := limiterSetup(t, func(c *framework.OverloadConfig) { c.InitialLimit, c.MinLimit, c.Queue = 1, 1, 0 })
	held := fill(t, l)
	defer held[0].Release()
	if _, err := l.Acquire(context.Background(), framework.PriorityNormal); shedReason(err) != framework.ShedQueueFull {
		t.Fatalf("over the limit with no queue: %v, want queue_full", err)
	}
	p, err := l.Acquire(context.Background(), framework.PriorityExempt)
	if err != nil {
		t.Fatal(err)
	}
	p.Release()
	if got := l.State().InFlight; got != 1 {
		t.Fatalf("in flight %d; an exempt request must not count", got)
	}
}

// BenchmarkShed is what turning a request away costs the service: jfast's
// shed (queue = 0, the limit held full) against a bare 503 on chi, in
// process. And what admission costs a request under the limit
// (Acquire and Release).
func BenchmarkShed(b *testing.B) {
	b.Run("impl=chi-503", func(b *testing.B) {
		r := chi.NewRouter()
		r.Get("/hello", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusServiceUnavailable) })
		serveLoop(b, r)
	})
	b.Run("impl=jfast", func(b *testing.B) {
		app := fullApp(b, io.Discard, nil, 0)
		serveLoop(b, app.Router())
	})
}

// fullApp starts an App whose limit (1) a request to /hold fills until the
// test ends, so every request to /hello waits in a queue of queue places
// (for up to 10 s) or, with queue 0, is shed at once; it logs to out, on
// clock (nil: the real one).
func fullApp(tb testing.TB, out io.Writer, clock resilience.Clock, queue int) *framework.App {
	tb.Helper()
	hold, entered := make(chan struct{}), make(chan struct{})
	app, err := framework.New(framework.Options{
		ConfigText: fmt.Sprintf("[app]\nlisten = \"127.0.0.1:0\"\n[app.overload]\ninitial_limit = 1\nmin_limit = 1\nmax_limit = 1\nqueue = %d\nqueue_timeout = \"10s\"\n", queue),
		Environ:    []string{},
		LogOutput:  out,
		Clock:      clock,
		Routes: func(_ *framework.App, r chi.Router) error {
			r.Get("/hello", func(http.ResponseWriter, *http.Request) {})
			r.Get("/hold", func(http.ResponseWriter, *http.Request) { close(entered); <-hold })
			return nil
		},
	})
	if err != nil {
		tb.Fatal(err)
	}
	if err := app.Start(context.Background()); err != nil {
		tb.Fatal(err)
	}
	held := make(chan struct{})
	go func() {
		defer close(held)
		app.Router().ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/hold", nil))
	}()
	<-entered
	tb.Cleanup(func() {
		close(hold)
		<-held
		_ = app.Stop(context.Background())
	})
	return app
}

func serveLoop(b *testing.B, h http.Handler) {
	req := httptest.NewRequest(http.MethodGet, "/hello", nil)
	b.ReportAllocs()
	for b.Loop() {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != http.StatusServiceUnavailable {
			b.Fatalf("status %d", w.Code)
		}
	}
}

func BenchmarkAdmit(b *testing.B) {
	l := framework.NewLimiter(framework.DefaultOverloadConfig(), nil)
	b.ReportAllocs()
	for b.Loop() {
		p, err := l.Acquire(context.Background(), framework.PriorityNormal)
		if err != nil {
			b.Fatal(err)
		}
		p.Release()
	}
}

// Requests that wait for a CPU before the front door sees them are queueing
// all the same: past max_cpu_wait the limit shrinks though the handlers'
// latency holds.
func TestLimitShrinksWhenRequestsWaitForACPU(t *testing.T) {
	t.Parallel()
	l, clk, cfg := limiterSetup(t, func(c *framework.OverloadConfig) { c.InitialLimit = 100 })
	wait := cfg.MaxCPUWait / 2
	framework.SetCPUWait(l, func() time.Duration { return wait })
	window(t, l, clk, cfg, 100, 10*time.Millisecond)
	limit := 100 + math.Sqrt(100)
	if got := l.State().Limit; got != int(limit) {
		t.Fatalf("CPU wait under max_cpu_wait: limit %d, want %d", got, int(limit))
	}
	wait = 8 * cfg.MaxCPUWait                               // gradient 0.125, held at 0.75: a quarter a window
	window(t, l, clk, cfg, int(limit), 10*time.Millisecond) // the whole limit in flight
	limit *= 0.75
	if s := l.State(); s.Limit != int(limit) || s.CPUWait != wait {
		t.Fatalf("CPU wait 4 × max_cpu_wait: limit %d, CPU wait %v; want %d, %v", s.Limit, s.CPUWait, int(limit), wait)
	}
}

// Past max_cpu_wait the shrink starts from the most requests in flight in
// the window, not from a limit above them that nothing showed the CPU can
// take (initial_limit, or a limit grown while the service was not full).
func TestLimitShrinkStartsFromWhatRan(t *testing.T) {
	t.Parallel()
	l, clk, cfg := limiterSetup(t, func(c *framework.OverloadConfig) { c.InitialLimit = 100 })
	wait := 8 * cfg.MaxCPUWait
	framework.SetCPUWait(l, func() time.Duration { return wait })
	window(t, l, clk, cfg, 10, 10*time.Millisecond)   // 10 at once under a limit of 100
	if got, want := l.State().Limit, 7; got != want { // 10 × 0.75, whole
		t.Fatalf("CPU wait past max_cpu_wait with 10 in flight under a limit of 100: limit %d, want %d (10 × 0.75)", got, want)
	}
	// At max_cpu_wait, not past it, a limit above the window's peak stays.
	l2, clk2, cfg2 := limiterSetup(t, func(c *framework.OverloadConfig) { c.InitialLimit = 100 })
	framework.SetCPUWait(l2, func() time.Duration { return cfg2.MaxCPUWait })
	window(t, l2, clk2, cfg2, 10, 10*time.Millisecond)
	if got := l2.State().Limit; got != 100 {
		t.Fatalf("CPU wait at max_cpu_wait (not past it) with 10 in flight: limit %d, want 100", got)
	}
}

// Between half of max_cpu_wait and max_cpu_wait the limit holds: the CPU is
// nearly full, and one more request a window would tip it over (a limit that
// kept growing there saturated the CPU, then shrank, in waves the callers saw
// as a long tail).
func TestLimitHoldsWhileTheWaitForACPUNearsItsBound(t *testing.T) {
	t.Parallel()
	l, clk, cfg := limiterSetup(t, func(c *framework.OverloadConfig) { c.InitialLimit = 100 })
	wait := cfg.MaxCPUWait/2 + time.Millisecond
	framework.SetCPUWait(l, func() time.Duration { return wait })
	window(t, l, clk, cfg, 100, 10*time.Millisecond)
	if got := l.State().Limit; got != 100 {
		t.Fatalf("CPU wait just past half of max_cpu_wait: limit %d, want it held at 100", got)
	}
	wait = cfg.MaxCPUWait / 2
	window(t, l, clk, cfg, 100, 10*time.Millisecond)
	if got, want := l.State().Limit, int(100+math.Sqrt(100)); got != want {
		t.Fatalf("CPU wait back at half of max_cpu_wait: limit %d, want %d (grown)", got, want)
	}
}

// One request over the limit may run while no goroutine waits for a CPU
// (the spare slot): at once on arrival, and from the queue when a slot
// frees; while one waits, the limit is the limit.
func TestSpareSlotRunsWhileNoGoroutineWaitsForACPU(t *testing.T) {
	t.Parallel()
	l, clk, _ := limiterSetup(t, func(c *framework.OverloadConfig) { c.InitialLimit, c.MinLimit = 2, 2 })
	busy := false
	framework.SetCPUBusy(l, func() bool { return busy })
	// waiter queues a request that keeps its slot once admitted.
	waiter := func(timers int) <-chan framework.Permit {
		t.Helper()
		out := make(chan framework.Permit, 1)
		go func() {
			p, err := l.Acquire(context.Background(), framework.PriorityNormal)
			if err != nil {
				t.Error(err)
			}
			out <- p
		}()
		clk.BlockUntil(timers) // queued: its queue_timeout is set
		return out
	}
	held := fill(t, l) // the limit, 2
	spare, err := l.Acquire(context.Background(), framework.PriorityNormal)
	if err != nil {
		t.Fatalf("a third request with the CPU free: %v, want the spare slot", err)
	}
	if s := l.State(); s.InFlight != 3 || s.Limit != 2 {
		t.Fatalf("state %+v, want 3 in flight over a limit of 2", s)
	}
	w4 := waiter(1) // a fourth waits: the spare slot is one

	busy = true
	spare.Release() // back to the limit, with a goroutine waiting for a CPU
	if s := l.State(); s.InFlight != 2 || s.Queued != 1 {
		t.Fatalf("state %+v, want the waiter kept queued while the CPU is busy", s)
	}
	held[1].Release() // under the limit: the waiter runs whatever the CPU
	p4 := <-w4
	w5 := waiter(1)
	w6 := waiter(2)
	busy = false
	held[0].Release() // one slot under the limit, then the spare one
	p5, p6 := <-w5, <-w6
	if s := l.State(); s.InFlight != 3 || s.Queued != 0 || s.Spare != 2 {
		t.Fatalf("state %+v, want both waiters running, one in the spare slot, and 2 spare admissions in all", s)
	}
	for _, p := range []framework.Permit{p4, p5, p6} {
		p.Release()
	}
}

// The scheduler readings the limit moves on exist on the Go jfast builds
// with (a Go without them would leave the App's limit without its CPU
// signals, silently).
func TestSchedulerSignalsExist(t *testing.T) {
	if wait, busy := framework.SchedulerSignals(); !wait || !busy {
		t.Fatalf("scheduler signals: CPU wait %v, run queues %v; want both", wait, busy)
	}
}

// The limit grows only while most requests that found it full found no
// goroutine waiting for a CPU: when they did, the CPU bounds the requests,
// and another slot would tip it over.
func TestLimitHoldsWhileItsEdgeFindsTheCPUBusy(t *testing.T) {
	t.Parallel()
	l, clk, cfg := limiterSetup(t, func(c *framework.OverloadConfig) { c.InitialLimit, c.Queue = 10, 0 })
	var busy bool
	framework.SetCPUBusy(l, func() bool { return busy })
	edgeWindow := func() {
		t.Helper()
		permits := fill(t, l)
		if p, err := l.Acquire(context.Background(), framework.PriorityNormal); err == nil {
			permits = append(permits, p) // the spare slot
		} else if busy == false {
			t.Fatalf("the CPU free: %v, want the spare slot", err)
		}
		clk.Advance(10 * time.Millisecond)
		for _, p := range permits {
			p.Release()
		}
		p, err := l.Acquire(context.Background(), framework.PriorityNormal)
		if err != nil {
			t.Fatal(err)
		}
		clk.Advance(cfg.Window)
		p.Abandon() // closes the window
	}
	busy = true
	edgeWindow()
	if got := l.State().Limit; got != 10 {
		t.Fatalf("the limit's edge found the CPU busy: limit %d, want it held at 10", got)
	}
	busy = false
	edgeWindow()
	if got, want := l.State().Limit, int(10+math.Sqrt(10)); got != want {
		t.Fatalf("the limit's edge found the CPU free: limit %d, want %d (grown)", got, want)
	}
}

// A request in flight for longer than 20 × the baseline (at least 1 s)
// stops counting against the limit: requests hung on a dependency do not
// shed the routes that do not touch it. They still count against
// max_limit.
func TestStaleRequestsStopCounting(t *testing.T) {
	t.Parallel()
	l, clk, _ := limiterSetup(t, func(c *framework.OverloadConfig) { c.InitialLimit, c.MinLimit, c.MaxLimit, c.Queue = 1, 1, 2, 0 })
	hung, err := l.Acquire(context.Background(), framework.PriorityNormal)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Acquire(context.Background(), framework.PriorityNormal); shedReason(err) != framework.ShedQueueFull {
		t.Fatalf("at the limit: %v, want queue_full", err)
	}
	clk.Advance(time.Second + 10*time.Millisecond) // past 1 s, the floor: no baseline yet
	fresh, err := l.Acquire(context.Background(), framework.PriorityNormal)
	if err != nil {
		t.Fatalf("with the only slot held by a stale request: %v", err)
	}
	clk.Advance(2 * time.Second)
	if _, err := l.Acquire(context.Background(), framework.PriorityNormal); shedReason(err) != framework.ShedQueueFull {
		t.Fatalf("two stale requests at max_limit 2: %v, want queue_full", err)
	}
	hung.Release()
	fresh.Release()
	if s := l.State(); s.InFlight != 0 {
		t.Fatalf("in flight %d after both released", s.InFlight)
	}
	p, err := l.Acquire(context.Background(), framework.PriorityNormal)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Acquire(context.Background(), framework.PriorityNormal); shedReason(err) != framework.ShedQueueFull {
		t.Fatalf("the stale count went wrong: a second request was admitted at limit 1 (%v)", err)
	}
	p.Release()
}

// A request already queued gets a slot the stale rule frees at the moment
// the requests holding the slots turn stale: nobody releases it and no new
// request need arrive for the queue to notice.
func TestQueuedRequestsGetSlotsFreedByTheStaleRule(t *testing.T) {
	t.Parallel()
	l, clk, _ := limiterSetup(t, func(c *framework.OverloadConfig) {
		c.InitialLimit, c.QueueTimeout = 4, 10*time.Second
	})
	held := fill(t, l) // hung on a dependency, at the clock's start
	defer func() {
		for _, p := range held {
			p.Release()
		}
	}()
	clk.Advance(300 * time.Millisecond)
	waited := queued(l, context.Background(), framework.PriorityNormal, "", nil)
	clk.BlockUntil(1) // queued: its timers are made after it joins the queue

	// They turn stale 1 s (the floor: no baseline yet) after they started.
	clk.Advance(700*time.Millisecond - time.Nanosecond)
	if s := l.State(); s.Queued != 1 {
		t.Fatalf("before the held requests turned stale: %+v, want the request waiting", s)
	}
	clk.Advance(time.Nanosecond)
	select {
	case err := <-waited:
		if err != nil {
			t.Fatalf("the queued request: %v", err)
		}
	case <-time.After(10 * time.Second): // the real clock: a bound on a failure only
		t.Fatalf("still queued after the slots turned stale (state %+v)", l.State())
	}
}

// shedLines returns the "requests shed" lines of logs.
func shedLines(logs *jfasttest.Logs) []string {
	var out []string
	for _, line := range strings.Split(logs.String(), "\n") {
		if strings.Contains(line, `msg="requests shed"`) {
			out = append(out, line)
		}
	}
	return out
}

// Shed requests are logged at INFO in aggregate, at most once a second (the
// first at once), not each with an access log line.
func TestShedRequestsAreLoggedOnceASecond(t *testing.T) {
	t.Parallel()
	clk := resilience.NewTestClock(time.Unix(1_700_000_000, 0))
	var logs jfasttest.Logs
	app := fullApp(t, &logs, clk, 0)
	shed := func(n int) {
		for range n {
			w := httptest.NewRecorder()
			app.Router().ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/hello", nil))
			if w.Code != http.StatusServiceUnavailable {
				t.Fatalf("status %d, want 503", w.Code)
			}
		}
	}
	lines := func() []string { return shedLines(&logs) }
	shed(5)
	if got := lines(); len(got) != 1 || !strings.Contains(got[0], "count=1 ") {
		t.Fatalf("after 5 shed within a second: %q, want one line with count=1", got)
	}
	clk.Advance(time.Second)
	shed(1)
	if got := lines(); len(got) != 2 || !strings.Contains(got[1], "count=5 ") {
		t.Fatalf("a second later: %q, want a second line with count=5 (4 held back and this one)", got)
	}
	if strings.Contains(logs.String(), "path=/hello status=503") {
		t.Fatalf("an access log line for a shed request:\n%s", logs.String())
	}
}

// The requests shed after a line are counted by the first request the
// front door sees a second or more later, a health probe that is never
// shed included, not only by the next one shed, which may come hours later.
func TestShedRequestsHeldBackAreLoggedByTheNextRequest(t *testing.T) {
	t.Parallel()
	clk := resilience.NewTestClock(time.Unix(1_700_000_000, 0))
	var logs jfasttest.Logs
	app := fullApp(t, &logs, clk, 0)
	serve := func(path string) int {
		w := httptest.NewRecorder()
		app.Router().ServeHTTP(w, httptest.NewRequest(http.MethodGet, path, nil))
		return w.Code
	}
	lines := func() []string { return shedLines(&logs) }
	for range 4 {
		if code := serve("/hello"); code != http.StatusServiceUnavailable {
			t.Fatalf("status %d, want 503", code)
		}
	}
	if code := serve("/live"); code != http.StatusOK || len(lines()) != 1 {
		t.Fatalf("/live within the second: %d, lines %q; want 200 and the first line alone", code, lines())
	}
	clk.Advance(time.Second - time.Nanosecond)
	serve("/live")
	if got := lines(); len(got) != 1 {
		t.Fatalf("a probe before the second is up: %q, want the first line alone", got)
	}
	clk.Advance(time.Nanosecond)
	serve("/live")
	if got := lines(); len(got) != 2 || !strings.Contains(got[1], "count=3 reason=queue_full limit=1 status=503") {
		t.Fatalf("a probe a second after the first line: %q, want a second line counting the 3 held back", got)
	}
	serve("/live")
	clk.Advance(time.Second)
	serve("/live")
	if got := lines(); len(got) != 2 {
		t.Fatalf("with nothing held back: %q, want no other line", got)
	}
}

// A request whose client left while it waited in the queue is one the front
// door gave up on, as it gives up on one whose wait ran out: shed, in the
// "requests shed" line with its reason and status (499: nobody is there to
// read a 503), with no access log line of its own.
func TestQueuedRequestWhoseClientLeftIsLoggedAsShed(t *testing.T) {
	t.Parallel()
	clk := resilience.NewTestClock(time.Unix(1_700_000_000, 0))
	var logs jfasttest.Logs
	app := fullApp(t, &logs, clk, 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	timers := clk.Waiters()
	answered := make(chan *httptest.ResponseRecorder, 1)
	go func() {
		w := httptest.NewRecorder()
		app.Router().ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/hello", nil).WithContext(ctx))
		answered <- w
	}()
	clk.BlockUntil(timers + 1) // queued: its timers are made after it joins the queue
	cancel()
	if w := <-answered; w.Code != framework.StatusClientClosedRequest {
		t.Fatalf("status %d, want %d", w.Code, framework.StatusClientClosedRequest)
	}
	if got := app.Overload().State().Shed[framework.ShedClientGone]["normal"]; got != 1 {
		t.Fatalf("shed as client_gone: %d, want 1", got)
	}
	out := logs.String()
	if !strings.Contains(out, `msg="requests shed"`) || !strings.Contains(out, "count=1 reason=client_gone limit=1 status=499") {
		t.Fatalf("want a \"requests shed\" line with count=1, reason=client_gone and status=499:\n%s", out)
	}
	if strings.Contains(out, "path=/hello") {
		t.Fatalf("an access log line for a request shed from the queue:\n%s", out)
	}
}
