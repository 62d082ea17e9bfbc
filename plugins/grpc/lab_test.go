package grpc_test

import (
	"context"
	"errors"
	"io"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/jfastframework/jfast/examples/inventory/shoppb"
	"github.com/jfastframework/jfast/framework/resilience"
	"github.com/jfastframework/jfast/jfasttest"
	jgrpc "github.com/jfastframework/jfast/plugins/grpc"
)

// The tests of this file reproduce, on real loopback sockets, what the
// inventory lab shows of a gRPC client that retries only what is safe.

// lab is the retry budget's min_per_second of the tests that expect every
// attempt of a lone call: the lab's client has no retry budget, and jfast's
// default (1 retry a second while the ratio is not met) lets a lone call
// retry once.
const lab = 10

// TestReserveIsRepeatedOnlyWhenListedAsIdempotent: Reserve takes the items and
// then answers UNAVAILABLE. Listed as idempotent (wrongly), it reserves three
// times; with the default list, which names GetStock only, it reserves once
// and the caller gets the error.
func TestReserveIsRepeatedOnlyWhenListedAsIdempotent(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name         string
		idempotent   []string
		reservations int32
	}{
		{"listed", []string{getStock, reserve}, 3},
		{"default list", []string{getStock}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			inv := &inventory{reserveFails: true}
			c := newClient(t, jgrpc.Upstream{Target: serveInventory(t, inv), IdempotentMethods: tc.idempotent, PolicyConfig: resilience.PolicyConfig{BackoffBase: time.Millisecond, RetryBudgetMinPerSecond: lab}})
			_, err := shoppb.NewInventoryClient(c).Reserve(ctxFor(t), &shoppb.ReserveRequest{Sku: "sku-42", Quantity: 1})
			var e *jgrpc.Error
			if !errors.As(err, &e) || e.Code != codes.Unavailable {
				t.Fatalf("err = %v, want an UNAVAILABLE *grpc.Error", err)
			}
			if got := inv.reservations.Load(); got != tc.reservations {
				t.Fatalf("reservations = %d, want %d", got, tc.reservations)
			}
			if e.Attempts != int(tc.reservations) {
				t.Fatalf("Attempts = %d, want %d", e.Attempts, tc.reservations)
			}
		})
	}
}

// TestGetStockIsRetriedAfterUnavailable: GetStock answers UNAVAILABLE once,
// then 7; the caller sees 7.
func TestGetStockIsRetriedAfterUnavailable(t *testing.T) {
	t.Parallel()
	inv := &inventory{}
	inv.failGetStock.Store(1)
	c := newClient(t, jgrpc.Upstream{Target: serveInventory(t, inv), IdempotentMethods: []string{getStock}, PolicyConfig: resilience.PolicyConfig{BackoffBase: time.Millisecond}})
	stock, err := shoppb.NewInventoryClient(c).GetStock(ctxFor(t), &shoppb.GetStockRequest{Sku: "sku-42"})
	if err != nil {
		t.Fatal(err)
	}
	if stock.GetAvailable() != 7 || inv.getStocks.Load() != 2 {
		t.Fatalf("available = %d after %d calls, want 7 after 2", stock.GetAvailable(), inv.getStocks.Load())
	}
}

