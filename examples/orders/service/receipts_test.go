package service

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jfastframework/jfast/examples/internal/exampletest"
)

// TestReceipt: upload, then a temporary URL that serves it.
func TestReceipt(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	ada := exampletest.Bearer(t, "ada")
	id := b.insertOrder(t, "ada")
	path := "/orders/" + itoa(id) + "/receipt"

	if r := b.svc.Get(t, path, ada...); r.Status != http.StatusNotFound || !strings.Contains(r.String(), "no receipt") {
		t.Fatalf("GET %s before the upload = %d %s", path, r.Status, r.Body)
	}
	if r := b.svc.Do(t, http.MethodPut, "/orders/99999999/receipt", "x", ada...); r.Status != http.StatusNotFound {
		t.Fatalf("PUT a missing order's receipt = %d %s", r.Status, r.Body)
	}
	const receipt = "receipt of order, paid in full"
	r := b.svc.Do(t, http.MethodPut, path, receipt, append(ada, "Content-Type", "text/plain")...)
	if r.Status != http.StatusCreated || r.Header.Get("Location") != path {
		t.Fatalf("PUT %s = %d %v %s", path, r.Status, r.Header, r.Body)
	}
	r = b.svc.Get(t, path, ada...)
	var link receiptLink
	if err := json.Unmarshal(r.Body, &link); err != nil || r.Status != http.StatusOK || !strings.Contains(link.URL, "signature=") {
		t.Fatalf("GET %s = %d %s", path, r.Status, r.Body)
	}
	resp, err := http.Get(b.svc.URL + link.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	got, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || string(got) != receipt {
		t.Fatalf("GET the temporary URL = %d %q", resp.StatusCode, got)
	}
	if r := b.svc.Get(t, link.URL[:strings.Index(link.URL, "?")]); r.Status == http.StatusOK {
		t.Fatalf("the receipt is served without a signature: %d", r.Status)
	}
}

func TestOperations(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	if r := b.svc.Get(t, "/live"); r.Status != http.StatusOK {
		t.Fatalf("/live = %d", r.Status)
	}
	// On a fresh database the first check that reads the queue makes its job
	// tables; with readiness_timeout 800 ms the first /ready may be degraded
	// while River's migrations run.
	r := b.svc.Get(t, "/ready")
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(r.String(), `"status":"ok"`) && time.Now().Before(deadline); {
		time.Sleep(100 * time.Millisecond)
		r = b.svc.Get(t, "/ready")
	}
	if r.Status != http.StatusOK || !strings.Contains(r.String(), `"status":"ok"`) {
		t.Fatalf("/ready = %d %s", r.Status, r.Body)
	}
	for _, check := range []string{"db", "cache", "http", "auth", "queue", "mail", "storage"} {
		if !strings.Contains(r.String(), `"`+check+`":{"healthy":true`) {
			t.Errorf("/ready: %s is not healthy: %s", check, r.Body)
		}
	}
	m := b.svc.Get(t, "/metrics")
	for _, metric := range []string{"jfast_client_calls_total", "jfast_db_pool_max_connections"} {
		if m.Status != http.StatusOK || !strings.Contains(m.String(), metric) {
			t.Errorf("/metrics has no %s", metric)
		}
	}
}
