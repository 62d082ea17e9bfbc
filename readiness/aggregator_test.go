package readiness_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jfastframework/jfast/readiness"
)

// slow returns a check body that answers pass after d, or fail when its
// context ends first.
func slow(d time.Duration) func(context.Context) readiness.Report {
	return func(ctx context.Context) readiness.Report {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
			return readiness.Passed("", nil)
		case <-ctx.Done():
			return readiness.Unreachable("ping: "+ctx.Err().Error(), nil)
		}
	}
}

func fixed(r readiness.Report) func(context.Context) readiness.Report {
	return func(context.Context) readiness.Report { return r }
}

// blocked returns a check body that ignores its context and answers only
// when release is closed, and a channel closed once it has returned.
func blocked(t *testing.T) (run func(context.Context) readiness.Report, release func()) {
	t.Helper()
	ch := make(chan struct{})
	var once sync.Once
	release = func() { once.Do(func() { close(ch) }) }
	t.Cleanup(release)
	return func(context.Context) readiness.Report {
		<-ch
		// Writes into its own report after Run has returned: with -race,
		// any sharing with Run's result would be reported.
		return readiness.Passed("late", map[string]any{"answered": true})
	}, release
}

func TestRunParallel(t *testing.T) {
	t.Parallel()
	a := readiness.NewAggregator(2*time.Second,
		readiness.Check{Name: "db", Critical: true, Run: slow(time.Second)},
		readiness.Check{Name: "cache", Run: slow(time.Second)},
	)
	start := time.Now()
	res := a.Run(context.Background())
	took := time.Since(start)
	if took >= 1500*time.Millisecond {
		t.Fatalf("two 1 s checks took %v; they did not run in parallel (want < 1.5 s)", took)
	}
	if took < time.Second {
		t.Fatalf("Run returned after %v, before the 1 s checks could answer", took)
	}
	if res.Status != readiness.OK || res.Checks["db"].Status != readiness.Pass || res.Checks["cache"].Status != readiness.Pass {
		t.Fatalf("Run = %+v, want ok with both passing", res)
	}
}

func TestRunNoChecks(t *testing.T) {
	t.Parallel()
	res := readiness.NewAggregator(time.Second).Run(context.Background())
	if res.Status != readiness.OK || res.Checks == nil || len(res.Checks) != 0 {
		t.Fatalf("Run with no checks = %+v, want ok with an empty, non-nil checks map", res)
	}
}

func TestTimeoutVersusFail(t *testing.T) {
	t.Parallel()
	const timeout = 300 * time.Millisecond
	run, release := blocked(t)
	a := readiness.NewAggregator(timeout,
		readiness.Check{Name: "hangs", Run: run},
		readiness.Check{Name: "refused", Run: fixed(readiness.Impaired("db unreachable: connection refused", nil))},
		readiness.Check{Name: "honours-ctx", Run: slow(time.Hour)},
		readiness.Check{Name: "ok", Run: fixed(readiness.Passed("", nil))},
	)
	start := time.Now()
	res := a.Run(context.Background())
	took := time.Since(start)
	release()

	if took < timeout || took > timeout+100*time.Millisecond {
		t.Fatalf("Run took %v, want between %v and %v", took, timeout, timeout+100*time.Millisecond)
	}
	want := map[string]readiness.Report{
		"hangs":       {Healthy: false, Status: readiness.Timeout, Detail: "no answer within 300ms"},
		"refused":     {Healthy: false, Status: readiness.Fail, Detail: "db unreachable: connection refused"},
		"honours-ctx": {Healthy: false, Status: readiness.Timeout, Detail: "no answer within 300ms"},
		"ok":          {Healthy: true, Status: readiness.Pass},
	}
	for name, w := range want {
		if got := res.Checks[name]; got.Healthy != w.Healthy || got.Status != w.Status || got.Detail != w.Detail || got.Critical || got.Meta != nil {
			t.Errorf("%s = %+v, want %+v", name, got, w)
		}
	}
	if res.Status != readiness.Degraded {
		t.Errorf("overall = %s, want degraded (nothing declared critical)", res.Status)
	}
}

