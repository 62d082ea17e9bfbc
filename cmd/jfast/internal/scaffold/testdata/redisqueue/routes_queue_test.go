package main

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"
)

// TestGreetingJob enqueues a greet job and waits for the service's workers to
// run it. The backend is Redis (jfast.toml's cache url, or JFAST_CACHE_URL),
// which a dev server may be working too: the job goes to a queue of the test's
// own (setup), which only this service's workers fetch from. While Redis is not
// reachable the route answers a 503 naming the queue and the test is skipped,
// saying so.
func TestGreetingJob(t *testing.T) {
	t.Parallel()
	svc := setup(t, nil)
	if resp := svc.Do(t, http.MethodPost, "/greetings", `{}`, "Content-Type", "application/json"); resp.Status != http.StatusUnprocessableEntity {
		t.Fatalf("without a name: status %d: %s", resp.Status, resp)
	}
	if resp := svc.Do(t, http.MethodPost, "/greetings", `name=jfast`, "Content-Type", "application/x-www-form-urlencoded"); resp.Status != http.StatusUnsupportedMediaType {
		t.Fatalf("a form: status %d: %s", resp.Status, resp)
	}
	before := greeted.Load()
	resp := svc.Do(t, http.MethodPost, "/greetings", `{"name":"jfast"}`, "Content-Type", "application/json")
	if resp.Status == http.StatusServiceUnavailable {
		var p struct{ Dependency string }
		if err := json.Unmarshal(resp.Body, &p); err != nil || p.Dependency != "queue" {
			t.Fatalf("a 503 that does not name the queue: %s", resp)
		}
		t.Skipf("skipped: the queue's Redis is not reachable (set JFAST_CACHE_URL): %s", resp)
	}
	if resp.Status != http.StatusAccepted {
		t.Fatalf("status %d: %s", resp.Status, resp)
	}
	deadline := time.Now().Add(20 * time.Second)
	for greeted.Load() == before {
		if time.Now().After(deadline) {
			t.Fatalf("the job was enqueued (%s) but never ran", resp)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
