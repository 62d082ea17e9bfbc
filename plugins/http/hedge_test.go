package http_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/jfastframework/jfast/framework/resilience"
	"github.com/jfastframework/jfast/jfasttest"
	jhttp "github.com/jfastframework/jfast/plugins/http"
)

// hedgeAfter is the fixed hedge_after of these tests; the test clock moves
// it, nothing sleeps.
const hedgeAfter = 20 * time.Millisecond

// slowFirst answers every request but the first at once with its number;
// the first waits until its client goes away, and then closes gone.
func slowFirst(gone chan<- struct{}, arrived chan<- int) func(http.ResponseWriter, *http.Request, int) {
	var first atomic.Bool
	return func(w http.ResponseWriter, r *http.Request, n int) {
		_, _ = io.Copy(io.Discard, r.Body) // the server sees the client go only once the body is read
		arrived <- n
		if first.CompareAndSwap(false, true) {
			<-r.Context().Done()
			close(gone)
			return
		}
		_, _ = io.WriteString(w, "answered")
	}
}

// hedgingClient is a client on a test clock that does not move by itself.
func hedgingClient(t *testing.T, u jhttp.Upstream, opts ...jhttp.ClientOption) (*jhttp.ServiceClient, *resilience.TestClock, *prometheus.Registry) {
	t.Helper()
	clk := jfasttest.NewClock()
	reg := prometheus.NewRegistry()
	u.Name = "billing"
	u.HedgeAfter = hedgeAfter.String()
	c, err := jhttp.NewClient(u, append([]jhttp.ClientOption{jhttp.WithClock(clk), jhttp.WithMetrics(reg)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c, clk, reg
}

type answer struct {
	resp *http.Response
	err  error
}

// hedgeOnce starts call, waits for its first request to arrive, moves the
// clock past hedge_after and returns the call's answer.
func hedgeOnce(t *testing.T, clk *resilience.TestClock, arrived <-chan int, call func() (*http.Response, error)) answer {
	t.Helper()
	done := make(chan answer, 1)
	go func() {
		resp, err := call()
		done <- answer{resp, err}
	}()
	<-arrived
	// The hedge's timer; bounded so that a call never hedged fails the
	// test instead of hanging it.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := clk.BlockUntilContext(ctx, 1); err != nil {
		t.Fatal("no hedge timer started")
	}
	clk.Advance(hedgeAfter)
	<-arrived
	return <-done
}

// A GET whose first request has not answered after hedge_after gets a hedge
// beside it: the hedge's answer is the call's, the first request is
// cancelled (the upstream sees its client go), the breaker counts one call
// and the budget one retry, and the hedge is counted.
func TestHedgeFirstAnswerWins(t *testing.T) {
	t.Parallel()
	gone, arrived := make(chan struct{}), make(chan int, 4)
	up := newUpstream(t, slowFirst(gone, arrived))
	c, clk, reg := hedgingClient(t, jhttp.Upstream{BaseURL: up.URL})
	a := hedgeOnce(t, clk, arrived, func() (*http.Response, error) { return c.Get(context.Background(), "/invoices/7") })
	if a.err != nil || a.resp.StatusCode != 200 {
		t.Fatalf("%v %v", a.resp, a.err)
	}
	if body, _ := io.ReadAll(a.resp.Body); string(body) != "answered" {
		t.Fatalf("body %q, want the hedge's", body)
	}
	<-gone
	if hits := up.hits.Load(); hits != 2 {
		t.Fatalf("%d requests, want the first and its hedge", hits)
	}
	for name, want := range map[string]float64{"jfast_client_hedges_total": 1, "jfast_client_attempts_total": 2, "jfast_client_retries_total": 0} {
		if got := metric(t, reg, name, "dependency", "billing"); got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	if got := metric(t, reg, "jfast_client_calls_total", "dependency", "billing", "outcome", "response"); got != 1 {
		t.Errorf("calls = %v, want 1", got)
	}
	if s := c.Breaker().Snapshot(); s.WindowCalls != 1 || s.WindowFailures != 0 {
		t.Errorf("breaker window %d calls, %d failures; want one call, answered", s.WindowCalls, s.WindowFailures)
	}
}

// With max_concurrent = 1 the hedge still goes out: the pool has a
// connection for each request a call may have in flight at once (1 +
// max_hedges per call), not one per call, or the hedge would wait for the
// first request's connection, counted as sent and never sent.
func TestHedgeGoesOutWithOnePlace(t *testing.T) {
	t.Parallel()
	gone, arrived := make(chan struct{}), make(chan int, 4)
	up := newUpstream(t, slowFirst(gone, arrived))
	c, clk, _ := hedgingClient(t, jhttp.Upstream{BaseURL: up.URL, PolicyConfig: resilience.PolicyConfig{MaxConcurrent: 1}})
	a := hedgeOnce(t, clk, arrived, func() (*http.Response, error) { return c.Get(context.Background(), "/invoices/7") })
	if a.err != nil || a.resp.StatusCode != 200 {
		t.Fatalf("%v %v", a.resp, a.err)
	}
	_ = a.resp.Body.Close()
	<-gone
	if hits := up.hits.Load(); hits != 2 {
		t.Fatalf("%d requests, want the first and its hedge", hits)
	}
}

// A POST is hedged only with an Idempotency-Key; the key travels on both.
func TestHedgeIdempotentPost(t *testing.T) {
	t.Parallel()
	gone, arrived := make(chan struct{}), make(chan int, 4)
	up := newUpstream(t, slowFirst(gone, arrived))
	c, clk, _ := hedgingClient(t, jhttp.Upstream{BaseURL: up.URL})
	a := hedgeOnce(t, clk, arrived, func() (*http.Response, error) {
		return c.Post(context.Background(), "/charges", map[string]int{"cents": 100}, jhttp.IdempotencyKey("charge-7"))
	})
	if a.err != nil || a.resp.StatusCode != 200 {
		t.Fatalf("%v %v", a.resp, a.err)
	}
	<-gone
	for i := range 2 {
		if k := up.request(i).Header.Get("Idempotency-Key"); k != "charge-7" {
			t.Errorf("request %d: Idempotency-Key %q", i, k)
		}
	}
}

// A hedge goes to another instance than the attempt it races: with two
// instances, whichever the first request reached, each gets one request.
func TestHedgeToAnotherInstance(t *testing.T) {
	t.Parallel()
	gone, arrived := make(chan struct{}), make(chan int, 4)
	h := slowFirst(gone, arrived)
	ups, u := replicas(2, t, h, h)
	c, clk, _ := hedgingClient(t, u)
	a := hedgeOnce(t, clk, arrived, func() (*http.Response, error) { return c.Get(context.Background(), "/invoices/7") })
	if a.err != nil || a.resp.StatusCode != 200 {
		t.Fatalf("%v %v", a.resp, a.err)
	}
	<-gone
	if ups[0].hits.Load() != 1 || ups[1].hits.Load() != 1 {
		t.Fatalf("instances got %d and %d requests, want one each", ups[0].hits.Load(), ups[1].hits.Load())
	}
}

// With instances (a list of one), the call after the cool-down is the
// instance's half-open probe. A hedge due while the probe is in flight
// finds no instance and sends nothing: it must neither win nor cancel the
// probe (which would leave the breaker half-open for ever and fail the call
// with CircuitOpen), and is not counted as a hedge, nor as an attempt a
// call observer is told of. The probe's 200 is the call's answer and
// closes the instance's breaker.
func TestUnsentHedgeLeavesTheProbeAlone(t *testing.T) {
	t.Parallel()
	arrived, release := make(chan int, 4), make(chan struct{})
	cancelled := make(chan struct{})
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request, n int) {
		if n == 1 {
			w.WriteHeader(http.StatusServiceUnavailable) // opens the instance's 1-failure breaker
			return
		}
		arrived <- n
		select {
		case <-release:
		case <-r.Context().Done():
			close(cancelled)
		}
	})
	u := noBudget(jhttp.Upstream{BaseURL: "http://orders.internal:8000", Instances: []string{up.URL}})
	u.BreakerFailures = 1
	attempts := make(chan int, 2)
	c, clk, reg := hedgingClient(t, u, jhttp.WithCallObserver(countAttempts(attempts)))
	clk.SetAutoAdvance(true) // the first call's backoff
	if resp, err := c.Get(t.Context(), "/x"); err != nil || resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("first call: %v %v, want the 503", resp, err)
	}
	if n := <-attempts; n != 1 {
		t.Fatalf("first call: the call observer was told of %d attempts, want 1 (its retry found the instance open)", n)
	}
	clk.SetAutoAdvance(false)
	clk.Advance(resilience.DefaultBreakerCoolDown)

	done := make(chan answer, 1)
	go func() {
		resp, err := c.Get(context.Background(), "/x")
		done <- answer{resp, err}
	}()
	<-arrived // the probe
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := clk.BlockUntilContext(ctx, 1); err != nil {
		t.Fatal("no hedge timer started")
	}
	clk.Advance(hedgeAfter)
	// The hedge finds no instance; the timer armed again says the loop
	// dropped it and waits on for the probe.
	rearmed := make(chan error, 1)
	go func() { rearmed <- clk.BlockUntilContext(ctx, 1) }()
	select {
	case a := <-done:
		t.Fatalf("the call ended before the probe answered: %v %v", a.resp, a.err)
	case <-cancelled:
		t.Fatal("the hedge that sent nothing cancelled the probe")
	case err := <-rearmed:
		if err != nil {
			t.Fatal(err)
		}
	}
	close(release)
	a := <-done
	if a.err != nil || a.resp.StatusCode != http.StatusOK {
		t.Fatalf("the probe's call: %v %v, want its 200", a.resp, a.err)
	}
	if n := <-attempts; n != 1 {
		t.Errorf("the probe's call: the call observer was told of %d attempts, want the probe alone", n)
	}
	if s := c.Instances().List()[0].CurrentBreaker().Snapshot(); s.State != resilience.StateClosed {
		t.Fatalf("instance breaker %v after its probe's 200, want closed", s.State)
	}
	if got := metric(t, reg, "jfast_client_hedges_total"); got != 0 {
		t.Fatalf("hedges_total %v, want 0: the hedge sent nothing", got)
	}
	if hits := up.hits.Load(); hits != 2 {
		t.Fatalf("%d requests, want the first call's and the probe", hits)
	}
}