// A check that honours its context and returns a failure the instant its
// deadline passes is a timeout, every time: not "fail" on the runs where its
// answer reaches Run just before Run notices the deadline. Without the rule
// that decides this in the check's goroutine, about 1 run in 100 here
// reported "fail".
func TestTimeoutIsDeterministic(t *testing.T) {
	t.Parallel()
	var checks []readiness.Check
	for _, name := range []string{"a", "b", "c", "d"} {
		checks = append(checks, readiness.Check{Name: name, Run: slow(time.Hour)})
	}
	a := readiness.NewAggregator(time.Millisecond, checks...)
	for i := range 1000 {
		for name, got := range a.Run(context.Background()).Checks {
			if got.Status != readiness.Timeout {
				t.Fatalf("run %d: %s status %s (%q), want timeout", i, name, got.Status, got.Detail)
			}
		}
	}
}

// pastDeadline is a context whose deadline has passed but which nothing has
// marked done yet: the instant after a socket deadline armed at the
// context's deadline fired and before the context's own timer did.
type pastDeadline struct{ context.Context }

func (pastDeadline) Deadline() (time.Time, bool) { return time.Now().Add(-time.Millisecond), true }

// A check whose client gives up at the context's deadline on its own (go-redis
// arms the socket deadline from ctx.Deadline) can return before ctx.Err is
// set. It returned at its deadline, so it is a timeout, not a failure of the
// dependency: the two timers firing in either order must not change the
// verdict.
func TestCheckReturningAtItsDeadlineIsATimeout(t *testing.T) {
	t.Parallel()
	a := readiness.NewAggregator(readiness.DefaultTimeout, readiness.Check{
		Name:     "cache",
		Critical: true,
		Run: func(ctx context.Context) readiness.Report {
			if ctx.Err() != nil {
				t.Error("the context is already done: the case under test is the instant before")
			}
			if d, ok := ctx.Deadline(); ok && !time.Now().Before(d) {
				return readiness.Unreachable("redis unreachable: i/o timeout", nil)
			}
			return readiness.Passed("", nil)
		},
	})
	res := a.Run(pastDeadline{context.Background()})
	got := res.Checks["cache"]
	if got.Status != readiness.Timeout || got.Detail != "no answer within 800ms" || !got.Critical {
		t.Fatalf("cache = %+v, want a critical timeout with the detail %q", got, "no answer within 800ms")
	}
	if res.Status != readiness.Unavailable {
		t.Fatalf("overall = %s, want unavailable", res.Status)
	}
}

// The default timeout is 800 ms and a check that ignores its context cannot
// hold Run past it.
func TestCheckIgnoringContext(t *testing.T) {
	t.Parallel()
	run, release := blocked(t)
	a := readiness.NewAggregator(0, readiness.Check{Name: "stuck", Critical: true, Run: run})
	if a.Timeout() != readiness.DefaultTimeout || readiness.DefaultTimeout != 800*time.Millisecond {
		t.Fatalf("Timeout() = %v, want the 800 ms default", a.Timeout())
	}
	start := time.Now()
	res := a.Run(context.Background())
	took := time.Since(start)
	if took < 800*time.Millisecond || took > 900*time.Millisecond {
		t.Fatalf("Run took %v, want within [800ms, 900ms]: under a 1 s probe timeout", took)
	}
	got := res.Checks["stuck"]
	if got.Status != readiness.Timeout || got.Healthy || got.Detail != "no answer within 800ms" || !got.Critical {
		t.Fatalf("stuck = %+v, want a critical timeout \"no answer within 800ms\"", got)
	}
	if res.Status != readiness.Unavailable {
		t.Fatalf("overall = %s, want unavailable (declared critical and timed out)", res.Status)
	}
	// Let the check answer now, after Run returned; it must change nothing.
	release()
	time.Sleep(10 * time.Millisecond) // give the late answer a chance to (wrongly) land
	if again := res.Checks["stuck"]; again.Status != readiness.Timeout || again.Detail != got.Detail || again.Meta != nil {
		t.Fatalf("a late answer changed the result: %+v", again)
	}
}

func TestCallerCancels(t *testing.T) {
	t.Parallel()
	run, release := blocked(t)
	defer release()
	a := readiness.NewAggregator(time.Minute, readiness.Check{Name: "stuck", Run: run})
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel)
	start := time.Now()
	res := a.Run(ctx)
	if took := time.Since(start); took > time.Second {
		t.Fatalf("Run took %v after the caller cancelled at 50ms", took)
	}
	if got := res.Checks["stuck"]; got.Status != readiness.Timeout || got.Detail != "no answer before the caller gave up" {
		t.Fatalf("stuck = %+v", got)
	}
}

