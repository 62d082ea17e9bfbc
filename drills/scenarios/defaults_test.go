package scenarios_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/jfastframework/jfast/drills"
	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/jfasttest"
	"github.com/jfastframework/jfast/plugins/cache"
	"github.com/jfastframework/jfast/plugins/db"
	jhttp "github.com/jfastframework/jfast/plugins/http"
	"github.com/jfastframework/jfast/plugins/idempotency"
	"github.com/jfastframework/jfast/plugins/mail"
	"github.com/jfastframework/jfast/plugins/queue"
	"github.com/jfastframework/jfast/readiness"
)

// The drills below run with the shipped defaults: no deadline, retry or
// breaker key is set, only the addresses. They check the outage costs
// docs/resilience.md promises for a dependency that hangs:
//
//   - at most 2 sequential requests per process pay a deadline before the
//     breaker answers (MaxPaid), each within that dependency's documented
//     deadline (Deadline, plus the margin of a loaded machine running -race);
//   - every /ready meanwhile answers in under 1 s (ReadyBound): the
//     default readiness_timeout is 800 ms, and an open breaker answers
//     without I/O;
//   - the same App recovers after the default 15 s cool-down.
//
// PostgreSQL with busy connections and Redis's two-command request hold a
// stricter count: one request pays (the db watchdog's trip; a Redis hang
// opens its breaker at once).
//
// Together they take about two minutes, most of it the cool-downs and the
// upstream's 10 s timeout.

// defaultsMaxPaid is the promise: at most two requests pay a deadline.
const defaultsMaxPaid = 2

// readyBound is the promise for /ready during any outage: an answer within a
// Kubernetes probe's default timeout (timeoutSeconds: 1), which the shipped
// readiness_timeout (800 ms) leaves 200 ms of to reach the prober. The bound
// is the promise itself, not the timeout plus a guess at the machine's speed.
const readyBound = time.Second

// pingTimeout is the db plugin's shipped ping_timeout.
const pingTimeout = 2 * time.Second

// TestDrillDefaultsPostgresPaused: a private cluster paused for real: while
// the pool's connections are idle (a quiet service), right after one was
// used, and while requests keep arriving every 0.3 s (a busy one).
//
//   - idle: the first request's ping hangs (ping_timeout 2 s, half-open), its
//     replacement is the probe (1 s, open): one request of at most 3 s.
//   - just used: the connection is not pinged (it answered less than a second
//     ago), so the first request's statement meets the paused server; the
//     watchdog finds it in use past ping_timeout / 2, its liveness check gets
//     no answer within ping_timeout, and the breaker opens: one request of
//     at most 2 × ping_timeout (4 s).
//   - busy: the same, with a request sent every 0.3 s without waiting for the
//     previous one: none waits more than 2 × ping_timeout, and those sent
//     after the breaker opened are answered by it at once.
func TestDrillDefaultsPostgresPaused(t *testing.T) {
	for _, tc := range []struct {
		name, fault string
		idle, busy  bool
		deadline    time.Duration
	}{
		{"idle", "pause (SIGSTOP), idle pool, shipped defaults", true, false, 3 * time.Second},
		{"just-used", "pause (SIGSTOP), just-used pool, shipped defaults", false, false, 2 * pingTimeout},
		{"busy", "pause (SIGSTOP), requests every 0.3 s, shipped defaults", false, true, 2 * pingTimeout},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			srv, err := drills.StartPostgres(ctx)
			if err != nil {
				t.Fatalf("private PostgreSQL: %v", err)
			}
			t.Cleanup(func() { srv.Stop() })
			svc := defaultsDBService(t, srv.URL("postgres"))
			t.Cleanup(func() { srv.Resume() }) // before the App stops
			warm(t, svc, "/db", 4)
			take, give := srv.Pause, srv.Resume
			if tc.idle {
				take = func() error {
					// Idle past a second, after the drill's healthy request:
					// pooled connections are pinged (pgxpool's real clock).
					time.Sleep(1200 * time.Millisecond)
					return srv.Pause()
				}
			}
			var l *load
			if tc.busy {
				take = func() error {
					// The load starts once the server is paused: pausing
					// the postmaster and its backends can take longer than
					// the load's first 0.3 s on a loaded machine, and a
					// request answered before the pause is no part of it.
					err := srv.Pause()
					l = startLoad(svc.URL+"/db", 300*time.Millisecond)
					return err
				}
				give = func() error {
					// The drill gives the server back once the breaker
					// answered it: let 10 more of the load's requests
					// meet the open breaker first.
					l.waitAnswered(10)
					l.stop()
					return srv.Resume()
				}
			}
			r := run(t, &drills.Drill{
				Dependency: "db", Fault: tc.fault, BaseURL: svc.URL,
				Route: "/db", Other: "/plain", Want: http.StatusServiceUnavailable, NameValue: "db",
				Deadline: tc.deadline + margin,
				MaxPaid:  defaultsMaxPaid, ReadyBound: readyBound,
				Take: take, Give: give,
			})
			if !tc.idle && r.Paid > 1 {
				t.Errorf("%d requests paid a deadline; the watchdog's trip should leave one", r.Paid)
			}
			if l != nil {
				l.check(t, tc.deadline+margin)
			}
		})
	}
}