// TestRetryGetsOnlyWhatIsLeftOfTheTimeout: with timeout = 3s, a first
// attempt that fails after 1.4 s (of the client's test clock) leaves the
// retry at most 1.6 s, which is the deadline the server sees (the retry may
// start: its wait and another 1.4 s fit in what is left), and the retry,
// slower, ends with DEADLINE_EXCEEDED after 2 attempts. The time spent is on
// the test clock: how loaded the machine is changes nothing; only the
// retry's last 1.6 s are real (gRPC sends what is left as grpc-timeout).
func TestRetryGetsOnlyWhatIsLeftOfTheTimeout(t *testing.T) {
	t.Parallel()
	clock := jfasttest.NewClock()
	clock.SetAutoAdvance(true) // backoff waits pass at once
	const first, left = 1400 * time.Millisecond, 1600 * time.Millisecond
	inv := &inventory{getStockHook: func(ctx context.Context, n int) error {
		if n == 0 {
			clock.Advance(first)
			return status.Error(codes.Unavailable, "slow and failing")
		}
		<-ctx.Done() // what the retry was left of timeout, in real time
		return status.FromContextError(ctx.Err()).Err()
	}}
	c := newClient(t, jgrpc.Upstream{Target: serveInventory(t, inv), IdempotentMethods: []string{getStock}, PolicyConfig: resilience.PolicyConfig{Timeout: 3 * time.Second, BackoffBase: time.Millisecond}}, jgrpc.WithClock(clock))
	_, err := shoppb.NewInventoryClient(c).GetStock(ctxFor(t), &shoppb.GetStockRequest{Sku: "sku-42"})
	var e *jgrpc.Error
	if !errors.As(err, &e) || e.Code != codes.DeadlineExceeded || e.Kind != jgrpc.KindTimeout || e.Attempts != 2 {
		t.Fatalf("err = %#v, want DEADLINE_EXCEEDED after 2 attempts", err)
	}
	d := inv.lastDeadlines()
	if len(d) != 2 {
		t.Fatalf("the server saw %d attempts, want 2", len(d))
	}
	if d[0] <= 0 || d[0] > 3*time.Second || d[1] <= 0 || d[1] > left {
		t.Fatalf("deadlines on arrival = %v, want at most 3s then at most what was left (%s)", d, left)
	}
	if status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("status.Code(err) = %s, want DeadlineExceeded", status.Code(err))
	}
	// Counted once, as the call's last attempt: a hang with nothing
	// answered since the call was sent, which opens the breaker.
	if s := c.Breaker().Snapshot(); s.State != resilience.StateOpen || s.Opens != 1 {
		t.Fatalf("breaker = %+v, want opened once by the retry's hang", s)
	}
}

// TestNoRetryThatCannotFinish: the one deadline rule of every jfast client
// (docs/resilience.md): a retry starts only if its wait and another attempt
// as long as the last fit in what is left. A first attempt that fails after
// 2 s of a 3 s timeout leaves 1 s: no retry, the call returns UNAVAILABLE.
func TestNoRetryThatCannotFinish(t *testing.T) {
	t.Parallel()
	clock := jfasttest.NewClock()
	clock.SetAutoAdvance(true)
	inv := &inventory{getStockHook: func(context.Context, int) error {
		clock.Advance(2 * time.Second)
		return status.Error(codes.Unavailable, "slow and failing")
	}}
	c := newClient(t, jgrpc.Upstream{Target: serveInventory(t, inv), IdempotentMethods: []string{getStock}, PolicyConfig: resilience.PolicyConfig{Timeout: 3 * time.Second, BackoffBase: time.Millisecond}}, jgrpc.WithClock(clock))
	_, err := shoppb.NewInventoryClient(c).GetStock(ctxFor(t), &shoppb.GetStockRequest{Sku: "sku-42"})
	var e *jgrpc.Error
	if !errors.As(err, &e) || e.Code != codes.Unavailable || e.Attempts != 1 {
		t.Fatalf("err = %#v, want UNAVAILABLE after 1 attempt", err)
	}
	if n := inv.getStocks.Load(); n != 1 {
		t.Fatalf("the server saw %d attempts, want 1", n)
	}
}

