package db

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jfastframework/jfast/drills"
)

// pausable is a PostgreSQL that a test may pause for real: a private
// cluster (SIGSTOP on the postmaster and every backend), or the machine's
// server behind a proxy that stops forwarding.
type pausable struct {
	url           string
	pause, resume func()
}

func privateCluster(t *testing.T) pausable {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := drills.StartPostgres(ctx)
	if err != nil {
		t.Fatalf("private PostgreSQL cluster: %v", err)
	}
	t.Cleanup(func() {
		if err := c.Stop(); err != nil {
			t.Error(err)
		}
	})
	pause := func() {
		if err := c.Pause(); err != nil {
			t.Errorf("pause the private cluster: %v", err)
		}
	}
	return pausable{url: c.URL("postgres"), pause: pause, resume: func() { _ = c.Resume() }}
}

func blackholeProxy(t *testing.T) pausable {
	t.Helper()
	p, err := drills.StartProxy("127.0.0.1:5432")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return pausable{url: urlVia(p.Addr()), pause: func() { _ = p.Hold() }, resume: func() { _ = p.Pass() }}
}

// pauseResult is what a paused server cost.
type pauseResult struct {
	slow     []time.Duration // requests that paid a deadline, in order
	answered []time.Duration // requests the open breaker answered
}

func (r pauseResult) String() string {
	s := slices.Clone(r.answered)
	slices.Sort(s)
	q := func(f float64) time.Duration {
		if len(s) == 0 {
			return 0
		}
		return s[int(f*float64(len(s)-1))]
	}
	rounded := make([]string, len(r.slow))
	for i, d := range r.slow {
		rounded[i] = d.Round(time.Millisecond).String()
	}
	return fmt.Sprintf("slow requests: %d %v; breaker-answered: %d, p50 %s, p99 %s, max %s",
		len(r.slow), rounded, len(s), q(0.5), q(0.99), q(1))
}

// sequential pauses the server under a warm pool and sends one request at
// a time until the breaker answers, then n more. With idle, the pool's
// connections have been idle past pingIdle when the server stops (a quiet
// service), so the first request pings one; without, they were used a moment
// before (a busy one), so the first request's statement meets the server.
func sequential(t *testing.T, target pausable, o setupOpts, warm, n int, fast time.Duration, idle bool) (*bundle, pauseResult) {
	t.Helper()
	o.url = target.url
	b := setup(t, o)
	t.Cleanup(target.resume) // before the App stops (cleanups run in reverse)
	if warm > 0 {
		b.warm(t, warm)
	}
	if idle {
		time.Sleep(pingIdle + 200*time.Millisecond) // pgxpool measures idle time on the real clock
	}
	target.pause()
	var r pauseResult
	for i := 0; ; i++ {
		var status int
		took := timed(func() { status = b.svc.Get(t, "/one").Status })
		if status != 503 {
			t.Fatalf("request %d against a paused server: %d", i, status)
		}
		if took < fast {
			r.answered = append(r.answered, took)
			break
		}
		r.slow = append(r.slow, took)
		if i > 20 {
			t.Fatalf("the breaker never answered: %v", r.slow)
		}
	}
	for range n {
		var status int
		took := timed(func() { status = b.svc.Get(t, "/one").Status })
		if status != 503 {
			t.Fatalf("breaker-answered request: %d", status)
		}
		r.answered = append(r.answered, took)
	}
	return b, r
}

// concurrent pauses the server under a warm pool and sends n requests at
// once.
func concurrent(t *testing.T, target pausable, toml string, warm, n int) []time.Duration {
	t.Helper()
	b := setup(t, setupOpts{url: target.url, toml: toml})
	t.Cleanup(target.resume)
	b.warm(t, warm)
	target.pause()
	out := make([]time.Duration, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[i] = timed(func() {
				if r := b.svc.Get(t, "/one"); r.Status != 503 {
					t.Errorf("request %d: %d", i, r.Status)
				}
			})
		}()
	}
	wg.Wait()
	slices.Sort(out)
	return out
}

// requestTimeout is the request_timeout of the tests on the real clock
// (the framework's default, set so): what would end a statement the
// watchdog did not cut.
const (
	requestTimeout     = 30 * time.Second
	requestTimeoutTOML = "request_timeout = \"30s\""
)

