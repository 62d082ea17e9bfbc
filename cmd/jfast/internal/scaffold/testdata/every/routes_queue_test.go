package main

import (
	"net/http"
	"testing"
	"time"
)

// TestGreetingJob enqueues a greet job on a service with a private database
// (privateDB) and a queue of its own (setup), so that no running dev server can
// take the job: the service's own workers run it.
func TestGreetingJob(t *testing.T) {
	t.Parallel()
	svc := setup(t, privateDB(t))
	if resp := svc.Do(t, http.MethodPost, "/greetings", `{}`, "Content-Type", "application/json"); resp.Status != http.StatusUnprocessableEntity {
		t.Fatalf("without a name: status %d: %s", resp.Status, resp)
	}
	if resp := svc.Do(t, http.MethodPost, "/greetings", `name=jfast`, "Content-Type", "application/x-www-form-urlencoded"); resp.Status != http.StatusUnsupportedMediaType {
		t.Fatalf("a form: status %d: %s", resp.Status, resp)
	}
	before := greeted.Load()
	resp := svc.Do(t, http.MethodPost, "/greetings", `{"name":"jfast"}`, "Content-Type", "application/json")
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