// TestAuditClientSharesTheChannelAndMakesOneAttempt: two clients of one
// pool to the same target, "orders" retrying GetStock and "audit" with
// attempts = 1, share one channel; against a failing inventory orders makes
// three attempts and audit exactly one.
func TestAuditClientSharesTheChannelAndMakesOneAttempt(t *testing.T) {
	t.Parallel()
	inv := &inventory{}
	inv.failGetStock.Store(100)
	target := serveInventory(t, inv)
	pool := jgrpc.NewPool()
	t.Cleanup(func() { _ = pool.Close() })
	orders := newClient(t, jgrpc.Upstream{Name: "orders", Target: target, IdempotentMethods: []string{getStock}, PolicyConfig: resilience.PolicyConfig{BackoffBase: time.Millisecond, RetryBudgetMinPerSecond: lab}}, jgrpc.WithPool(pool))
	audit := newClient(t, jgrpc.Upstream{Name: "audit", Target: target, PolicyConfig: resilience.PolicyConfig{Attempts: 1}}, jgrpc.WithPool(pool))
	if pool.Len() != 1 {
		t.Fatalf("channels = %d, want 1 shared", pool.Len())
	}
	ctx := ctxFor(t)
	if _, err := shoppb.NewInventoryClient(orders).GetStock(ctx, &shoppb.GetStockRequest{Sku: "a"}); status.Code(err) != codes.Unavailable {
		t.Fatalf("orders: err = %v", err)
	}
	if n := inv.getStocks.Load(); n != 3 {
		t.Fatalf("orders made %d attempts, want 3", n)
	}
	if _, err := shoppb.NewInventoryClient(audit).GetStock(ctx, &shoppb.GetStockRequest{Sku: "a"}); status.Code(err) != codes.Unavailable {
		t.Fatalf("audit: err = %v", err)
	}
	if n := inv.getStocks.Load() - 3; n != 1 {
		t.Fatalf("audit made %d attempts, want 1", n)
	}
	// Closing a client of a shared pool leaves the channel to the others.
	if err := audit.Close(); err != nil {
		t.Fatal(err)
	}
	inv.failGetStock.Store(0)
	if _, err := shoppb.NewInventoryClient(orders).GetStock(ctx, &shoppb.GetStockRequest{Sku: "a"}); err != nil {
		t.Fatalf("orders after audit closed: %v", err)
	}
}

// TestChannelsAreSharedOnlyWhenTheirSettingsAreIdentical: identical settings
// share a channel; another target, compression, TLS setting or dial options
// each get their own.
func TestChannelsAreSharedOnlyWhenTheirSettingsAreIdentical(t *testing.T) {
	t.Parallel()
	pool := jgrpc.NewPool()
	t.Cleanup(func() { _ = pool.Close() })
	add := func(u jgrpc.Upstream, opts ...jgrpc.ClientOption) {
		t.Helper()
		c, err := jgrpc.NewClient(u, append(opts, jgrpc.WithPool(pool))...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
	}
	base := jgrpc.Upstream{Target: "127.0.0.1:9", Insecure: true, PolicyConfig: resilience.PolicyConfig{Attempts: 1}}
	add(base)
	add(jgrpc.Upstream{Target: "127.0.0.1:9", Insecure: true, IdempotentMethods: []string{getStock}, Headers: map[string]string{"x-api-key": "k"}, ForwardAuthorization: true, PolicyConfig: resilience.PolicyConfig{Attempts: 3, Timeout: 5 * time.Second}})
	if pool.Len() != 1 {
		t.Fatalf("channels = %d after two clients that differ only above the channel, want 1", pool.Len())
	}
	steps := []struct {
		name string
		u    jgrpc.Upstream
		opts []jgrpc.ClientOption
	}{
		{"another target", jgrpc.Upstream{Target: "127.0.0.1:10", Insecure: true, PolicyConfig: resilience.PolicyConfig{Attempts: 1}}, nil},
		{"compression", jgrpc.Upstream{Target: "127.0.0.1:9", Insecure: true, Compression: "gzip", PolicyConfig: resilience.PolicyConfig{Attempts: 1}}, nil},
		{"TLS", jgrpc.Upstream{Target: "127.0.0.1:9", PolicyConfig: resilience.PolicyConfig{Attempts: 1}}, nil},
		{"TLS with a server name", jgrpc.Upstream{Target: "127.0.0.1:9", ServerName: "inventory.internal", PolicyConfig: resilience.PolicyConfig{Attempts: 1}}, nil},
		{"dial options", base, []jgrpc.ClientOption{jgrpc.WithDialOptions(grpcUserAgent("audit"))}},
	}
	for i, s := range steps {
		add(s.u, s.opts...)
		if pool.Len() != i+2 {
			t.Fatalf("%s: channels = %d, want %d (a channel of its own)", s.name, pool.Len(), i+2)
		}
	}
	add(jgrpc.Upstream{Target: "127.0.0.1:10", Insecure: true, PolicyConfig: resilience.PolicyConfig{Attempts: 1}})
	if pool.Len() != len(steps)+1 {
		t.Fatalf("a second client of the other target made a channel: %d", pool.Len())
	}
}

// TestStreamRestartDuplicatesWhatWasDelivered: Export sends 1, 2 and fails.
// By default the caller gets 1, 2 and the error; with the method in
// restart_streams, the stream opens again and the caller gets 1, 2, 1, 2, 3.
func TestStreamRestartDuplicatesWhatWasDelivered(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		restart []string
		want    []int64
		code    codes.Code
	}{
		{"default", nil, []int64{1, 2}, codes.Unavailable},
		{"restart_streams", []string{export}, []int64{1, 2, 1, 2, 3}, codes.OK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			inv := &inventory{failExportOnce: true}
			u := jgrpc.Upstream{Target: serveInventory(t, inv), PolicyConfig: resilience.PolicyConfig{Attempts: 1, BackoffBase: time.Millisecond, RetryBudgetMinPerSecond: lab}}
			if tc.restart != nil {
				u.Attempts, u.RestartStreams = 3, tc.restart
			}
			c := newClient(t, u)
			stream, err := shoppb.NewInventoryClient(c).Export(ctxFor(t), &shoppb.ExportRequest{})
			if err != nil {
				t.Fatal(err)
			}
			var got []int64
			for {
				item, err := stream.Recv()
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					if status.Code(err) != tc.code {
						t.Fatalf("err = %v, want %s", err, tc.code)
					}
					var e *jgrpc.Error
					if !errors.As(err, &e) || e.Upstream != "upstream" {
						t.Fatalf("err = %#v, want a *grpc.Error", err)
					}
					break
				}
				got = append(got, item.GetSeq())
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("items = %v, want %v", got, tc.want)
			}
			if c.Breaker().Snapshot().WindowCalls != 1 {
				t.Fatalf("the breaker counted %d calls, want the stream once", c.Breaker().Snapshot().WindowCalls)
			}
		})
	}
}

