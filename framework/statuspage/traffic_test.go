package statuspage

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/jfastframework/jfast/framework/resilience"
)

var epoch = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// waitSample waits for the reading a call started, if one is running.
func waitSample(tr *traffic) {
	tr.mu.Lock()
	for tr.sampling {
		tr.done.Wait()
	}
	tr.mu.Unlock()
}

// trafficFixture is a service's metrics as the storage, gateway, mail, db
// and cache plugins register them, and their breakers (and the cache's) on a
// registry.
type trafficFixture struct {
	clock            *resilience.TestClock
	reg              *resilience.Registry
	h                *Handler
	ops              *prometheus.CounterVec
	attempts         *prometheus.CounterVec // jfast_client_attempts_total, the storage plugin's series
	opDuration       *prometheus.HistogramVec
	requests         *prometheus.CounterVec
	retries, refused *prometheus.CounterVec
	upstream         *prometheus.HistogramVec
	deliveries       *prometheus.CounterVec
	acquires         prometheus.Counter
	acquireAttempts  prometheus.Counter
	held             prometheus.Histogram
	commands         *prometheus.CounterVec
	commandDuration  prometheus.Histogram
	disk, db, redis  *resilience.Breaker
}

func newTrafficFixture(t *testing.T) *trafficFixture {
	t.Helper()
	f := &trafficFixture{clock: resilience.NewTestClock(epoch)}
	f.reg = resilience.NewRegistry(f.clock)
	m := prometheus.NewRegistry()
	f.ops = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "jfast_storage_operations_total"}, []string{"disk", "operation", "outcome"})
	f.attempts = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "jfast_client_attempts_total"}, []string{"plugin", "dependency"})
	f.opDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "jfast_storage_operation_duration_seconds", Buckets: []float64{.01, .1, 1}}, []string{"disk", "operation"})
	f.requests = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "jfast_gateway_requests_total"}, []string{"route", "status"})
	f.retries = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "jfast_gateway_retries_total"}, []string{"route"})
	f.refused = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "jfast_gateway_breaker_refusals_total"}, []string{"route"})
	f.upstream = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "jfast_gateway_upstream_duration_seconds", Buckets: []float64{.01, .1, 1}}, []string{"route"})
	f.deliveries = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "jfast_mail_deliveries_total"}, []string{"transport", "result"})
	f.acquires = prometheus.NewCounter(prometheus.CounterOpts{Name: "jfast_db_acquisitions_total"})
	f.acquireAttempts = prometheus.NewCounter(prometheus.CounterOpts{Name: "jfast_db_acquisition_attempts_total"})
	f.held = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "jfast_db_acquisition_duration_seconds", Buckets: []float64{.001, .01, .1}})
	f.commands = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "jfast_cache_commands_total"}, []string{"outcome"})
	f.commandDuration = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "jfast_cache_command_duration_seconds", Buckets: []float64{.0001, .001, .01}})
	m.MustRegister(f.ops, f.attempts, f.opDuration, f.requests, f.retries, f.refused, f.upstream, f.deliveries, f.acquires, f.acquireAttempts, f.held, f.commands, f.commandDuration)
	f.disk = resilience.NewBreaker(resilience.BreakerOpts{Name: "storage.files", Clock: f.reg.Clock("storage")})
	f.db = resilience.NewBreaker(resilience.BreakerOpts{Name: "db", Clock: f.reg.Clock("db")})
	f.redis = resilience.NewBreaker(resilience.BreakerOpts{Name: "redis", Clock: f.reg.Clock("cache")})
	f.h = New(Source{Registry: f.reg, Metrics: m})
	t.Cleanup(f.h.Close)
	return f
}

// storageCalls makes n storage operations of 50 ms, one request each: the
// metrics the plugin keeps (its own and the policy's attempts), then the calls through the disk's breaker, the first of which
// takes a reading when one is due (holding all n: the test knows what it
// holds).
func (f *trafficFixture) storageCalls(n int) {
	for range n {
		f.ops.WithLabelValues("files", "get", "ok").Inc()
		f.attempts.WithLabelValues("storage", "files").Inc()
		f.opDuration.WithLabelValues("files", "get").Observe(.05)
	}
	for range n {
		tk, err := f.disk.Allow()
		if err == nil {
			tk.Done(resilience.Success)
		}
	}
	waitSample(f.h.traffic)
}

