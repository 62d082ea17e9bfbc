package grpc_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/jfastframework/jfast/examples/inventory/shoppb"
	"github.com/jfastframework/jfast/framework/resilience"
	jgrpc "github.com/jfastframework/jfast/plugins/grpc"
	"github.com/jfastframework/jfast/problem"
)

// A DEADLINE_EXCEEDED the upstream sends back while the call still has time
// (its own dependency timed out) is an answer: the upstream is alive. It is
// a status (KindStatus), not the client's timeout; the breaker counts it as
// one failure among the others, never as a hang that opens it at once; and
// it is not retried, even for an idempotent method. Both from a plain gRPC
// server and from a jfast service whose method answers a 504 problem.
func TestUpstreamDeadlineExceededIsAnAnswer(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		target func(t *testing.T) (string, func() int)
		sku    string
	}{
		{"grpc server", func(t *testing.T) (string, func() int) {
			inv := &inventory{getStockHook: func(context.Context, int) error {
				return status.Error(codes.DeadlineExceeded, "the warehouse did not answer in time")
			}}
			return serveInventory(t, inv), func() int { return int(inv.getStocks.Load()) }
		}, "a"},
		{"jfast service answering 504", func(t *testing.T) (string, func() int) {
			inv := &servedInventory{}
			_, conn := grpcService(t, "", "", inv)
			return conn.Target(), func() int {
				inv.mu.Lock()
				defer inv.mu.Unlock()
				return len(inv.ids)
			}
		}, "dependency-timeout"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			target, served := tc.target(t)
			c := newClient(t, jgrpc.Upstream{Name: "inv", Target: target, IdempotentMethods: []string{getStock}})
			stub := shoppb.NewInventoryClient(c)
			failures := c.Upstream().BreakerFailures // 5 by default
			for i := 1; i <= failures; i++ {
				_, err := stub.GetStock(ctxFor(t), &shoppb.GetStockRequest{Sku: tc.sku})
				var e *jgrpc.Error
				if !errors.As(err, &e) || e.Kind != jgrpc.KindStatus || e.Code != codes.DeadlineExceeded || e.Attempts != 1 {
					t.Fatalf("call %d: %#v, want the upstream's DEADLINE_EXCEEDED as a status, one attempt", i, err)
				}
				if p, ok := problem.As(err); !ok || p.Status != http.StatusServiceUnavailable || strings.Contains(p.Detail, "did not answer") {
					t.Fatalf("call %d: problem %+v, want a 503 that does not say the upstream did not answer", i, p)
				}
				s := c.Breaker().Snapshot()
				if i < failures && (s.State != resilience.StateClosed || s.Consecutive != i) {
					t.Fatalf("after %d answered DEADLINE_EXCEEDED: breaker %+v, want closed with %d failures", i, s, i)
				}
				if i == failures && s.State != resilience.StateOpen {
					t.Fatalf("after %d answered DEADLINE_EXCEEDED: breaker %s, want open by breaker_failures", i, s.State)
				}
			}
			if got := served(); got != failures {
				t.Errorf("the upstream served %d calls, want %d (each call reached it once)", got, failures)
			}
		})
	}
}

// A stream that delivered a message and then got DEADLINE_EXCEEDED from the
// upstream, well before stream_timeout, is a failure the breaker counts
// and a status, not a stream that reached its own bound.
func TestStreamDeadlineExceededFromUpstreamCounts(t *testing.T) {
	t.Parallel()
	inv := &inventory{failExport: status.Error(codes.DeadlineExceeded, "the warehouse did not answer in time")}
	c := newClient(t, jgrpc.Upstream{Name: "inv", Target: serveInventory(t, inv), PolicyConfig: resilience.PolicyConfig{Attempts: 1}})
	st, err := shoppb.NewInventoryClient(c).Export(ctxFor(t), &shoppb.ExportRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Recv(); err != nil {
		t.Fatalf("the first item: %v", err)
	}
	_, err = st.Recv()
	var e *jgrpc.Error
	if errors.Is(err, io.EOF) || !errors.As(err, &e) || e.Kind != jgrpc.KindStatus || e.Code != codes.DeadlineExceeded {
		t.Fatalf("after the first item: %#v, want the upstream's DEADLINE_EXCEEDED as a status", err)
	}
	if s := c.Breaker().Snapshot(); s.State != resilience.StateClosed || s.Consecutive != 1 || s.WindowFailures != 1 {
		t.Fatalf("breaker %+v, want closed with one failure", s)
	}
}
