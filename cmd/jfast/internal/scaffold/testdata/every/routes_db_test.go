package main

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/jfastframework/jfast/jfasttest"
)

// TestDBNow asks /db/now of a service on a private database (privateDB): 200
// and PostgreSQL's clock.
func TestDBNow(t *testing.T) {
	t.Parallel()
	svc := setup(t, privateDB(t))
	resp := svc.Get(t, "/db/now")
	if resp.Status != http.StatusOK {
		t.Fatalf("status %d: %s", resp.Status, resp)
	}
	var got struct{ Now time.Time }
	if err := json.Unmarshal(resp.Body, &got); err != nil {
		t.Fatalf("body %s: %v", resp, err)
	}
	if d := time.Since(got.Now); d < -time.Hour || d > time.Hour {
		t.Fatalf("the database's clock %v is not now (%v): %s", got.Now, time.Now(), resp)
	}
}

// TestDBDown points the service at an address where nothing listens: /db/now
// answers a 503 problem naming "db", within the deadlines.
func TestDBDown(t *testing.T) {
	t.Parallel()
	addr := jfasttest.RefusedAddr(t) // connections refused until the test ends
	svc := setup(t, map[string]string{"JFAST_DB_URL": "postgres://app:app@" + addr + "/app?sslmode=disable"})
	resp := svc.Get(t, "/db/now")
	var p struct{ Dependency string }
	if resp.Status != http.StatusServiceUnavailable || json.Unmarshal(resp.Body, &p) != nil || p.Dependency != "db" {
		t.Fatalf("want a 503 naming db, got %d: %s", resp.Status, resp)
	}
}