// countAttempts is a call observer that sends each call's attempts, as it
// is told them when the call ends, on attempts.
func countAttempts(attempts chan<- int) jhttp.CallObserver {
	return func(ctx context.Context, _, _ string) (context.Context, func(int, int, error)) {
		return ctx, func(_, n int, _ error) { attempts <- n }
	}
}

// A hedge's 503 that arrives while the first request is in flight is the
// call's answer when the first then gets none (its connection dropped) and
// no attempt is left: as without hedging, the upstream's last response is
// returned, not the later transport error. The instances' 1-failure
// breakers say when the loop has the 503: its report opens the hedge's
// instance's, which is logged.
func TestHedgeKeepsTheUpstreamsAnswer(t *testing.T) {
	t.Parallel()
	arrived, drop := make(chan int, 4), make(chan struct{})
	var once sync.Once
	free := func() { once.Do(func() { close(drop) }) }
	t.Cleanup(free) // before the servers stop, should the test fail first
	var calls atomic.Int32
	h := func(w http.ResponseWriter, r *http.Request, _ int) {
		n := int(calls.Add(1))
		arrived <- n
		if n > 1 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		<-drop
		conn, _, _ := w.(http.Hijacker).Hijack()
		_ = conn.Close()
	}
	_, u := replicas(2, t, h, h)
	u = noBudget(u)
	u.Attempts, u.BreakerFailures = 2, 1
	opened := make(openedLog, 2)
	c, clk, _ := hedgingClient(t, u, jhttp.WithLogger(slog.New(opened)))
	done := make(chan answer, 1)
	go func() {
		resp, err := c.Get(context.Background(), "/x")
		done <- answer{resp, err}
	}()
	<-arrived
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := clk.BlockUntilContext(ctx, 1); err != nil {
		t.Fatal("no hedge timer started")
	}
	clk.Advance(hedgeAfter)
	<-arrived // the hedge, answered 503
	<-opened  // and reported: the loop holds it
	free()    // the first request's connection is dropped
	a := <-done
	if a.err != nil || a.resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("%v %v, want the hedge's 503", a.resp, a.err)
	}
}

// openedLog is a log handler that tells of each breaker opened.
type openedLog chan struct{}

func (o openedLog) Enabled(context.Context, slog.Level) bool { return true }
func (o openedLog) WithAttrs([]slog.Attr) slog.Handler       { return o }
func (o openedLog) WithGroup(string) slog.Handler            { return o }
func (o openedLog) Handle(_ context.Context, r slog.Record) error {
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "to" && a.Value.String() == resilience.StateOpen.String() {
			select {
			case o <- struct{}{}:
			default: // the test waits for the first only
			}
		}
		return true
	})
	return nil
}