// cutBound is how long a statement that meets a hung server waits on an
// unloaded machine: the watchdog's look (watchSuspectTicks + 1 ticks of
// ping_timeout / watchTickDivisor), then its check (ping_timeout): 1.75 ×
// ping_timeout. The watchdog runs on real timers there, which a loaded
// machine fires late, so the tests log it and assert only that the
// watchdog, not the request's deadline, ended the wait.
func cutBound(pingTimeout time.Duration) time.Duration {
	return (watchSuspectTicks+1)*(pingTimeout/watchTickDivisor) + pingTimeout
}

// A real paused server (SIGSTOP on a private cluster) with an idle pool
// costs one request of at most 1.5 × ping_timeout: its ping hangs (the
// breaker goes half-open: nothing answered meanwhile), its replacement
// attempt is the probe and hangs too (open). Then the breaker answers at
// once; after the resume and the cool-down the same App and pool serve
// again.
func TestPausedServerCostsBoundedSlowRequests(t *testing.T) {
	t.Parallel()
	target := privateCluster(t)
	const pingTimeout = 500 * time.Millisecond
	b, r := sequential(t, target, setupOpts{toml: "ping_timeout = \"500ms\""}, 4, 20, pingTimeout/2, true)
	t.Log(r)
	if len(r.slow) != 1 {
		t.Fatalf("%d slow requests; want 1 (a ping that hangs, then the probe that replaces it)", len(r.slow))
	}
	if d := r.slow[0]; d > pingTimeout*3/2+300*time.Millisecond {
		t.Fatalf("the request waited %s; want at most 1.5 × ping_timeout plus slack", d)
	}
	// Every later request is answered without waiting on the server; the
	// bound is loose because the suite runs with -race on shared machines.
	answered := slices.Clone(r.answered)
	slices.Sort(answered)
	if med := answered[len(answered)/2]; med > 20*time.Millisecond {
		t.Fatalf("breaker-answered requests: median %s; want a few milliseconds at most", med)
	}
	target.resume()
	b.clock.Advance(15 * time.Second)
	if got := b.svc.Get(t, "/one"); got.Status != 200 {
		t.Fatalf("after the resume and the cool-down: %d %s", got.Status, got)
	}
}

// With connections used a moment before the pause (a busy service: no
// ping, they answered less than pingIdle ago), the first request's
// statement meets the paused server. The watchdog (on the real clock, as in
// production) finds it in use past ping_timeout / 2, its liveness check gets
// no answer within ping_timeout, and the statement ends with the breaker's
// 503: one request waits, about 1.75 × ping_timeout (cutBound), not its
// request_timeout (30 s); then the breaker answers.
func TestPausedServerRecentlyUsedConnections(t *testing.T) {
	t.Parallel()
	target := privateCluster(t)
	const pingTimeout = 500 * time.Millisecond
	b, r := sequential(t, target, setupOpts{realClock: true, app: requestTimeoutTOML, toml: "ping_timeout = \"500ms\""}, 4, 20, pingTimeout/2, false)
	t.Log(r)
	if len(r.slow) != 1 {
		t.Fatalf("%d slow requests; want 1 (the statement that met the paused server)", len(r.slow))
	}
	t.Logf("the first request waited %s; the watchdog's bound on an unloaded machine: %s", r.slow[0], cutBound(pingTimeout))
	if d := r.slow[0]; d >= requestTimeout/2 {
		t.Fatalf("the first request waited %s; want it cut by the watchdog, not by its request_timeout (%s)", d, requestTimeout)
	}
	if n := b.db.gate.watch.trips.Load(); n != 1 {
		t.Fatalf("%d watchdog trips; want 1", n)
	}
}

