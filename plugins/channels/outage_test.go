package channels

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/jfastframework/jfast/framework/resilience"
	"github.com/jfastframework/jfast/jfasttest"
	"github.com/jfastframework/jfast/problem"
)

// The outage tests' deadlines: the cache's command_timeout and the
// subscriptions' health_check_interval are short so the tests are quick; the
// margin is what a call may take beyond its deadline on a loaded machine.
const (
	commandTimeout = 300 * time.Millisecond
	healthInterval = 300 * time.Millisecond
	margin         = 700 * time.Millisecond
	coolDown       = 15 * time.Second // the breaker's default
)

const outageCacheTOML = "command_timeout = \"300ms\"\nbreaker_failures = 3\n"

// outageCluster is a cluster on a private redis-server with short deadlines.
func outageCluster(t *testing.T, url, channelsTOML string) *cluster {
	cl := newCluster(t, url, channelsTOML+"\nhealth_check_interval = \"300ms\"\nhandler_timeout = \"1s\"\nvisibility_timeout = \"2s\"\n")
	cl.cacheTOML = outageCacheTOML
	return cl
}

// publishUntilOpen publishes on a Redis that does not answer until the
// breaker refuses at once; it checks every error on the way.
func publishUntilOpen(t *testing.T, ch *Plugin, channel string, deadline time.Duration) {
	t.Helper()
	var probing time.Time // when a refusal for a probe in flight was first seen
	for i := 0; ; i++ {
		var err error
		d := elapsed(func() { err = ch.Publish(context.Background(), channel, []byte("during")) })
		var ue *UnavailableError
		if !errors.As(err, &ue) || !errors.Is(err, ErrUnavailable) {
			t.Fatalf("publish %d while redis is away = %v, want an UnavailableError", i, err)
		}
		if d > deadline+margin {
			t.Fatalf("publish %d while redis is away took %s, want at most %s + %s", i, d, deadline, margin)
		}
		p, ok := problem.As(err)
		if !ok || p.Status != http.StatusServiceUnavailable || p.Extensions["dependency"] != "channels" {
			t.Fatalf("publish %d: problem %+v, want a 503 naming channels", i, p)
		}
		var open *resilience.OpenError
		if errors.As(err, &open) && open.Until.IsZero() {
			// A publish that timed out is a hang, which makes the breaker
			// half-open at once: another call (the consumer's read) may be its
			// probe, and this one is refused without a Retry-After. Go on
			// until the probe fails and the breaker opens.
			if probing.IsZero() {
				probing = time.Now()
			}
			if time.Since(probing) > deadline+margin {
				t.Fatalf("the breaker stayed half-open for %s, longer than a probe may take", time.Since(probing))
			}
			i--
			time.Sleep(5 * time.Millisecond)
			continue
		}
		if errors.Is(err, resilience.ErrOpen) {
			if d > 50*time.Millisecond {
				t.Errorf("publish with the breaker open took %s; want no I/O", d)
			}
			if ue.MaybePublished || ue.RetryAfter() != coolDown || p.RetryAfter != coolDown {
				t.Errorf("open-breaker error: maybe %v, retry after %s / %s; want false, %s", ue.MaybePublished, ue.RetryAfter(), p.RetryAfter, coolDown)
			}
			if i < 1 {
				t.Errorf("the breaker was open at the first publish")
			}
			return
		}
		if i > 10 {
			t.Fatalf("the breaker did not open after %d failed publishes", i)
		}
	}
}

// waitDegraded waits until /ready reports channels unhealthy (200 degraded,
// never critical) with want in the detail, and returns the detail.
func waitDegraded(t *testing.T, rep *replica, within time.Duration, want string) string {
	t.Helper()
	var detail string
	waitFor(t, within, "/ready reports channels degraded with "+want, func() bool {
		status, e := readyEntry(t, rep.svc)
		if status != http.StatusOK || e["healthy"] != false {
			return false
		}
		if e["critical"] != false {
			t.Fatalf("/ready: channels critical while redis is away: %v", e)
		}
		detail, _ = e["detail"].(string)
		return strings.Contains(detail, want)
	})
	return detail
}

