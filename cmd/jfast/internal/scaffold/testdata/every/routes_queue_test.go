package main

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"
)

// TestGreetingJob passes with the queue's backend (the job is enqueued and run)
// and without it (a 503 naming "queue"): both are the route's contract.
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
	switch resp.Status {
	case http.StatusAccepted:
		deadline := time.Now().Add(20 * time.Second)
		for greeted.Load() == before {
			if time.Now().After(deadline) {
				t.Fatalf("the job was enqueued (%s) but never ran", resp)
			}
			time.Sleep(20 * time.Millisecond)
		}
	case http.StatusServiceUnavailable:
		var p struct{ Dependency string }
		if err := json.Unmarshal(resp.Body, &p); err != nil || p.Dependency != "queue" {
			t.Fatalf("a 503 that does not name the queue: %s", resp)
		}
		t.Logf("the queue's backend is not reachable: %s", resp)
	default:
		t.Fatalf("status %d: %s", resp.Status, resp)
	}
}
