package main

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/jfastframework/jfast/jfasttest"
)

func TestUpstream(t *testing.T) {
	t.Parallel()
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/status" {
			http.NotFound(w, r)
			return
		}
		w.WriteHeader(http.StatusAccepted)
	}))
	t.Cleanup(upstream.Close)
	svc := setup(t, map[string]string{"JFAST_HTTP_UPSTREAMS__EXAMPLE__BASE_URL": upstream.URL})
	resp := svc.Get(t, "/upstream")
	if resp.Status != http.StatusOK || strings.TrimSpace(resp.String()) != `{"upstream_status":202}` {
		t.Fatalf("status %d: %s", resp.Status, resp)
	}
}

func TestUpstreamDown(t *testing.T) {
	t.Parallel()
	addr := jfasttest.RefusedAddr(t) // connections refused until the test ends
	svc := setup(t, map[string]string{"JFAST_HTTP_UPSTREAMS__EXAMPLE__BASE_URL": "http://" + addr})
	resp := svc.Get(t, "/upstream")
	if resp.Status != http.StatusServiceUnavailable || !strings.Contains(resp.String(), `"example"`) {
		t.Fatalf("want a 503 naming the upstream, got %d: %s", resp.Status, resp)
	}
}