// A private redis-server is paused (SIGSTOP: the socket stays open, nothing
// answers). Publishes answer within command_timeout, then at once once the
// breaker is open, all as 503s naming channels; /ready reports the
// subscription down (degraded) within health_check_interval plus
// command_timeout; after SIGCONT and the cool-down the same replicas receive
// again, without a restart.
func TestBroadcastRedisPaused(t *testing.T) {
	t.Parallel()
	srv := startRedis(t)
	cl := outageCluster(t, srv.URL(), `broadcast = ["news"]`)
	a, b := newInbox(), newInbox()
	ra := cl.start(func(ch *Plugin, r chi.Router) error { return ch.Subscribe("news", a.handler) })
	rb := cl.start(func(ch *Plugin, r chi.Router) error { return ch.Subscribe("news", b.handler) })
	subscribed(t, ra.ch)
	subscribed(t, rb.ch)
	if err := ra.ch.Publish(context.Background(), "news", []byte("before")); err != nil {
		t.Fatal(err)
	}
	a.wait(t, 1, 5*time.Second)
	b.wait(t, 1, 5*time.Second)

	if err := srv.Pause(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Resume() })
	publishUntilOpen(t, ra.ch, "news", commandTimeout)
	waitDegraded(t, rb, healthInterval+commandTimeout+2*margin, "subscription broadcast down")

	if err := srv.Resume(); err != nil {
		t.Fatal(err)
	}
	cl.clock.Advance(coolDown)
	subscribed(t, ra.ch)
	subscribed(t, rb.ch)
	publishOnceBack(t, cl, ra.ch, "news", []byte("after"))
	for name, in := range map[string]*inbox{"a": a, "b": b} {
		waitFor(t, 5*time.Second, "replica "+name+" receives after the resume", func() bool {
			return strings.Contains(strings.Join(in.payloads(), ","), "after")
		})
	}
	if status, e := readyEntry(t, ra.svc); status != 200 || e["healthy"] != true {
		t.Fatalf("/ready after the recovery: %d %v", status, e)
	}
}

// closesDelivered waits until no TCP connection to addr, a private Redis the
// test killed, is still established on this side: the dead server's FIN or
// RST has reached every client socket, so the client's check of a pooled
// connection on checkout (a peek at the socket) finds it closed. Kill
// returns once the process is gone and its sockets are closed, but the close
// reaches the client sockets afterwards, as loopback packets do (processed
// later on a busy machine); a command written before it arrived is the case
// the client cannot tell from Redis dying after reading it.
func closesDelivered(t *testing.T, addr string) {
	t.Helper()
	_, port, _ := strings.Cut(addr, ":")
	rem := fmt.Sprintf("0100007F:%04X", mustAtoi(t, port)) // /proc/net/tcp's 127.0.0.1:port
	waitFor(t, 5*time.Second, "the close of killed redis "+addr+" delivered", func() bool {
		b, err := os.ReadFile("/proc/net/tcp")
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range strings.Split(string(b), "\n")[1:] {
			// sl local_address rem_address st: 01 is ESTABLISHED
			if f := strings.Fields(l); len(f) > 3 && f[2] == rem && f[3] == "01" {
				return false
			}
		}
		return true
	})
}

func mustAtoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// A private redis-server is killed (SIGKILL) and started again, empty, on the
// same port: once its close has reached the client's connections, publishes
// are refused fast (the redial is refused: not maybe published), /ready is
// degraded, and once Redis is back the subscriptions resume by themselves.
func TestBroadcastRedisKilled(t *testing.T) {
	t.Parallel()
	srv := startRedis(t)
	cl := outageCluster(t, srv.URL(), `broadcast = ["news"]`)
	in := newInbox()
	rep := cl.start(func(ch *Plugin, r chi.Router) error { return ch.Subscribe("news", in.handler) })
	subscribed(t, rep.ch)

	if err := srv.Kill(); err != nil {
		t.Fatal(err)
	}
	closesDelivered(t, srv.Addr())
	var err error
	d := elapsed(func() { err = rep.ch.Publish(context.Background(), "news", []byte("during")) })
	var ue *UnavailableError
	if !errors.As(err, &ue) || ue.MaybePublished || d > commandTimeout+margin {
		t.Fatalf("publish with redis killed = %v (maybe published: %v) after %s; want a refused UnavailableError", err, ue != nil && ue.MaybePublished, d)
	}
	waitDegraded(t, rep, healthInterval+commandTimeout+2*margin, "subscription broadcast down")

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	cl.clock.Advance(coolDown)
	subscribed(t, rep.ch)
	publishOnceBack(t, cl, rep.ch, "news", []byte("after"))
	waitFor(t, 5*time.Second, "the handler receives after the restart", func() bool {
		return strings.Contains(strings.Join(in.payloads(), ","), "after")
	})
}

// publishOnceBack publishes payload once Redis is back, within 10 s. On the
// test clock the breaker's cool-down passes only when the test advances it:
// a publish that met the breaker open again (on a loaded machine a first
// command after the outage can outlast command_timeout, a hang that opens
// it by the silence rule) advances the clock by the cool-down, as time
// would, and publishes again. It reports whether a failed publish may
// have been published all the same (a hang: UnavailableError.MaybePublished),
// so the payload may arrive twice.
func publishOnceBack(t *testing.T, cl *cluster, ch *Plugin, channel string, payload []byte) (maybeTwice bool) {
	t.Helper()
	reopened := 0
	waitFor(t, 10*time.Second, "a publish once redis is back", func() bool {
		err := ch.Publish(context.Background(), channel, payload)
		var ue *UnavailableError
		maybeTwice = maybeTwice || errors.As(err, &ue) && ue.MaybePublished
		var open *resilience.OpenError
		if errors.As(err, &open) && !open.Until.IsZero() {
			reopened++
			cl.clock.Advance(coolDown)
		}
		return err == nil
	})
	if reopened > 0 {
		t.Logf("the breaker opened again %d times before a publish went through", reopened)
	}
	return maybeTwice
}

// countPayloads counts the messages of in by payload.
func countPayloads(in *inbox) map[string]int {
	c := map[string]int{}
	for _, p := range in.payloads() {
		c[p]++
	}
	return c
}

// A durable channel through a paused Redis: publishes fail as 503s (fast once
// the breaker is open), /ready is degraded, and after the resume the same
// replica handles everything published before and after, each once.
func TestDurableRedisPaused(t *testing.T) {
	t.Parallel()
	srv := startRedis(t)
	cl := outageCluster(t, srv.URL(), `durable = ["orders"]`)
	in := newInbox()
	rep := cl.start(func(ch *Plugin, r chi.Router) error { return ch.Subscribe("orders", in.handler) })
	subscribed(t, rep.ch)
	ctx := context.Background()
	for i := range 5 {
		if err := rep.ch.Publish(ctx, "orders", []byte("before-"+strconv.Itoa(i))); err != nil {
			t.Fatal(err)
		}
	}
	in.wait(t, 5, 5*time.Second)

	if err := srv.Pause(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Resume() })
	publishUntilOpen(t, rep.ch, "orders", commandTimeout)
	// The consumer's blocking read waits health_check_interval plus
	// command_timeout before it counts as failed.
	waitDegraded(t, rep, healthInterval+commandTimeout+2*margin, "subscription durable orders down")

	if err := srv.Resume(); err != nil {
		t.Fatal(err)
	}
	cl.clock.Advance(coolDown)
	subscribed(t, rep.ch)
	twice := map[string]bool{} // published after a failure that may have published it
	for i := range 5 {
		p := []byte("after-" + strconv.Itoa(i))
		if publishOnceBack(t, cl, rep.ch, "orders", p) {
			twice[string(p)] = true
		}
	}
	waitFor(t, 10*time.Second, "everything published handled", func() bool {
		c := countPayloads(in)
		for i := range 5 {
			if c["before-"+strconv.Itoa(i)] == 0 || c["after-"+strconv.Itoa(i)] == 0 {
				return false
			}
		}
		return true
	})
	for p, n := range countPayloads(in) {
		if n != 1 && p != "during" && !(twice[p] && n == 2) {
			t.Errorf("%s handled %d times", p, n)
		}
	}
}

