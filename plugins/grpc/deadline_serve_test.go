package grpc_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/jfastframework/jfast/examples/inventory/shoppb"
	"github.com/jfastframework/jfast/jfasttest"
)

// Export, served by the tests' service, sends an item every 10 ms until a
// send fails, and then reports success all the same: a stream handler that
// ignores its context and its errors.
func (s *servedInventory) Export(_ *shoppb.ExportRequest, st grpc.ServerStreamingServer[shoppb.Item]) error {
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for seq := int64(1); ; seq++ {
		if err := st.Send(&shoppb.Item{Seq: seq, Sku: "a", Available: 7}); err != nil {
			return nil
		}
		<-tick.C
	}
}

// stubbornSetup starts a service whose handlers "stubborn" and
// "stubborn-panic" ignore their context until the test releases them, with
// request_timeout 2s (grpcService's) and room for one call at a time.
func stubbornSetup(t *testing.T) (*jfasttest.Service, shoppb.InventoryClient, *servedInventory) {
	t.Helper()
	inv := &servedInventory{hold: make(chan struct{}), returned: make(chan struct{}, 1)}
	svc, conn := grpcService(t, `
[app.overload]
initial_limit = 1
min_limit = 1
max_limit = 1
queue = 0
`, "", inv)
	return svc, shoppb.NewInventoryClient(conn), inv
}

// waitLog waits until the service's log holds want.
func waitLog(t *testing.T, svc *jfasttest.Service, want string) {
	t.Helper()
	if err := svc.WaitLogs(ctxFor(t), func(logs string) bool { return strings.Contains(logs, want) }); err != nil {
		t.Fatalf("the log never held %q:\n%s", want, svc.Logs())
	}
}

// accessLine is the access log line of the only call to method.
func accessLine(t *testing.T, svc *jfasttest.Service, method string) string {
	t.Helper()
	waitLog(t, svc, "method="+method+" code=")
	return grepLines(svc.Logs(), "method="+method+" code=")
}

// A unary handler that ignores its context does not hold its caller: at
// the call's deadline (request_timeout, or the caller's sooner
// grpc-timeout) the caller gets DEADLINE_EXCEEDED, the access log and the
// metrics say DEADLINE_EXCEEDED with the time it took, and the handler's
// late result is discarded with a WARN line. Until it returns, the handler
// keeps its place in the concurrency limit.
func TestUnaryAnsweredAtItsDeadline(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		timeout  time.Duration // the caller's; 0: none, request_timeout (2s) bounds the call
		deadline time.Duration
	}{
		{"request_timeout", 0, 2 * time.Second},
		{"caller's grpc-timeout", 500 * time.Millisecond, 500 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			svc, stub, inv := stubbornSetup(t)
			ctx := t.Context()
			if tc.timeout > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, tc.timeout)
				defer cancel()
			}
			start := time.Now()
			_, err := stub.GetStock(ctx, &shoppb.GetStockRequest{Sku: "stubborn"})
			took := time.Since(start)
			if status.Code(err) != codes.DeadlineExceeded {
				t.Fatalf("the caller got %v, want DEADLINE_EXCEEDED", err)
			}
			if took < tc.deadline-50*time.Millisecond || took > tc.deadline+time.Second {
				t.Fatalf("the caller waited %s, want about %s (the deadline)", took, tc.deadline)
			}
			line := accessLine(t, svc, getStock)
			if !strings.Contains(line, "code=DEADLINE_EXCEEDED") {
				t.Fatalf("access log %q, want DEADLINE_EXCEEDED", line)
			}
			d, err := time.ParseDuration(strings.TrimSpace(strings.Fields(line[strings.Index(line, "duration=")+len("duration="):])[0]))
			if err != nil || d < tc.deadline-50*time.Millisecond || d > tc.deadline+time.Second {
				t.Fatalf("access log %q: duration %s (%v), want about %s", line, d, err, tc.deadline)
			}
			// The handler still runs: the one place in the limit is its.
			_, err = stub.GetStock(ctxFor(t), &shoppb.GetStockRequest{Sku: "a"})
			if status.Code(err) != codes.ResourceExhausted {
				t.Fatalf("a call while the answered handler still runs: %v, want RESOURCE_EXHAUSTED", err)
			}
			close(inv.hold)
			<-inv.returned
			waitLog(t, svc, "rpc handler returned after its call was answered at its deadline")
			if _, err := stub.GetStock(ctxFor(t), &shoppb.GetStockRequest{Sku: "a"}); err != nil {
				t.Fatalf("a call once the handler returned: %v", err)
			}
			want := `jfast_grpc_server_handled_total{code="DEADLINE_EXCEEDED",method="/shop.Inventory/GetStock"} 1`
			if metrics := svc.Get(t, "/metrics").String(); !strings.Contains(metrics, want) || strings.Contains(metrics, `code="OK",method="/shop.Inventory/GetStock"} 2`) {
				t.Errorf("/metrics lacks %s or counts the late result:\n%s", want, grepLines(metrics, "jfast_grpc_server_handled"))
			}
		})
	}
}