// load sends GET url every interval, each without waiting for the others,
// until stopped, and records when each was sent and how long it took.
type load struct {
	stopped chan struct{}
	answer  chan struct{} // signalled after each request
	wg      sync.WaitGroup
	mu      sync.Mutex
	began   time.Time
	sent    []loadResult
}

type loadResult struct {
	at, took time.Duration
	status   int
	err      error
}

func startLoad(url string, every time.Duration) *load {
	l := &load{stopped: make(chan struct{}), answer: make(chan struct{}, 1), began: time.Now()}
	client := &http.Client{Timeout: time.Minute}
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			select {
			case <-l.stopped:
				return
			case <-tick.C:
			}
			l.wg.Add(1)
			go func() {
				defer l.wg.Done()
				at := time.Since(l.began)
				r := loadResult{at: at}
				resp, err := client.Get(url)
				if err == nil {
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					r.status = resp.StatusCode
				}
				r.took, r.err = time.Since(l.began)-at, err
				l.mu.Lock()
				l.sent = append(l.sent, r)
				l.mu.Unlock()
				select {
				case l.answer <- struct{}{}:
				default:
				}
			}()
		}
	}()
	return l
}

// waitAnswered waits until n requests sent from now on have been answered.
func (l *load) waitAnswered(n int) {
	from := time.Since(l.began)
	for {
		l.mu.Lock()
		got := 0
		for _, r := range l.sent {
			if r.at >= from {
				got++
			}
		}
		l.mu.Unlock()
		if got >= n {
			return
		}
		<-l.answer
	}
}

// stop ends the load and waits for the requests in flight. Safe to call
// more than once.
func (l *load) stop() {
	select {
	case <-l.stopped:
	default:
		close(l.stopped)
	}
	l.wg.Wait()
}

// check asserts the load's promise: every request answered 503 within
// deadline, and those sent after the breaker opened (after the last one
// that waited ended) answered without waiting on the server.
func (l *load) check(t *testing.T, deadline time.Duration) {
	t.Helper()
	l.stop()
	var opened time.Duration
	for i, r := range l.sent {
		if r.err != nil || r.status != http.StatusServiceUnavailable {
			t.Errorf("request %d of the load (sent %s after it began): %d %v; want 503", i, r.at, r.status, r.err)
		}
		if r.took > deadline {
			t.Errorf("request %d of the load (sent %s after it began) took %s, more than %s", i, r.at, r.took, deadline)
		}
		if r.took >= pingTimeout/2 {
			opened = max(opened, r.at+r.took)
		}
	}
	var after []time.Duration
	waited := 0
	for _, r := range l.sent {
		if r.at > opened {
			after = append(after, r.took)
		} else {
			waited++
		}
	}
	if len(after) == 0 {
		t.Fatalf("no request of the load was sent after the breaker opened (%d sent)", len(l.sent))
	}
	slices.Sort(after)
	p50, slowest := after[len(after)/2], after[len(after)-1]
	t.Logf("load every 0.3 s: %d sent; %d before the breaker opened (%s after the pause) waited; %d after it: p50 %s, max %s",
		len(l.sent), waited, opened.Round(time.Millisecond), len(after), p50, slowest)
	// 20 ms: the 5 ms the breaker answers in on a quiet machine, with the
	// slack of -race on a loaded one.
	if p50 > 20*time.Millisecond {
		t.Errorf("requests after the breaker opened: p50 %s; want a few milliseconds", p50)
	}
}

