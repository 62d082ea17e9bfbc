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
	"github.com/jfastframework/jfast/framework/resilience"
	"github.com/jfastframework/jfast/jfasttest"
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
	attempts []uint64        // the gate's attempts each slow request made
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
// A request is told apart by what it did, not by how long it took (a loaded
// machine stretches both kinds): the breaker answered it when the gate made
// no attempt for it; otherwise it is slow, and its attempts are kept. Once
// the breaker answered, every later request must be answered the same way.
func sequential(t *testing.T, target pausable, o setupOpts, warm, n int, idle bool) (*bundle, pauseResult) {
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
		took, made := b.timedRequest(t, i)
		if made == 0 {
			r.answered = append(r.answered, took)
			break
		}
		r.slow, r.attempts = append(r.slow, took), append(r.attempts, made)
		if i > 20 {
			t.Fatalf("the breaker never answered: %v", r.slow)
		}
	}
	for i := range n {
		took, made := b.timedRequest(t, i)
		if made != 0 {
			t.Fatalf("request %d after the breaker answered made %d attempts on the paused server; want none", i, made)
		}
		r.answered = append(r.answered, took)
	}
	return b, r
}

// timedRequest sends GET /one against a paused server, wants its 503, and
// returns how long it took and how many attempts the gate made for it.
func (b *bundle) timedRequest(t *testing.T, i int) (time.Duration, uint64) {
	t.Helper()
	took, made, _ := b.timedResponse(t, i)
	return took, made
}

// timedResponse is timedRequest with the response.
func (b *bundle) timedResponse(t *testing.T, i int) (time.Duration, uint64, jfasttest.Response) {
	t.Helper()
	before := b.db.gate.attempts.Load()
	var r jfasttest.Response
	took := timed(func() { r = b.svc.Get(t, "/one") })
	if r.Status != 503 {
		t.Fatalf("request %d against a paused server: %d", i, r.Status)
	}
	return took, b.db.gate.attempts.Load() - before, r
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
	b, r := sequential(t, target, setupOpts{toml: "ping_timeout = \"500ms\""}, 4, 20, true)
	t.Log(r)
	if len(r.slow) != 1 || r.attempts[0] != 2 {
		t.Fatalf("%d slow requests (attempts %v); want 1 of 2 attempts (a ping that hangs, then the probe that replaces it)", len(r.slow), r.attempts)
	}
	// The two attempts are bounded by ping_timeout and replaceBound: 1.5 ×
	// ping_timeout on an unloaded machine (logged; real timers fire late
	// on a loaded one). What is asserted is that neither waited for
	// connect_timeout (the default, 10 s), which bounds the replacement's
	// connect when nothing else does.
	t.Logf("the slow request waited %s; its bounds on an unloaded machine: %s", r.slow[0], pingTimeout+pingTimeout/2)
	if d := r.slow[0]; d >= defaultConfig().ConnectTimeout/2 {
		t.Fatalf("the request waited %s; want it bounded by ping_timeout and its replacement's bound, not by connect_timeout (%s)", d, defaultConfig().ConnectTimeout)
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
	b, r := sequential(t, target, setupOpts{realClock: true, app: requestTimeoutTOML, toml: "ping_timeout = \"500ms\""}, 4, 20, false)
	t.Log(r)
	if len(r.slow) != 1 || r.attempts[0] != 1 {
		t.Fatalf("%d slow requests (attempts %v); want 1 of 1 attempt (a connection handed out unpinged, its statement met the paused server)", len(r.slow), r.attempts)
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
// without an attempt on the server. Requests keep arriving until afterOpen
// of them were sent with the breaker open: an event, not a guess at when
// the watchdog's real timers fire on a loaded machine.
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
		open        bool // the breaker was open when the request was sent
	}
	const every, afterOpen = pingTimeout * 15 / 100, 20
	var results []*result
	var attemptsAtOpen uint64
	paused := time.Now()
	var wg sync.WaitGroup
	tick := time.NewTicker(every)
	defer tick.Stop()
	for sentOpen := 0; sentOpen < afterOpen; <-tick.C {
		if time.Since(paused) > requestTimeout {
			t.Fatalf("the breaker did not open within request_timeout (%s) of the pause", requestTimeout)
		}
		r := &result{start: time.Since(paused), open: b.db.Breaker().State == resilience.StateOpen}
		if r.open {
			if sentOpen == 0 {
				attemptsAtOpen = b.db.gate.attempts.Load()
			}
			sentOpen++
		}
		results = append(results, r)
		wg.Go(func() { r.took = timed(func() { r.status = b.svc.Get(t, "/one").Status }) })
	}
	wg.Wait()
	var opened time.Duration
	var after []time.Duration
	for i, r := range results {
		if r.status != 503 {
			t.Fatalf("request %d: %d", i, r.status)
		}
		if r.took >= requestTimeout/2 {
			t.Fatalf("request %d (sent %s after the pause) waited %s; want it cut by the watchdog (%s unloaded), not by its request_timeout (%s)", i, r.start, r.took, cutBound(pingTimeout), requestTimeout)
		}
		if r.open {
			after = append(after, r.took)
			if opened == 0 {
				opened = r.start
			}
		}
	}
	slices.Sort(after)
	t.Logf("breaker open by %s after the pause (the watchdog's bound unloaded: %s); %d requests after it: %s", opened.Round(time.Millisecond), cutBound(pingTimeout), len(after), pauseResult{answered: after})
	if got := b.db.gate.attempts.Load(); got != attemptsAtOpen {
		t.Fatalf("%d attempts reached the paused server after the breaker opened; want none", got-attemptsAtOpen)
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
			b, r := sequential(t, targets[name](t), setupOpts{}, 10, 200, true)
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
			_, r := sequential(t, targets[name](t), setupOpts{}, 0, 50, false)
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
