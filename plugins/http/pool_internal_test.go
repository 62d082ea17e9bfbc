package http

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/jfastframework/jfast/framework/resilience"
)

// pool_timeout: with the only connection held by a request that bypasses the
// bulkhead, a call waits pool_timeout for a connection and fails as a timeout.
func TestPoolTimeout(t *testing.T) {
	t.Parallel()
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
	c, err := NewClient(Upstream{Name: "billing", BaseURL: srv.URL, PoolTimeout: 100 * time.Millisecond, PolicyConfig: resilience.PolicyConfig{MaxConcurrent: 1, Attempts: 1}})
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

	start := time.Now()
	_, err = c.Get(context.Background(), "/x")
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
	close(release)
	if err := <-held; err != nil {
		t.Fatal(err)
	}
}