func (f *trafficFixture) dep(t *testing.T, owner, name string) depView {
	t.Helper()
	v := f.h.build(context.Background())
	for _, p := range v.Plugins {
		for _, d := range p.Deps {
			if p.Name == owner && d.Name == name {
				return d
			}
		}
	}
	t.Fatalf("no card for %s %q in %+v", owner, name, v.Plugins)
	return depView{}
}

// The first call takes the first reading the calls take, and that reading
// counts it: the window counts it all the same, from the zero reading of
// the page's making, "since start" for as long as that reading is the base.
func TestTrafficCountsTheFirstCalls(t *testing.T) {
	t.Parallel()
	for _, after := range []time.Duration{0, 3 * time.Second, 10 * time.Minute} {
		f := newTrafficFixture(t)
		f.clock.Advance(after)
		f.storageCalls(1) // takes a reading, unless within 10 s of the start's
		f.clock.Advance(3 * time.Second)
		tr := f.dep(t, "storage", "storage.files").Traffic
		if tr == nil || tr.Span != "since start" || tr.Calls != "1" || tr.Attempts != "1" || tr.P50 != "55 ms" {
			t.Fatalf("one call %v after start, a look 3 s later: %+v; want since start: 1 call, 1 attempt, p50 55 ms", after, tr)
		}
	}

	// Three calls, two more 2 minutes later (their reading counts them),
	// and 2 the open breaker refused a minute after: all in the window.
	f := newTrafficFixture(t)
	f.storageCalls(3)
	f.clock.Advance(2 * time.Minute)
	f.storageCalls(2)
	f.clock.Advance(time.Minute)
	f.ops.WithLabelValues("files", "get", "circuit_open").Add(2) // no attempt
	tr := f.dep(t, "storage", "storage.files").Traffic
	if tr.Span != "since start" || tr.Calls != "7" || tr.Attempts != "5" {
		t.Fatalf("at t0+3m: %+v; want since start: 7 calls, 5 attempts", tr)
	}
}

// The calls keep a reading every 10 s while they run, nobody looking: the
// first render already shows the last minutes. A reading goes once it is
// more than 5 minutes and 10 s old and the next is no more than two
// intervals after it; the one before a quiet spell stays the base, since
// the reading after the spell counts the call that ended it.
func TestTrafficReadingsTakenByTheCalls(t *testing.T) {
	t.Parallel()
	f := newTrafficFixture(t)
	for i := range 43 { // one call every 10 s, t0 to t0+7m
		if i > 0 {
			f.clock.Advance(10 * time.Second)
		}
		f.storageCalls(1)
	}
	// The base is the reading of t0+1m50s, exactly 5m10s old: it counts
	// the calls of t0 to t0+1m50s (12), not the 31 after.
	tr := f.dep(t, "storage", "storage.files").Traffic
	if tr == nil || tr.Span != "last 5m10s" || tr.Calls != "31" || tr.Attempts != "31" || tr.P50 != "55 ms" {
		t.Fatalf("the first render at t0+7m: traffic %+v; want over the last 5m10s: 31 calls, 31 attempts, p50 55 ms (50 ms within the 10-100 ms bucket)", tr)
	}
	if n := len(f.h.traffic.samples); n > maxSamples {
		t.Fatalf("%d readings kept, want at most %d", n, maxSamples)
	}

	// 20 quiet minutes, then a call: its reading counts it, so the base is
	// the reading before the spell (the render's of t0+7m).
	f.clock.Advance(20 * time.Minute)
	f.storageCalls(1)
	f.clock.Advance(3 * time.Second)
	tr = f.dep(t, "storage", "storage.files").Traffic
	if tr.Span != "last 20m3s" || tr.Calls != "1" || tr.Attempts != "1" {
		t.Fatalf("3 s after the call that ended 20 quiet minutes: %+v; want over the last 20m3s: 1 call, 1 attempt", tr)
	}

	// Once the reading after the spell is more than 5m10s old, nothing
	// needs the one before: the window is from the last reading kept.
	f.clock.Advance(6 * time.Minute)
	f.ops.WithLabelValues("files", "get", "circuit_open").Add(2) // refused, no attempt
	tr = f.dep(t, "storage", "storage.files").Traffic
	if tr.Span != "last 6m3s" || tr.Calls != "2" || tr.Attempts != "0" || tr.P50 != "—" {
		t.Fatalf("6 minutes later: %+v; want over the last 6m3s (from the call's reading, the last kept: the render 3 s after it took none): 2 calls (the refused), 0 attempts, no latency", tr)
	}
}

