package main

import (
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"testing"
)

// TestPaymentsRunOnce runs on a service with a private database (privateDB), the
// idempotency store: a retry with the same key gets the stored payment.
func TestPaymentsRunOnce(t *testing.T) {
	t.Parallel()
	svc := setup(t, privateDB(t))
	if resp := svc.Do(t, http.MethodPost, "/payments", `{"amount":100}`); resp.Status != http.StatusBadRequest {
		t.Fatalf("without a key: status %d: %s", resp.Status, resp)
	}
	var k [16]byte
	_, _ = rand.Read(k[:])
	key := hex.EncodeToString(k[:])
	first := svc.Do(t, http.MethodPost, "/payments", `{"amount":100}`, "Idempotency-Key", key, "Content-Type", "application/json")
	if first.Status != http.StatusCreated {
		t.Fatalf("status %d: %s", first.Status, first)
	}
	second := svc.Do(t, http.MethodPost, "/payments", `{"amount":100}`, "Idempotency-Key", key, "Content-Type", "application/json")
	if second.Status != http.StatusCreated || second.String() != first.String() || second.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("the retry was not replayed: %d %s %v, first %s", second.Status, second, second.Header, first)
	}
}
