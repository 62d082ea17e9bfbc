package http_test

import (
	"fmt"
	"io"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/framework/resilience"
	jhttp "github.com/jfastframework/jfast/plugins/http"
)

// A call's per-call state is reused by later calls once it returns: what the
// caller keeps of a call (its response body, the header its request went out
// with) must not change when later calls run.
func TestResponseOutlivesLaterCalls(t *testing.T) {
	t.Parallel()
	up := newUpstream(t, func(w http.ResponseWriter, _ *http.Request, n int) {
		_, _ = fmt.Fprintf(w, "call %d", n)
	})
	c, _, _ := newClient(t, jhttp.Upstream{BaseURL: up.URL, PolicyConfig: resilience.PolicyConfig{Timeout: 20 * time.Second}})
	first, err := c.Get(t.Context(), "/a")
	if err != nil {
		t.Fatal(err)
	}
	sent := first.Request.Header.Get(framework.TimeoutHeader)
	if ms, err := strconv.Atoi(sent); err != nil || ms <= 10_000 {
		t.Fatalf("first call's %s = %q, want more than 10000 (timeout is 20 s)", framework.TimeoutHeader, sent)
	}
	for range 20 {
		// A sooner deadline: a different Jfast-Timeout-Ms on each later call.
		resp, err := c.Get(ctxTimeout(t, 5*time.Second), "/b")
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
	}
	if got := first.Request.Header.Get(framework.TimeoutHeader); got != sent {
		t.Errorf("first call's %s became %q after later calls, was %q", framework.TimeoutHeader, got, sent)
	}
	if got := string(jhttp.BodyBytes(first)); got != "call 1" {
		t.Errorf("first call's body became %q after later calls, want %q", got, "call 1")
	}
}

// A streamed response (the RoundTripper's) holds its call until its body
// ends: later calls made meanwhile do not end it, and ending it frees its
// bulkhead place once.
func TestStreamedCallOutlivesLaterCalls(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request, _ int) {
		if r.URL.Path == "/slow" {
			w.WriteHeader(http.StatusOK)
			w.(http.Flusher).Flush()
			select {
			case <-release:
			case <-r.Context().Done():
				return
			}
		}
		_, _ = io.WriteString(w, r.URL.Path)
	})
	c, _, _ := newClient(t, jhttp.Upstream{BaseURL: up.URL})
	hc := c.HTTPClient()
	slow, err := hc.Get(up.URL + "/slow")
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Body.Close()
	for i := range 20 {
		resp, err := hc.Get(up.URL + "/fast")
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if err != nil || string(b) != "/fast" {
			t.Fatalf("call %d: body %q, %v", i, b, err)
		}
		if n := inFlight(t, c); n != 1 {
			t.Fatalf("after call %d in flight = %d, want 1 (the streamed call)", i, n)
		}
	}
	close(release)
	b, err := io.ReadAll(slow.Body)
	if err != nil || string(b) != "/slow" {
		t.Fatalf("streamed body = %q, %v", b, err)
	}
	_ = slow.Body.Close()
	if n := inFlight(t, c); n != 0 {
		t.Fatalf("in flight after the streamed body ended = %d, want 0", n)
	}
}