// Requests arriving every 0.15 × ping_timeout (0.3 s with the default 2 s)
// while a busy pool meets a paused server: none waits for its
// request_timeout (the watchdog cuts them, at about 1.75 × ping_timeout), and
// those that arrive after the watchdog opened the breaker are answered by it
// at once.
func TestPausedServerRequestsKeepArriving(t *testing.T) {
	t.Parallel()
	target := privateCluster(t)
	const pingTimeout = 500 * time.Millisecond
	b := setup(t, setupOpts{url: target.url, realClock: true, app: requestTimeoutTOML, toml: "ping_timeout = \"500ms\""})
	t.Cleanup(target.resume)
	b.warm(t, 4)
	target.pause()
	type result struct {
		start, took time.Duration
		status      int
	}
	const n, every = 40, pingTimeout * 15 / 100
	results := make([]result, n)
	paused := time.Now()
	var wg sync.WaitGroup
	tick := time.NewTicker(every)
	defer tick.Stop()
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			start := time.Since(paused)
			var status int
			took := timed(func() { status = b.svc.Get(t, "/one").Status })
			results[i] = result{start, took, status}
		}()
		<-tick.C
	}
	wg.Wait()
	var opened time.Duration // when the last request that waited ended
	for i, r := range results {
		if r.status != 503 {
			t.Fatalf("request %d: %d", i, r.status)
		}
		if r.took >= requestTimeout/2 {
			t.Fatalf("request %d (sent %s after the pause) waited %s; want it cut by the watchdog (%s unloaded), not by its request_timeout (%s)", i, r.start, r.took, cutBound(pingTimeout), requestTimeout)
		}
		if r.took >= pingTimeout/2 {
			opened = max(opened, r.start+r.took)
		}
	}
	var after []time.Duration
	for _, r := range results {
		if r.start > opened {
			after = append(after, r.took)
		}
	}
	slices.Sort(after)
	t.Logf("breaker open %s after the pause; %d requests after it: %s", opened.Round(time.Millisecond), len(after), pauseResult{answered: after})
	if len(after) < n/2 {
		t.Fatalf("only %d requests after the breaker opened", len(after))
	}
	// Loose: the suite runs with -race on a shared machine.
	if med := after[len(after)/2]; med > 20*time.Millisecond {
		t.Fatalf("requests after the breaker opened: median %s; want a few milliseconds", med)
	}
	if n := b.db.gate.watch.trips.Load(); n != 1 {
		t.Fatalf("%d watchdog trips; want 1", n)
	}
}

// TestMeasurePausedServer produces the numbers of docs/db.md's Measured
// section, with the default settings. It takes about a minute, so it runs
// only with JFAST_DB_MEASURE=1:
//
//	JFAST_DB_MEASURE=1 go test -run TestMeasurePausedServer -v ./plugins/db/
func TestMeasurePausedServer(t *testing.T) {
	if os.Getenv("JFAST_DB_MEASURE") != "1" {
		t.Skip("set JFAST_DB_MEASURE=1 to measure (about a minute)")
	}
	targets := map[string]func(*testing.T) pausable{"private cluster, SIGSTOP": privateCluster, "blackholing proxy": blackholeProxy}
	for _, name := range []string{"private cluster, SIGSTOP", "blackholing proxy"} {
		t.Run(name+"/sequential warm", func(t *testing.T) {
			b, r := sequential(t, targets[name](t), setupOpts{}, 10, 200, 50*time.Millisecond, true)
			t.Logf("defaults, 10 idle connections, one request at a time: %s", r)
			for _, d := range r.slow {
				if d > 3*time.Second+500*time.Millisecond {
					t.Errorf("a request waited %s; target 1.5 × ping_timeout = 3s", d)
				}
			}
			var over []int
			for i, d := range r.answered {
				if d > 5*time.Millisecond {
					over = append(over, i)
				}
			}
			t.Logf("breaker-answered requests over 5ms: %d of %d (at positions %v); load average %s", len(over), len(r.answered), over, loadAverage())
			// The same refusal without HTTP: the gate alone.
			var direct []time.Duration
			ctx := context.Background()
			for range 1000 {
				direct = append(direct, timed(func() {
					if _, err := b.db.Exec(ctx, "SELECT 1"); err == nil {
						t.Fatal("a query succeeded against a paused server")
					}
				}))
			}
			t.Logf("breaker-answered DB.Exec without HTTP: %s", pauseResult{answered: direct})
			if len(over) > len(r.answered)/20 {
				t.Errorf("more than 5%% of breaker-answered requests took over 5ms")
			}
		})
		t.Run(name+"/sequential cold", func(t *testing.T) {
			_, r := sequential(t, targets[name](t), setupOpts{}, 0, 50, 50*time.Millisecond, false)
			t.Logf("defaults, no pooled connection, one request at a time: %s", r)
		})
		t.Run(name+"/concurrent", func(t *testing.T) {
			d := concurrent(t, targets[name](t), "", 10, 100)
			slow := 0
			for _, x := range d {
				if x > 50*time.Millisecond {
					slow++
				}
			}
			t.Logf("defaults, 10 idle connections, 100 requests at once: %d waited > 50ms; p50 %s, max %s", slow, d[len(d)/2], d[len(d)-1])
		})
	}
}

func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	return strings.Join(strings.Fields(string(b))[:3], " ")
}
