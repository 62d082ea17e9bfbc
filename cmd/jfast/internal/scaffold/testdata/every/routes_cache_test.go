package main

import (
	"encoding/json"
	"net/http"
	"testing"
)

// TestCacheGreeting passes with Redis and without it (Remember fails open).
func TestCacheGreeting(t *testing.T) {
	t.Parallel()
	svc := setup(t, nil)
	for range 2 {
		resp := svc.Get(t, "/cache/greeting")
		if resp.Status != http.StatusOK {
			t.Fatalf("status %d: %s", resp.Status, resp)
		}
		var g cachedGreeting
		if err := json.Unmarshal(resp.Body, &g); err != nil || g.Message != "hello from the cache" || g.ComputedAt.IsZero() {
			t.Fatalf("body %s: %v", resp, err)
		}
	}
}
