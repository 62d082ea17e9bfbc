package main

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestWelcomeMail sends a welcome mail: the queue (on Redis: jfast.toml's cache
// url, or JFAST_CACHE_URL) delivers it to the log. The delivery job goes to a
// queue of this service's own (setup), so its worker runs it and this service's
// log shows it, whatever else works the same Redis. While Redis is not
// reachable the route answers a 503 and the test is skipped, saying so.
func TestWelcomeMail(t *testing.T) {
	t.Parallel()
	svc := setup(t, nil)
	if resp := svc.Do(t, http.MethodPost, "/welcome", `{"email":"not an address"}`, "Content-Type", "application/json"); resp.Status != http.StatusUnprocessableEntity {
		t.Fatalf("an invalid address: status %d: %s", resp.Status, resp)
	}
	resp := svc.Do(t, http.MethodPost, "/welcome", `{"email":"ada@example.com"}`, "Content-Type", "application/json")
	if resp.Status == http.StatusServiceUnavailable {
		var p struct{ Dependency string }
		if err := json.Unmarshal(resp.Body, &p); err != nil || p.Dependency == "" {
			t.Fatalf("a 503 that names no dependency: %s", resp)
		}
		t.Skipf("skipped: the queue's backend is not reachable (set JFAST_CACHE_URL): %s", resp)
	}
	if resp.Status != http.StatusAccepted {
		t.Fatalf("status %d: %s", resp.Status, resp)
	}
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(svc.Logs(), "Welcome to shop") {
		if time.Now().After(deadline) {
			t.Fatalf("the mail was enqueued but never delivered to the log:\n%s", svc.Logs())
		}
		time.Sleep(20 * time.Millisecond)
	}
}