// A durable channel through a Redis killed and started again empty (no
// persistence): the consumer makes its group again and handles what is
// published after the restart, without a restart of the service.
func TestDurableRedisKilled(t *testing.T) {
	t.Parallel()
	srv := startRedis(t)
	cl := outageCluster(t, srv.URL(), `durable = ["orders"]`)
	in := newInbox()
	rep := cl.start(func(ch *Plugin, r chi.Router) error { return ch.Subscribe("orders", in.handler) })
	subscribed(t, rep.ch)
	if err := srv.Kill(); err != nil {
		t.Fatal(err)
	}
	waitDegraded(t, rep, healthInterval+commandTimeout+2*margin, "down")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	cl.clock.Advance(coolDown)
	publishOnceBack(t, cl, rep.ch, "orders", []byte("after"))
	in.wait(t, 1, 10*time.Second)
	subscribed(t, rep.ch)
	if got := in.payloads(); len(got) != 1 || got[0] != "after" {
		t.Fatalf("handled %q", got)
	}
}

// Redis down at boot does not stop the boot: the subscriptions report
// "connecting" (not down) for health_check_interval plus command_timeout on
// the App's clock (held still here), then down; once Redis is there they
// connect by themselves. The durable loops' refused commands go through the
// cache's breaker, so it may open (breaker_failures = 3) before /ready is
// first read.
func TestRedisDownAtBoot(t *testing.T) {
	t.Parallel()
	srv := startRedis(t)
	if err := srv.Kill(); err != nil {
		t.Fatal(err)
	}
	cl := outageCluster(t, srv.URL(), "broadcast = [\"news\"]\ndurable = [\"orders\"]")
	in := newInbox()
	rep := cl.start(func(ch *Plugin, r chi.Router) error {
		if err := ch.Subscribe("news", in.handler); err != nil {
			return err
		}
		return ch.Subscribe("orders", in.handler)
	})
	assertReadyAtBoot(t, rep)
	// The grace is on the App's clock: past it, the subscriptions that never
	// connected are down.
	cl.clock.Advance(healthInterval + commandTimeout)
	waitDegraded(t, rep, healthInterval+commandTimeout+2*margin, "down")

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	cl.clock.Advance(coolDown)
	subscribed(t, rep.ch)
	for _, channel := range []string{"news", "orders"} {
		if err := rep.ch.Publish(context.Background(), channel, []byte(channel)); err != nil {
			t.Fatal(err)
		}
	}
	in.wait(t, 2, 10*time.Second)
}