// A handler that panics after its call was answered at its deadline is
// recovered and logged with its stack; the caller's answer stays
// DEADLINE_EXCEEDED and the service serves on.
func TestUnaryPanicAfterItsDeadline(t *testing.T) {
	t.Parallel()
	svc, stub, inv := stubbornSetup(t)
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	if _, err := stub.GetStock(ctx, &shoppb.GetStockRequest{Sku: "stubborn-panic"}); status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("the caller got %v, want DEADLINE_EXCEEDED", err)
	}
	// The caller's clock started first: release the handler once the
	// server answered too.
	line := accessLine(t, svc, getStock)
	close(inv.hold)
	<-inv.returned
	waitLog(t, svc, "rpc handler returned after its call was answered")
	for _, want := range []string{"panic serving rpc", "the late shelf fell", "goroutine"} {
		if !strings.Contains(svc.Logs(), want) {
			t.Errorf("logs lack %q", want)
		}
	}
	if !strings.Contains(line, "code=DEADLINE_EXCEEDED") || strings.Count(svc.Logs(), "msg=rpc service=") != 1 {
		t.Errorf("access log %q, want one DEADLINE_EXCEEDED line", line)
	}
	if _, err := stub.GetStock(ctxFor(t), &shoppb.GetStockRequest{Sku: "a"}); err != nil {
		t.Fatalf("a call after the late panic: %v", err)
	}
}

// A stream whose handler ignores its context stops at its deadline: its
// sends fail then, and the call ends DEADLINE_EXCEEDED for the caller, in
// the access log and in the metrics, although the handler returned nil.
func TestStreamEndsAtItsDeadline(t *testing.T) {
	t.Parallel()
	svc, stub, _ := stubbornSetup(t)
	start := time.Now()
	st, err := stub.Export(t.Context(), &shoppb.ExportRequest{})
	if err != nil {
		t.Fatal(err)
	}
	items := 0
	for {
		if _, err = st.Recv(); err != nil {
			break
		}
		items++
	}
	if took := time.Since(start); status.Code(err) != codes.DeadlineExceeded || items == 0 || took < 1950*time.Millisecond || took > 3*time.Second {
		t.Fatalf("after %d items and %s: %v, want DEADLINE_EXCEEDED at about 2s (request_timeout)", items, took, err)
	}
	if line := accessLine(t, svc, export); !strings.Contains(line, "code=DEADLINE_EXCEEDED") {
		t.Fatalf("access log %q, want DEADLINE_EXCEEDED", line)
	}
	want := `jfast_grpc_server_handled_total{code="DEADLINE_EXCEEDED",method="/shop.Inventory/Export"} 1`
	if metrics := svc.Get(t, "/metrics").String(); !strings.Contains(metrics, want) {
		t.Errorf("/metrics lacks %s:\n%s", want, grepLines(metrics, "jfast_grpc_server_handled"))
	}
}