func TestPanickingCheck(t *testing.T) {
	t.Parallel()
	var logs bytes.Buffer
	var mu sync.Mutex
	a := readiness.NewAggregator(time.Second,
		readiness.Check{Name: "broken", Run: func(context.Context) readiness.Report {
			var m map[string]int
			//lint:ignore SA5000 the test needs a real runtime panic
			m["boom"] = 1 // nil map write: a real runtime panic
			return readiness.Passed("", nil)
		}},
		readiness.Check{Name: "broken-critical", Critical: true, Run: func(context.Context) readiness.Report {
			panic(errors.New("secret-dsn postgres://u:p@h/db"))
		}},
	)
	a.SetLogger(slog.New(slog.NewJSONHandler(&lockedWriter{w: &logs, mu: &mu}, nil)))
	res := a.Run(context.Background())

	for name, critical := range map[string]bool{"broken": false, "broken-critical": true} {
		got := res.Checks[name]
		if got.Status != readiness.Fail || got.Healthy || got.Detail != "check panicked" || got.Critical != critical || got.Meta != nil {
			t.Errorf("%s = %+v, want fail \"check panicked\" critical=%v", name, got, critical)
		}
	}
	if res.Status != readiness.Unavailable {
		t.Errorf("overall = %s, want unavailable", res.Status)
	}

	mu.Lock()
	out := logs.String()
	mu.Unlock()
	for _, want := range []string{`"msg":"readiness check panicked"`, `"check":"broken"`, "assignment to entry in nil map", `"stack":"goroutine`} {
		if !strings.Contains(out, want) {
			t.Errorf("log misses %q:\n%s", want, out)
		}
	}

	// Without the critical one, a panic only degrades.
	a = readiness.NewAggregator(time.Second, readiness.Check{Name: "broken", Run: func(context.Context) readiness.Report { panic("x") }})
	a.SetLogger(slog.New(slog.DiscardHandler))
	if res := a.Run(context.Background()); res.Status != readiness.Degraded {
		t.Errorf("a non-critical panicking check gave %s, want degraded", res.Status)
	}
}

type lockedWriter struct {
	w  *bytes.Buffer
	mu *sync.Mutex
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// The critical rule: an entry is critical only when the check is declared
// critical and its failure is critical (a timeout or a panic always is).
// Only a critical, unhealthy entry makes the result unavailable.
func TestCriticalRule(t *testing.T) {
	t.Parallel()
	const timeout = 50 * time.Millisecond
	type outcome int
	const (
		pass outcome = iota
		fail
		timeOut
		panics
	)
	tests := []struct {
		name              string
		declared          bool
		reportUnreachable bool
		outcome           outcome
		wantCritical      bool
		wantOverall       readiness.Overall
		wantHTTP          int
	}{
		{"pass, not declared", false, false, pass, false, readiness.OK, 200},
		{"pass, declared", true, false, pass, false, readiness.OK, 200},
		{"pass, declared, report says unreachable", true, true, pass, false, readiness.OK, 200},
		{"fail, not declared, not critical", false, false, fail, false, readiness.Degraded, 200},
		{"fail, not declared, report unreachable", false, true, fail, false, readiness.Degraded, 200},
		{"fail, declared, impaired", true, false, fail, false, readiness.Degraded, 200},
		{"fail, declared, report unreachable", true, true, fail, true, readiness.Unavailable, 503},
		{"timeout, not declared", false, false, timeOut, false, readiness.Degraded, 200},
		{"timeout, declared", true, false, timeOut, true, readiness.Unavailable, 503},
		{"panic, not declared", false, false, panics, false, readiness.Degraded, 200},
		{"panic, declared", true, false, panics, true, readiness.Unavailable, 503},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var run func(context.Context) readiness.Report
			switch tt.outcome {
			case pass:
				run = fixed(readiness.Report{Healthy: true, Status: readiness.Pass, Unreachable: tt.reportUnreachable, Critical: true})
			case fail:
				if tt.reportUnreachable {
					run = fixed(readiness.Unreachable("redis unreachable", nil))
				} else {
					run = fixed(readiness.Impaired("redis impaired", nil))
				}
			case timeOut:
				r, release := blocked(t)
				defer release()
				run = r
			case panics:
				run = func(context.Context) readiness.Report { panic("boom") }
			}
			a := readiness.NewAggregator(timeout,
				readiness.Check{Name: "x", Critical: tt.declared, Run: run},
				readiness.Check{Name: "healthy", Critical: true, Run: fixed(readiness.Passed("", nil))},
			)
			a.SetLogger(slog.New(slog.DiscardHandler))
			res := a.Run(context.Background())
			if got := res.Checks["x"].Critical; got != tt.wantCritical {
				t.Errorf("entry critical = %v, want %v", got, tt.wantCritical)
			}
			if res.Status != tt.wantOverall || res.HTTPStatus() != tt.wantHTTP {
				t.Errorf("overall = %s (%d), want %s (%d)", res.Status, res.HTTPStatus(), tt.wantOverall, tt.wantHTTP)
			}
		})
	}
}