// Every plugin that calls out has its traffic on the page, or says what is
// not measured and why.
func TestTrafficOfEveryPlugin(t *testing.T) {
	t.Parallel()
	f := newTrafficFixture(t)
	f.storageCalls(1)
	f.requests.WithLabelValues("/orders/*", "200").Add(4)
	f.requests.WithLabelValues("/orders/*", "503").Add(1)
	f.refused.WithLabelValues("/orders/*").Add(1)
	f.retries.WithLabelValues("/orders/*").Add(2)
	f.upstream.WithLabelValues("/orders/*").Observe(.2)
	f.deliveries.WithLabelValues("smtp", "sent").Add(3)
	f.deliveries.WithLabelValues("smtp", "transient").Add(1)

	// A gateway route has no resilience object: a card of its own, the
	// breaker's refusal no attempt, its retries more.
	route := f.dep(t, "gateway", "/orders/*").Traffic
	if route == nil || route.Calls != "5" || route.Attempts != "6" || route.P50 != "550 ms" || route.NotMeasured != "" {
		t.Fatalf("gateway route: %+v; want 5 calls, 6 attempts (5 - 1 refused + 2 retries), p50 550 ms", route)
	}
	mail := f.dep(t, "mail", "smtp").Traffic
	if mail == nil || mail.Calls != "—" || mail.Attempts != "4" || !strings.Contains(mail.NotMeasured, "not by message") {
		t.Fatalf("mail: %+v; want 4 delivery attempts, calls not measured", mail)
	}
	// 13 connections asked for: 1 refused by the open breaker, 11 got at
	// the first attempt, 1 at the second (its first's ping got no answer).
	f.acquires.Add(13)
	f.acquireAttempts.Add(13)
	for range 10 {
		f.held.Observe(.005) // a statement's connection
	}
	for range 2 {
		f.held.Observe(.05) // a transaction's
	}
	db := f.dep(t, "db", "db").Traffic
	if db == nil || db.Calls != "13" || db.Attempts != "13" || db.P50 != "6.4 ms" || db.P99 != "94.6 ms" || !strings.Contains(db.NotMeasured, "a statement's or a whole transaction's time") {
		t.Fatalf("db: %+v; want 13 connections asked for, 13 attempts, p50 6.4 ms (rank 6 of 12 in the 1-10 ms bucket) and p99 94.6 ms of the time held, saying what it is", db)
	}
	// Redis: 8 commands answered or not, 2 the open breaker refused (no
	// attempt), the 8 sent timed: 6 at 0.5 ms, 2 at 5 ms.
	f.commands.WithLabelValues("ok").Add(7)
	f.commands.WithLabelValues("error").Add(1)
	f.commands.WithLabelValues("circuit_open").Add(2)
	for range 6 {
		f.commandDuration.Observe(.0005)
	}
	for range 2 {
		f.commandDuration.Observe(.005)
	}
	redis := f.dep(t, "cache", "redis").Traffic
	if redis == nil || redis.Calls != "10" || redis.Attempts != "8" || redis.P50 != "0.7 ms" || redis.P99 != "9.6 ms" || redis.Span != "since start" || !strings.Contains(redis.NotMeasured, "pipeline") {
		t.Fatalf("cache: %+v; want 10 calls, 8 attempts (10 - 2 refused), p50 0.7 ms (rank 4 of 8, in the 0.1-1 ms bucket), p99 9.6 ms since start, a pipeline named as one call", redis)
	}
	disk := f.dep(t, "storage", "storage.files").Traffic
	if disk == nil || disk.Calls != "1" || disk.Attempts != "1" || disk.NotMeasured != "" {
		t.Fatalf("storage: %+v; want 1 call, 1 attempt (the policy counts every request it sends), nothing unmeasured", disk)
	}
}

