package http

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"sync"
	"testing"
	"time"

	"github.com/jfastframework/jfast/framework/resilience"
)

// heldPool returns a client of u (pool_timeout 100 ms, max_concurrent 1,
// one attempt) whose only connection a request that bypasses the bulkhead
// holds, and what lets that request go (once: the test's cleanup, or the
// test itself), which fails the test if the held request failed.
func heldPool(t *testing.T, u Upstream) (*ServiceClient, func()) {
	t.Helper()
	release, arrived := make(chan struct{}), make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/hold" {
			close(arrived)
			select {
			case <-release:
			case <-r.Context().Done():
			}
		}
	}))
	t.Cleanup(srv.Close)
	u.Name, u.BaseURL, u.PoolTimeout = "billing", srv.URL, 100*time.Millisecond
	u.MaxConcurrent, u.Attempts = 1, 1
	c, err := NewClient(u)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })

	held := make(chan error, 1)
	go func() {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+"/hold", nil)
		resp, err := c.raw.RoundTrip(req)
		if err == nil {
			_ = resp.Body.Close()
		}
		held <- err
	}()
	<-arrived // the held request owns the only connection
	var once sync.Once
	let := func() {
		once.Do(func() {
			close(release)
			if err := <-held; err != nil {
				t.Error(err)
			}
		})
	}
	t.Cleanup(let)
	return c, let
}

// pool_timeout: with the only connection held by a request that bypasses the
// bulkhead, a call waits pool_timeout for a connection and fails as a timeout.
func TestPoolTimeout(t *testing.T) {
	t.Parallel()
	c, release := heldPool(t, Upstream{})
	start := time.Now()
	_, err := c.Get(context.Background(), "/x")
	elapsed := time.Since(start)
	var to *UpstreamTimeout
	if !errors.As(err, &to) || !errors.Is(err, errPoolTimeout) {
		t.Fatalf("err = %v (%T), want UpstreamTimeout wrapping errPoolTimeout", err, err)
	}
	// errPoolTimeout, not the total (10s), says pool_timeout ended the wait;
	// the wait is due pool_timeout after the attempt starts, never sooner.
	if elapsed < 100*time.Millisecond {
		t.Errorf("took %s, less than pool_timeout (100ms)", elapsed)
	}
	release()
}

// A call cut by pool_timeout while its caller still waits is a failure for
// the breaker (docs/http.md, "The circuit breaker"), though the pool timer
// ends it by cancelling its context (a cancellation is otherwise no
// evidence): a 1-failure breaker opens.
func TestPoolTimeoutCountsForTheBreaker(t *testing.T) {
	t.Parallel()
	c, release := heldPool(t, Upstream{PolicyConfig: resilience.PolicyConfig{BreakerConfig: resilience.BreakerConfig{BreakerFailures: 1}}})
	_, err := c.Get(context.Background(), "/x") // no deadline: the caller waits on
	if !errors.Is(err, errPoolTimeout) {
		t.Fatalf("err = %v, want the pool timeout", err)
	}
	if s := c.Breaker().Snapshot(); s.State != resilience.StateOpen {
		t.Fatalf("breaker %+v after a pool timeout with the caller waiting, want open", s)
	}
	release()
}

// The pool timer of a pooled attempt stays set across attempts: an attempt
// that begins while it is set for later (an earlier attempt's, of a client
// with a longer pool_timeout) sets it for its own due time, and one that
// begins while it is set for sooner is ended at its own due time, never
// before.
func TestPoolTimerAcrossAttempts(t *testing.T) {
	t.Parallel()
	a := attemptPool.New().(*attempt)
	never := func() { t.Error("an attempt that got its connection was ended by the pool timer") }

	// Set for an hour by an attempt that got its connection at once.
	a.begin(never, time.Hour, time.Now())
	a.gotConn(httptrace.GotConnInfo{})
	a.end()
	fired := make(chan time.Time, 1)
	due := time.Now().Add(50 * time.Millisecond)
	a.begin(func() { fired <- time.Now() }, 50*time.Millisecond, due.Add(-50*time.Millisecond))
	waitPoolTimeout(t, a, fired, due)
	a.end()

	// Set for 30 ms by an attempt that got its connection; the next one's
	// due time is later: the timer fires first, and is set again.
	a.begin(never, 30*time.Millisecond, time.Now())
	a.gotConn(httptrace.GotConnInfo{})
	a.end()
	due = time.Now().Add(80 * time.Millisecond)
	a.begin(func() { fired <- time.Now() }, 80*time.Millisecond, due.Add(-80*time.Millisecond))
	waitPoolTimeout(t, a, fired, due)
	a.end()
}

// waitPoolTimeout waits for a's pool timeout to end its call, and checks it
// came no sooner than due.
func waitPoolTimeout(t *testing.T, a *attempt, fired <-chan time.Time, due time.Time) {
	t.Helper()
	select {
	case at := <-fired:
		if at.Before(due) {
			t.Errorf("the pool timeout ended the call %s before its due time", due.Sub(at))
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the pool timeout never ended the call")
	}
	if !a.poolTimedOut() {
		t.Error("poolTimedOut = false after the pool timeout")
	}
}