func defaultsDBService(t *testing.T, url string) *jfasttest.Service {
	t.Helper()
	return jfasttest.Start(t, jfasttest.Options{
		TOML:    "[app]\nname = \"drill\"\n[plugins]\nenabled = [\"db\"]\n",
		Plugins: []framework.Plugin{db.New()},
		Env:     map[string]string{"JFAST_DB_URL": url},
		Routes: func(app *framework.App, r chi.Router) error {
			d, err := db.Get(app)
			if err != nil {
				return err
			}
			r.Method(http.MethodGet, "/db", framework.Handler(func(w http.ResponseWriter, r *http.Request) error {
				var n int
				if err := d.QueryRow(r.Context(), "SELECT 1").Scan(&n); err != nil {
					return err
				}
				return framework.JSON(w, http.StatusOK, n)
			}))
			r.Method(http.MethodGet, "/plain", framework.Handler(okRoute))
			return nil
		},
	})
}

// TestDrillDefaultsRedisPaused: a private redis-server paused. The route
// sends SET then GET: the SET hangs (command_timeout 1 s) and, nothing
// having answered since it was sent, opens the breaker; the GET is refused
// at once: one request of at most one command_timeout, not two.
func TestDrillDefaultsRedisPaused(t *testing.T) {
	srv, err := drills.StartRedis(context.Background())
	if err != nil {
		t.Fatalf("private redis-server: %v", err)
	}
	t.Cleanup(func() { srv.Stop() })
	svc := jfasttest.Start(t, jfasttest.Options{
		TOML:    "[app]\nname = \"drill\"\n[plugins]\nenabled = [\"cache\"]\n",
		Plugins: []framework.Plugin{cache.New()},
		Env:     map[string]string{"JFAST_CACHE_URL": srv.URL()},
		Routes: func(app *framework.App, r chi.Router) error {
			c, err := cache.From(app)
			if err != nil {
				return err
			}
			r.Method(http.MethodGet, "/cache", framework.Handler(func(w http.ResponseWriter, r *http.Request) error {
				if err := c.Set(r.Context(), "k", []byte("v"), time.Minute); err != nil {
					return err
				}
				v, _, err := c.Get(r.Context(), "k")
				if err != nil {
					return err
				}
				return framework.JSON(w, http.StatusOK, string(v))
			}))
			r.Method(http.MethodGet, "/plain", framework.Handler(okRoute))
			return nil
		},
	})
	t.Cleanup(func() { srv.Resume() })
	run(t, &drills.Drill{
		Dependency: "cache", Fault: "pause (SIGSTOP), shipped defaults", BaseURL: svc.URL,
		Route: "/cache", Other: "/plain", Want: http.StatusServiceUnavailable, NameValue: "cache",
		Deadline: time.Second + margin, // one command_timeout for the request's two commands
		MaxPaid:  1, ReadyBound: readyBound,
		Take: srv.Pause, Give: srv.Resume,
	})
}

// TestDrillDefaultsUpstreamBlackhole: an upstream behind a proxy that
// accepts and never answers. The first request's GET waits read_timeout
// (5 s) within timeout (10 s); its hang, with nothing answered meanwhile,
// opens the breaker at once (the policy loop's silence rule), so no retry
// follows and the next requests are refused: one request pays, within the
// promise of at most two.
func TestDrillDefaultsUpstreamBlackhole(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"paid":true}`)
	}))
	t.Cleanup(up.Close)
	p, err := drills.StartProxy(strings.TrimPrefix(up.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	svc := jfasttest.Start(t, jfasttest.Options{
		TOML: "[app]\nname = \"drill\"\n[plugins]\nenabled = [\"http\"]\n" +
			"[plugin.http.upstreams.billing]\nbase_url = \"http://" + p.Addr() + "\"\n",
		Plugins: []framework.Plugin{jhttp.New()},
		Routes: func(app *framework.App, r chi.Router) error {
			if err := upstreamRoute(app, r); err != nil {
				return err
			}
			r.Method(http.MethodGet, "/plain", framework.Handler(okRoute))
			return nil
		},
	})
	t.Cleanup(func() { p.Pass() })
	run(t, &drills.Drill{
		Dependency: "http", Fault: "blackhole (proxy), shipped defaults", BaseURL: svc.URL,
		Route: "/upstream", Other: "/plain", Want: http.StatusServiceUnavailable,
		NameKey: "upstream", NameValue: "billing", Check: "http",
		Deadline: 10*time.Second + margin, // timeout
		MaxPaid:  defaultsMaxPaid, ReadyBound: readyBound,
		Take: p.Blackhole, Give: p.Pass,
	})
}

// TestReadyWithEveryDependencyPaused: with the shipped readiness_timeout
// (800 ms), /ready answers in under a second while every dependency hangs —
// PostgreSQL and Redis paused for real, the upstream blackholed — whether the
// breakers are still closed (the checks are cut at readiness_timeout) or open
// (they answer without I/O). The queue's, mail's and idempotency's checks go
// through the db breaker. db is declared critical: the verdict is
// "unavailable" (a problem+json 503 naming db) on every call, from the first
// to the last, whatever the breaker does meanwhile.
func TestReadyWithEveryDependencyPaused(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pg, err := drills.StartPostgres(ctx)
	if err != nil {
		t.Fatalf("private PostgreSQL: %v", err)
	}
	t.Cleanup(func() { pg.Stop() })
	rd, err := drills.StartRedis(ctx)
	if err != nil {
		t.Fatalf("private redis-server: %v", err)
	}
	t.Cleanup(func() { rd.Stop() })
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "{}") }))
	t.Cleanup(up.Close)
	proxy, err := drills.StartProxy(strings.TrimPrefix(up.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { proxy.Close() })
	toml := `[app]