// assertReadyAtBoot checks /ready right after a boot with Redis refusing
// connections: 200, not critical, every subscription connecting (the test
// clock has not moved: the grace has not passed), and healthy
// exactly while the cache's breaker is closed. The subscriptions' refused
// commands count against that breaker as they happen, so it is open or not by
// the time /ready is read (breaker_failures refused commands open it); the
// entry must agree with the breaker state it reports.
func assertReadyAtBoot(t *testing.T, rep *replica) {
	t.Helper()
	status, e := readyEntry(t, rep.svc)
	meta, _ := e["meta"].(map[string]any)
	subs, _ := meta["subscriptions"].(map[string]any)
	breaker, _ := meta["breaker"].(map[string]any)
	if status != http.StatusOK || e["critical"] != false || len(subs) < 2 || breaker == nil {
		t.Fatalf("/ready right after the boot: %d %v", status, e)
	}
	for name, s := range subs {
		if st, _ := s.(map[string]any)["state"].(string); st != "connecting" {
			t.Fatalf("/ready right after the boot: subscription %s is %q, want connecting: %v", name, st, e)
		}
	}
	detail, _ := e["detail"].(string)
	switch breaker["state"] {
	case "closed":
		if e["healthy"] != true {
			t.Fatalf("/ready right after the boot, breaker closed: %v, want healthy", e)
		}
	case "open":
		if e["healthy"] != false || !strings.Contains(detail, "breaker is open") || !strings.HasPrefix(detail, "channels: redis unreachable: publishes refused for ") {
			t.Fatalf("/ready right after the boot, breaker open: %v, want unhealthy naming the open breaker", e)
		}
	default:
		t.Fatalf("/ready right after the boot: breaker %v, want closed or open (no cool-down has passed)", breaker)
	}
}

// A publish the cache's open breaker refused, with no I/O, is counted as
// circuit_open (the word every plugin uses for a call its open breaker
// refused) and not timed; those Redis refused before it opened are
// unavailable and timed. Redis is an address where nothing listens:
// breaker_failures (3) refused connections in a row open the breaker, and on
// the test clock, held still, it stays open.
func TestPublishRefusedByTheOpenBreakerIsCircuitOpen(t *testing.T) {
	t.Parallel()
	cl := outageCluster(t, "redis://"+jfasttest.RefusedAddr(t)+"/0", `broadcast = ["news"]`)
	rep := cl.start(nil)
	failed := 0.0
	for {
		err := rep.ch.Publish(context.Background(), "news", []byte("x"))
		var ue *UnavailableError
		if !errors.As(err, &ue) {
			t.Fatalf("publish with nothing listening = %v, want an UnavailableError", err)
		}
		if errors.Is(err, resilience.ErrOpen) {
			break
		}
		if failed++; failed > 3 {
			t.Fatalf("the breaker did not open after %v refused publishes (breaker_failures = 3)", failed)
		}
	}
	reg := rep.svc.Metrics()
	published := func(outcome string) float64 {
		return jfasttest.Metric(t, reg, "jfast_channels_published_total", "channel", "news", "outcome", outcome)
	}
	timed := jfasttest.Metric(t, reg, "jfast_channels_publish_duration_seconds", "channel", "news")
	if published("circuit_open") != 1 || published("unavailable") != failed || timed != failed {
		t.Fatalf("published circuit_open %v, unavailable %v, timed %v; want 1, %v, %v",
			published("circuit_open"), published("unavailable"), timed, failed, failed)
	}
}

// While the cache's breaker is open and no subscription is down (the test
// clock held still: they are still connecting), /ready's channels entry
// says Redis is unreachable, with the cool-down left, as the cache's own
// entry does; not critical, so the answer stays 200.
func TestReadyWhileTheBreakerIsOpenSaysRedisUnreachable(t *testing.T) {
	t.Parallel()
	cl := outageCluster(t, "redis://"+jfasttest.RefusedAddr(t)+"/0", `broadcast = ["news"]`)
	rep := cl.start(nil)
	for i := 0; !errors.Is(rep.ch.Publish(context.Background(), "news", []byte("x")), resilience.ErrOpen); i++ {
		if i > 3 {
			t.Fatalf("the breaker did not open after %d refused publishes (breaker_failures = 3)", i)
		}
	}
	status, e := readyEntry(t, rep.svc)
	detail, _ := e["detail"].(string)
	want := "channels: redis unreachable: publishes refused for " + strconv.FormatFloat(coolDown.Seconds(), 'f', 1, 64) + "s: the cache plugin's redis breaker is open"
	if status != http.StatusOK || e["healthy"] != false || e["critical"] != false || detail != want {
		t.Fatalf("/ready with the breaker open: %d %v; want 200, unhealthy, not critical, detail %q", status, e, want)
	}
}