// A breaker of an http or grpc client's routes, instances or origins is
// counted with its client, and the card says which kind it is.
func TestTrafficOfARouteBreaker(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ owner, name, want string }{
		{"http", "billing /payments/{id}", "counted with its upstream, billing: the metrics are kept per upstream, not per route"},
		{"http", "orders 10.0.0.7:8000", "counted with its upstream, orders: the metrics are kept per upstream, not per instance"},
		{"grpc", "inventory 10.0.0.8:9000", "counted with its upstream, inventory: the metrics are kept per upstream, not per instance"},
		{"http", "webhooks https://hooks.example:443", "counted with its client, webhooks: the metrics are kept per client, not per origin"},
	} {
		if tv := trafficOf(nil, trafficKey{tc.owner, tc.name}); tv == nil || tv.NotMeasured != tc.want || tv.Calls != "—" {
			t.Errorf("%s %q: %+v, want %q", tc.owner, tc.name, tv, tc.want)
		}
	}
	if tv := trafficOf(nil, trafficKey{"http", "billing"}); tv == nil || tv.Calls != "0" || tv.Span != "since start" {
		t.Fatalf("an upstream not called yet: %+v, want 0 calls since start", tv)
	}
	if tv := trafficOf(nil, trafficKey{"upstreamlike", "billing"}); tv != nil {
		t.Fatalf("a plugin the page does not know: %+v, want no traffic cell", tv)
	}
}

// A channel's publishes are its calls; those that sent nothing (too large,
// or refused by the cache's open breaker) are not attempts.
func TestChannelPublishesRefusedAreNoAttempts(t *testing.T) {
	t.Parallel()
	m := prometheus.NewRegistry()
	published := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "jfast_channels_published_total"}, []string{"channel", "outcome"})
	m.MustRegister(published)
	published.WithLabelValues("orders", "ok").Add(5)
	published.WithLabelValues("orders", "unavailable").Add(2)
	published.WithLabelValues("orders", "too_large").Add(1)
	published.WithLabelValues("orders", "circuit_open").Add(3)
	fams, err := m.Gather()
	if err != nil {
		t.Fatal(err)
	}
	c := gatherCounts(fams)[trafficKey{"channels", "orders"}]
	if c.calls != 11 || c.attempts != 7 {
		t.Fatalf("orders: %v calls, %v attempts; want 11 publishes, 7 sent to Redis (5 ok, 2 unavailable)", c.calls, c.attempts)
	}
}

// An enqueue is a call to the broker; those that sent nothing (refused by
// an open breaker, or at the call: a bad kind, payload or option) are not
// attempts, and a retried one is one call of two attempts.
func TestQueueEnqueuesRefusedAreNoAttempts(t *testing.T) {
	t.Parallel()
	m := prometheus.NewRegistry()
	enqueued := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "jfast_queue_enqueued_total"}, []string{"kind", "outcome"})
	m.MustRegister(enqueued)
	enqueued.WithLabelValues("send_receipt", "ok").Add(5)
	enqueued.WithLabelValues("send_receipt", "error").Add(2)
	enqueued.WithLabelValues("send_receipt", "retried").Add(1)
	enqueued.WithLabelValues("send_receipt", "circuit_open").Add(3)
	enqueued.WithLabelValues("(undeclared)", "invalid").Add(4)
	fams, err := m.Gather()
	if err != nil {
		t.Fatal(err)
	}
	c := gatherCounts(fams)[trafficKey{"queue", "queue"}]
	if c.calls != 14 || c.attempts != 8 {
		t.Fatalf("queue: %v calls, %v attempts; want 14 enqueues, 8 attempts at the broker (5 ok, 2 error, 1 retried)", c.calls, c.attempts)
	}
}
