package main

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"testing"
)

// TestPaymentsRunOnce passes with the store (a retry gets the stored payment) and
// without it (both answers are a 503 naming the store's plugin, and the handler
// never runs): both are the route's contract.
func TestPaymentsRunOnce(t *testing.T) {
	t.Parallel()
	svc := setup(t, nil)
	if resp := svc.Do(t, http.MethodPost, "/payments", `{"amount":100}`); resp.Status != http.StatusBadRequest {
		t.Fatalf("without a key: status %d: %s", resp.Status, resp)
	}
	var k [16]byte
	_, _ = rand.Read(k[:])
	key := hex.EncodeToString(k[:])
	first := svc.Do(t, http.MethodPost, "/payments", `{"amount":100}`, "Idempotency-Key", key, "Content-Type", "application/json")
	second := svc.Do(t, http.MethodPost, "/payments", `{"amount":100}`, "Idempotency-Key", key, "Content-Type", "application/json")
	switch first.Status {
	case http.StatusCreated:
		if second.Status != http.StatusCreated || second.String() != first.String() || second.Header.Get("Idempotent-Replayed") != "true" {
			t.Fatalf("the retry was not replayed: %d %s %v, first %s", second.Status, second, second.Header, first)
		}
	case http.StatusServiceUnavailable:
		var p struct{ Dependency string }
		if err := json.Unmarshal(first.Body, &p); err != nil || (p.Dependency != "db" && p.Dependency != "cache") {
			t.Fatalf("a 503 that does not name the store: %s", first)
		}
		t.Logf("the idempotency store is not reachable: %s", first)
	default:
		t.Fatalf("status %d: %s", first.Status, first)
	}
}