name = "drill"
request_timeout = "2s" # the /db requests below meet the hang: no need to wait 30 s
[plugins]
enabled = ["db", "cache", "http", "queue", "mail", "idempotency"]
[plugin.db]
critical = true
[plugin.http.upstreams.billing]
base_url = "http://` + proxy.Addr() + `"
[plugin.queue]
backend = "postgres"
workers = false
[plugin.mail]
transport = "smtp"
host = "127.0.0.1"
port = 2525
use_starttls = false
from = "Drill <drill@example.com>"
[plugin.idempotency]
store = "postgres"
`
	svc := jfasttest.Start(t, jfasttest.Options{
		TOML:    toml,
		Plugins: []framework.Plugin{db.New(), cache.New(), jhttp.New(), queue.New(), mail.New(), idempotency.New()},
		Env:     map[string]string{"JFAST_DB_URL": pg.URL("postgres"), "JFAST_CACHE_URL": rd.URL()},
		Routes: func(app *framework.App, r chi.Router) error {
			d, err := db.Get(app)
			if err != nil {
				return err
			}
			r.Method(http.MethodGet, "/db", framework.Handler(func(w http.ResponseWriter, r *http.Request) error {
				_, err := d.Exec(r.Context(), "SELECT 1")
				return err
			}))
			return nil
		},
	})
	t.Cleanup(func() { pg.Resume(); rd.Resume(); proxy.Pass() }) // before the App stops
	client := &http.Client{Timeout: 30 * time.Second}
	ready := func() (int, readiness.Result, time.Duration) {
		t.Helper()
		start := time.Now()
		resp, err := client.Get(svc.URL + "/ready")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var res readiness.Result
		body, _ := io.ReadAll(resp.Body)
		if err := json.Unmarshal(body, &res); err != nil {
			t.Fatalf("/ready body %s: %v", body, err)
		}
		return resp.StatusCode, res, time.Since(start)
	}
	// Healthy, and the queue's tables exist (its check reads them).
	deadline := time.Now().Add(20 * time.Second)
	for {
		status, res, _ := ready()
		if status == 200 && res.Status == readiness.OK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/ready never ok before the pause: %d %+v", status, res)
		}
		time.Sleep(100 * time.Millisecond)
	}

	if err := pg.Pause(); err != nil {
		t.Fatal(err)
	}
	if err := rd.Pause(); err != nil {
		t.Fatal(err)
	}
	if err := proxy.Blackhole(); err != nil {
		t.Fatal(err)
	}
	var slowest time.Duration
	for i := range 12 {
		if i == 4 {
			// Requests meet the hang: the db breaker opens.
			for range 3 {
				resp, err := client.Get(svc.URL + "/db")
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
			}
		}
		status, res, took := ready()
		slowest = max(slowest, took)
		if took > readyBound {
			t.Fatalf("/ready %d with every dependency paused took %s, over %s", i, took, readyBound)
		}
		if status != 503 || res.Status != readiness.Unavailable || res.Checks["db"].Healthy || !res.Checks["db"].Critical {
			t.Fatalf("/ready %d: %d %+v, want 503 unavailable with db critical", i, status, res)
		}
		for _, name := range []string{"cache", "queue", "idempotency"} {
			if c := res.Checks[name]; c.Healthy || c.Critical {
				t.Fatalf("/ready %d: %s = %+v, want unhealthy and not critical", i, name, c)
			}
		}
	}
	t.Logf("12 /ready calls with every dependency paused: slowest %s", slowest)
}
