package main

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestWelcomeMail passes with the queue's backend (the mail is enqueued and the
// log transport writes it) and without it (a 503 naming the queue).
//
// Not parallel: the delivery job may run on any worker of the queue, and the test
// reads this service's log, so no other test's service may be running.
func TestWelcomeMail(t *testing.T) {
	svc := setup(t, nil)
	if resp := svc.Do(t, http.MethodPost, "/welcome", `{"email":"not an address"}`, "Content-Type", "application/json"); resp.Status != http.StatusUnprocessableEntity {
		t.Fatalf("an invalid address: status %d: %s", resp.Status, resp)
	}
	resp := svc.Do(t, http.MethodPost, "/welcome", `{"email":"ada@example.com"}`, "Content-Type", "application/json")
	switch resp.Status {
	case http.StatusAccepted:
		deadline := time.Now().Add(20 * time.Second)
		for !strings.Contains(svc.Logs(), "Welcome to shop") {
			if time.Now().After(deadline) {
				t.Fatalf("the mail was enqueued but never delivered to the log:\n%s", svc.Logs())
			}
			time.Sleep(20 * time.Millisecond)
		}
	case http.StatusServiceUnavailable:
		var p struct{ Dependency string }
		if err := json.Unmarshal(resp.Body, &p); err != nil || p.Dependency == "" {
			t.Fatalf("a 503 that names no dependency: %s", resp)
		}
		t.Logf("the queue's backend is not reachable: %s", resp)
	default:
		t.Fatalf("status %d: %s", resp.Status, resp)
	}
}