// TestStreamRestartNeedsTimeLeft: a restart is the policy loop's retry
// (resilience.Run.Again), bounded by stream_timeout: Export fails after 1,
// 2 once 20 s of a 30 s stream_timeout have passed on the client's clock,
// and another attempt as long as that one cannot end before the deadline:
// the caller gets 1, 2 and UNAVAILABLE after one attempt, no restart.
func TestStreamRestartNeedsTimeLeft(t *testing.T) {
	t.Parallel()
	inv := &inventory{failExportOnce: true}
	u := jgrpc.Upstream{Target: serveInventory(t, inv), StreamTimeout: 30 * time.Second, RestartStreams: []string{export},
		PolicyConfig: resilience.PolicyConfig{Attempts: 3, BackoffBase: time.Millisecond, RetryBudgetMinPerSecond: lab}}
	clock := jfasttest.NewClock()
	clock.SetAutoAdvance(true) // a backoff wait passes at once
	c := newClient(t, u, jgrpc.WithClock(clock))
	stream, err := shoppb.NewInventoryClient(c).Export(ctxFor(t), &shoppb.ExportRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var got []int64
	for range 2 {
		item, err := stream.Recv()
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, item.GetSeq())
	}
	clock.Advance(20 * time.Second)
	_, err = stream.Recv()
	var e *jgrpc.Error
	if !errors.As(err, &e) || e.Code != codes.Unavailable || e.Attempts != 1 {
		t.Fatalf("err = %v, want UNAVAILABLE after 1 attempt", err)
	}
	if !slices.Equal(got, []int64{1, 2}) || inv.exports.Load() != 1 {
		t.Fatalf("items = %v from %d streams, want 1, 2 from one", got, inv.exports.Load())
	}
}

// TestSilentServerIsCutAtTimeout: a server that accepts connections and
// never answers (no HTTP/2 handshake) is cut at timeout with
// DEADLINE_EXCEEDED: a hang with nothing answered meanwhile, which opens the
// breaker (the silence rule).
func TestSilentServerIsCutAtTimeout(t *testing.T) {
	t.Parallel()
	c := newClient(t, jgrpc.Upstream{Target: silentServer(t), PolicyConfig: resilience.PolicyConfig{Timeout: 200 * time.Millisecond, Attempts: 1}})
	start := time.Now()
	_, err := shoppb.NewInventoryClient(c).GetStock(ctxFor(t), &shoppb.GetStockRequest{Sku: "a"})
	var e *jgrpc.Error
	if !errors.As(err, &e) || e.Kind != jgrpc.KindTimeout {
		t.Fatalf("err = %v, want a timeout", err)
	}
	// A bound that only a hang breaks, not a speed target.
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("the call took %s with timeout = 200ms", d)
	}
	if s := c.Breaker().Snapshot(); s.State != resilience.StateOpen || s.Opens != 1 {
		t.Fatalf("breaker = %+v, want opened once by the silent call", s)
	}
}