// A report with missing or contradictory fields is normalised; forgetting a
// field never makes a non-critical check take readiness down.
func TestNormalisation(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		declared    bool
		in          readiness.Report
		wantStatus  readiness.Status
		wantHealthy bool
		wantCrit    bool
	}{
		{"empty status, healthy", false, readiness.Report{Healthy: true}, readiness.Pass, true, false},
		{"empty status, unhealthy", false, readiness.Report{Detail: "down"}, readiness.Fail, false, false},
		{"zero report", false, readiness.Report{}, readiness.Fail, false, false},
		{"zero report, declared critical", true, readiness.Report{}, readiness.Fail, false, false},
		{"empty status, unhealthy, unreachable, declared", true, readiness.Report{Unreachable: true}, readiness.Fail, false, true},
		{"a check's own critical is not the verdict", true, readiness.Report{Critical: true}, readiness.Fail, false, false},
		{"pass without healthy", false, readiness.Report{Status: readiness.Pass}, readiness.Pass, true, false},
		{"fail with healthy", false, readiness.Report{Status: readiness.Fail, Healthy: true}, readiness.Fail, false, false},
		{"unknown status, healthy", false, readiness.Report{Status: "warn", Healthy: true}, readiness.Pass, true, false},
		{"unknown status, unhealthy", false, readiness.Report{Status: "down"}, readiness.Fail, false, false},
		{"check reports its own timeout, declared", true, readiness.Report{Status: readiness.Timeout}, readiness.Timeout, false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			a := readiness.NewAggregator(time.Second, readiness.Check{Name: "x", Critical: tt.declared, Run: fixed(tt.in)})
			got := a.Run(context.Background()).Checks["x"]
			if got.Status != tt.wantStatus || got.Healthy != tt.wantHealthy || got.Critical != tt.wantCrit || got.Detail != tt.in.Detail {
				t.Errorf("got %+v, want status %s healthy %v critical %v", got, tt.wantStatus, tt.wantHealthy, tt.wantCrit)
			}
		})
	}
}

func TestAddPanicsOnWiringMistakes(t *testing.T) {
	t.Parallel()
	ok := fixed(readiness.Passed("", nil))
	tests := []struct {
		name  string
		check readiness.Check
		want  string
	}{
		{"no name", readiness.Check{Run: ok}, "readiness: check with an empty name"},
		{"no run", readiness.Check{Name: "db"}, "readiness: check db has no Run function"},
		{"duplicate", readiness.Check{Name: "cache", Run: ok}, "readiness: duplicate check cache"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			a := readiness.NewAggregator(time.Second, readiness.Check{Name: "cache", Run: ok})
			defer func() {
				if got := recover(); got != tt.want {
					t.Fatalf("panic = %v, want %q", got, tt.want)
				}
			}()
			a.Add(tt.check)
		})
	}
}

// Checks can be added while /ready is being served.
func TestAddConcurrentWithRun(t *testing.T) {
	t.Parallel()
	a := readiness.NewAggregator(time.Second)
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := range 50 {
			a.Add(readiness.Check{Name: "c" + string(rune('A'+i)), Run: fixed(readiness.Passed("", nil))})
		}
	})
	for range 50 {
		if res := a.Run(context.Background()); res.Status != readiness.OK {
			t.Fatalf("Run = %s", res.Status)
		}
	}
	wg.Wait()
	if n := len(a.Run(context.Background()).Checks); n != 50 {
		t.Fatalf("%d checks after 50 Adds", n)
	}
}
