package grpc_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/jfastframework/jfast/examples/inventory/shoppb"
	"github.com/jfastframework/jfast/framework/resilience"
	"github.com/jfastframework/jfast/jfasttest"
	jgrpc "github.com/jfastframework/jfast/plugins/grpc"
)

// The probe after a cool-down, against a port that refuses connections,
// reports the refusal (UNAVAILABLE, the transport's last error in the log
// text, "refused the connection" for the caller), not that the upstream
// did not answer in time: it waited for a connection, and none could be
// made.
func TestProbeOfARefusedPortSaysRefused(t *testing.T) {
	t.Parallel()
	addr := jfasttest.RefusedAddr(t) // connections are refused
	clock := jfasttest.NewClock()
	u := jgrpc.Upstream{Name: "example", Target: addr, PolicyConfig: resilience.PolicyConfig{Attempts: 1, Timeout: 300 * time.Millisecond}}
	u.BreakerFailures, u.BreakerCoolDown = 1, 10*time.Second
	c := newClient(t, u, jgrpc.WithClock(clock))
	stub := shoppb.NewInventoryClient(c)
	if _, err := stub.GetStock(ctxFor(t), &shoppb.GetStockRequest{Sku: "a"}); err == nil {
		t.Fatal("a call to a refused port succeeded")
	}
	if s := c.Breaker().Snapshot(); s.State != resilience.StateOpen {
		t.Fatalf("breaker %s after the refused call, want open", s.State)
	}
	clock.Advance(10 * time.Second)
	_, err := stub.GetStock(ctxFor(t), &shoppb.GetStockRequest{Sku: "a"})
	var e *jgrpc.Error
	if !errors.As(err, &e) || e.Kind != jgrpc.KindStatus || e.Code != codes.Unavailable {
		t.Fatalf("the probe: %#v (%v), want UNAVAILABLE as a status", err, err)
	}
	if !strings.Contains(err.Error(), "connection refused") || strings.Contains(err.Error(), "in time") {
		t.Errorf("the probe's error %q, want the connection's refusal, not a timeout", err)
	}
	p := e.Problem()
	if !strings.Contains(p.Detail, "refused the connection") || strings.Contains(p.Detail, addr) {
		t.Errorf("the probe's problem detail %q, want the refusal without the address", p.Detail)
	}
	if s := c.Breaker().Snapshot(); s.State != resilience.StateOpen {
		t.Fatalf("breaker %s after the refused probe, want open again", s.State)
	}
}