// TestRetryBudgetBucket: retry_budget = "bucket" against an inventory whose
// GetStock always answers UNAVAILABLE, the breaker out of the way: 50
// sequential calls of three attempts make 64 attempts (50 first attempts, 10
// retries from the initial tokens, 4 earned by the calls), as the http
// client's bucket does; the window kind with its lone-call allowance lifted
// makes all 150.
func TestRetryBudgetBucket(t *testing.T) {
	t.Parallel()
	noBreaker := resilience.BreakerConfig{BreakerFailures: 1000, BreakerMinimumCalls: 1000}
	for _, tc := range []struct {
		name     string
		up       jgrpc.Upstream
		attempts int32
	}{
		{"bucket", jgrpc.Upstream{PolicyConfig: resilience.PolicyConfig{RetryBudget: jgrpc.BudgetBucket, BreakerConfig: noBreaker}}, 64},
		{"window, no limit", jgrpc.Upstream{PolicyConfig: resilience.PolicyConfig{RetryBudgetRatio: 1, RetryBudgetMinPerSecond: 1000, BreakerConfig: noBreaker}}, 150},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			inv := &inventory{}
			inv.failGetStock.Store(1 << 20)
			u := tc.up
			u.Target, u.IdempotentMethods, u.BackoffBase = serveInventory(t, inv), []string{getStock}, time.Millisecond
			clock := jfasttest.NewClock()
			clock.SetAutoAdvance(true) // backoff waits pass at once
			c := newClient(t, u, jgrpc.WithClock(clock))
			stub := shoppb.NewInventoryClient(c)
			for range 50 {
				if _, err := stub.GetStock(ctxFor(t), &shoppb.GetStockRequest{Sku: "a"}); status.Code(err) != codes.Unavailable {
					t.Fatalf("err = %v, want UNAVAILABLE", err)
				}
			}
			if got := inv.getStocks.Load(); got != tc.attempts {
				t.Fatalf("%d attempts for 50 calls, want %d", got, tc.attempts)
			}
		})
	}
}

// TestStreamTimeoutAfterMessagesIsNoHang: a stream that delivered a message
// and then runs into stream_timeout (a long watch) ended by its own bound
// while the upstream was answering: the breaker counts nothing. One that
// delivered nothing before stream_timeout is a hang with nothing answered,
// which opens the breaker (the silence rule), as for a unary call.
func TestStreamTimeoutAfterMessagesIsNoHang(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		items int64
		want  resilience.State
		opens uint64
	}{
		{"after a message", 1, resilience.StateClosed, 0},
		{"before any message", 0, resilience.StateOpen, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			inv := &inventory{holding: true, holdExport: tc.items}
			c := newClient(t, jgrpc.Upstream{Target: serveInventory(t, inv), StreamTimeout: 200 * time.Millisecond, PolicyConfig: resilience.PolicyConfig{Attempts: 1}})
			stream, err := shoppb.NewInventoryClient(c).Export(ctxFor(t), &shoppb.ExportRequest{})
			if err != nil {
				t.Fatal(err)
			}
			var got int64
			for {
				if _, err = stream.Recv(); err != nil {
					break
				}
				got++
			}
			if got != tc.items || status.Code(err) != codes.DeadlineExceeded {
				t.Fatalf("%d items, then %v; want %d, then DEADLINE_EXCEEDED", got, err, tc.items)
			}
			if s := c.Breaker().Snapshot(); s.State != tc.want || s.Opens != tc.opens {
				t.Fatalf("breaker = %+v, want %s after %d opens", s, tc.want, tc.opens)
			}
		})
	}
}
