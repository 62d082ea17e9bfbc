package http_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/jfastframework/jfast/framework/resilience"
	"github.com/jfastframework/jfast/jfasttest"
	jhttp "github.com/jfastframework/jfast/plugins/http"
)

// upstream is a scripted upstream on a real loopback socket: handle gets each
// request with its 1-based number.
type upstream struct {
	*httptest.Server
	hits  atomic.Int64
	conns atomic.Int64 // connections accepted
	open  gauge        // connections open now, and the peak

	mu       sync.Mutex
	requests []*http.Request
}

func newUpstream(t testing.TB, handle func(w http.ResponseWriter, r *http.Request, n int)) *upstream {
	t.Helper()
	u := &upstream{}
	u.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := int(u.hits.Add(1))
		u.mu.Lock()
		u.requests = append(u.requests, r.Clone(context.Background()))
		u.mu.Unlock()
		handle(w, r, n)
	}))
	u.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		switch s {
		case http.StateNew:
			u.conns.Add(1)
			u.open.enter()
		case http.StateClosed, http.StateHijacked:
			u.open.leave()
		}
	}
	u.Start()
	t.Cleanup(u.Close)
	return u
}

// request returns the i-th request the upstream received (0-based).
func (u *upstream) request(i int) *http.Request {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.requests[i]
}

// status answers every request with code.
func status(code int, headers ...string) func(http.ResponseWriter, *http.Request, int) {
	return func(w http.ResponseWriter, _ *http.Request, _ int) {
		for i := 0; i+1 < len(headers); i += 2 {
			w.Header().Set(headers[i], headers[i+1])
		}
		w.WriteHeader(code)
	}
}

// noBudget lets every retry start, so tests of the retry rules do not meet the
// budget.
func noBudget(u jhttp.Upstream) jhttp.Upstream {
	u.RetryBudgetRatio = 1
	u.RetryBudgetMinPerSecond = 1e6
	return u
}

// newClient returns a client on an auto-advancing test clock (backoff and
// Retry-After waits return at once and are recorded) with its own registry.
func newClient(t testing.TB, u jhttp.Upstream, opts ...jhttp.ClientOption) (*jhttp.ServiceClient, *resilience.TestClock, *prometheus.Registry) {
	t.Helper()
	clk := jfasttest.NewClock()
	clk.SetAutoAdvance(true)
	reg := prometheus.NewRegistry()
	if u.Name == "" {
		u.Name = "billing"
	}
	c, err := jhttp.NewClient(u, append([]jhttp.ClientOption{jhttp.WithClock(clk), jhttp.WithMetrics(reg)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c, clk, reg
}

// metric returns the value of the counter or gauge name whose labels include
// the given pairs; 0 when there is no such series.
func metric(t testing.TB, reg *prometheus.Registry, name string, labels ...string) float64 {
	t.Helper()
	return jfasttest.Metric(t, reg, name, labels...)
}

func ctxTimeout(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}
