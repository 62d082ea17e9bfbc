package main

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestWelcomeMail sends a welcome mail on a service with a private database
// (privateDB): the queue's jobs are its own, so its worker delivers the mail and
// the log transport writes it to this service's log.
func TestWelcomeMail(t *testing.T) {
	t.Parallel()
	svc := setup(t, privateDB(t))
	if resp := svc.Do(t, http.MethodPost, "/welcome", `{"email":"not an address"}`, "Content-Type", "application/json"); resp.Status != http.StatusUnprocessableEntity {
		t.Fatalf("an invalid address: status %d: %s", resp.Status, resp)
	}
	resp := svc.Do(t, http.MethodPost, "/welcome", `{"email":"ada@example.com"}`, "Content-Type", "application/json")
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
