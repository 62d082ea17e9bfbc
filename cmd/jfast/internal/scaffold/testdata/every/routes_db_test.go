package main

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"
)

// TestDBNow passes with a database (200 and its clock) and without one (a 503
// problem naming "db", answered within the deadlines): both are the route's
// contract. JFAST_DB_URL=... go test ./... runs it against yours.
func TestDBNow(t *testing.T) {
	t.Parallel()
	svc := setup(t, nil)
	resp := svc.Get(t, "/db/now")
	switch resp.Status {
	case http.StatusOK:
		var got struct{ Now time.Time }
		if err := json.Unmarshal(resp.Body, &got); err != nil || got.Now.IsZero() {
			t.Fatalf("body %s: %v", resp, err)
		}
	case http.StatusServiceUnavailable:
		var p struct{ Dependency string }
		if err := json.Unmarshal(resp.Body, &p); err != nil || p.Dependency != "db" {
			t.Fatalf("a 503 that does not name db: %s", resp)
		}
		t.Logf("no database reachable (set JFAST_DB_URL): %s", resp)
	default:
		t.Fatalf("status %d: %s", resp.Status, resp)
	}
}
