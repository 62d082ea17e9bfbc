package service

import (
	"context"
	"encoding/json"
	"strconv"

	"github.com/go-chi/chi/v5"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jfastframework/jfast/examples/internal/exampletest"
	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/jfasttest"
	"github.com/jfastframework/jfast/plugins/db"
	"github.com/jfastframework/jfast/problem"
)

// nextOrder gives every test its own order ids: the tests share a database.
var nextOrder atomic.Int64

func orderID() int64 { return 1000 + nextOrder.Add(1) }

// start runs billing from its own jfast.toml on the private database.
func start(t *testing.T) (*jfasttest.Service, *db.DB) {
	t.Helper()
	var pg *db.DB
	opts := Options()
	svc := jfasttest.Start(t, jfasttest.Options{
		TOML:    exampletest.Config(t, "../jfast.toml"),
		Plugins: opts.Plugins,
		Env:     map[string]string{"JFAST_DB_URL": dbURL},
		Routes: func(app *framework.App, r chi.Router) error {
			var err error
			if pg, err = db.Get(app); err != nil {
				return err
			}
			return Routes(app, r)
		},
	})
	return svc, pg
}

func payments(t *testing.T, pg *db.DB, invoice int64) int {
	t.Helper()
	var n int
	if err := pg.QueryRow(context.Background(), `SELECT count(*) FROM payments WHERE invoice_id = $1`, invoice).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestInvoice(t *testing.T) {
	t.Parallel()
	svc, _ := start(t)
	ada := exampletest.Bearer(t, "ada")
	id := orderID()
	path := "/invoices/" + itoa(id)

	r := svc.Get(t, path, ada...)
	if r.Status != http.StatusNotFound || r.Header.Get("Content-Type") != problem.ContentType || !strings.Contains(r.String(), "no such invoice") {
		t.Fatalf("GET %s before paying = %d %s", path, r.Status, r.Body)
	}
	if r := svc.Get(t, "/invoices/x", ada...); r.Status != http.StatusNotFound {
		t.Fatalf("GET /invoices/x = %d %s", r.Status, r.Body)
	}
	if r := svc.Get(t, path); r.Status != http.StatusUnauthorized {
		t.Fatalf("GET %s without a token = %d %s", path, r.Status, r.Body)
	}

	body := `{"order_id":` + itoa(id) + `,"amount_minor":1998,"currency":"EUR"}`
	if r := svc.Do(t, http.MethodPost, "/payments", body, exampletest.JSON(append(ada, "Idempotency-Key", "inv-"+itoa(id))...)...); r.Status != http.StatusCreated {
		t.Fatalf("POST /payments = %d %s", r.Status, r.Body)
	}
	r = svc.Get(t, path, ada...)
	var inv Invoice
	if err := json.Unmarshal(r.Body, &inv); err != nil || r.Status != http.StatusOK {
		t.Fatalf("GET %s = %d %s (%v)", path, r.Status, r.Body, err)
	}
	if inv.ID != id || inv.AmountMinor != 1998 || inv.Currency != "EUR" || inv.Status != "paid" || time.Since(inv.CreatedAt) > time.Minute {
		t.Fatalf("invoice = %+v", inv)
	}
}

// TestPaymentsIdempotency is the payment API's rule (docs/design.md, "Calling
// other services"): the same
// Idempotency-Key with the same body answers the stored result (and charges
// once); the same key with another body is refused with 422.
func TestPaymentsIdempotency(t *testing.T) {
	t.Parallel()
	svc, pg := start(t)
	ada := exampletest.Bearer(t, "ada")
	id := orderID()
	key := "charge-" + itoa(id)
	body := `{"order_id":` + itoa(id) + `,"amount_minor":500,"currency":"EUR"}`

	first := svc.Do(t, http.MethodPost, "/payments", body, exampletest.JSON(append(ada, "Idempotency-Key", key)...)...)
	if first.Status != http.StatusCreated || first.Header.Get("Location") != "/invoices/"+itoa(id) {
		t.Fatalf("first POST = %d %v %s", first.Status, first.Header, first.Body)
	}
	var p Payment
	if err := json.Unmarshal(first.Body, &p); err != nil || p.ID == 0 || p.InvoiceID != id || p.Status != "paid" {
		t.Fatalf("payment = %s (%v)", first.Body, err)
	}

	// The same key and body, with a fresh token of the same subject (a client
	// that refreshed its token between retries): the stored result, no new charge.
	again := svc.Do(t, http.MethodPost, "/payments", body, exampletest.JSON(append(exampletest.Bearer(t, "ada"), "Idempotency-Key", key)...)...)
	if again.Status != http.StatusCreated || again.Header.Get("Idempotent-Replayed") != "true" || string(again.Body) != string(first.Body) {
		t.Fatalf("repeat = %d replayed=%q %s, want the stored %s", again.Status, again.Header.Get("Idempotent-Replayed"), again.Body, first.Body)
	}
	if n := payments(t, pg, id); n != 1 {
		t.Fatalf("%d payments for order %d, want 1", n, id)
	}

	// The same key with another body: refused, nothing charged.
	other := `{"order_id":` + itoa(id) + `,"amount_minor":9999,"currency":"EUR"}`
	if r := svc.Do(t, http.MethodPost, "/payments", other, exampletest.JSON(append(ada, "Idempotency-Key", key)...)...); r.Status != http.StatusUnprocessableEntity || r.Header.Get("Content-Type") != problem.ContentType {
		t.Fatalf("same key, other body = %d %s", r.Status, r.Body)
	}
	// The same key from another customer is another customer's key: ada's
	// stored payment is not replayed to bob, and nothing is charged.
	if r := svc.Do(t, http.MethodPost, "/payments", body, exampletest.JSON(append(exampletest.Bearer(t, "bob"), "Idempotency-Key", key)...)...); r.Status == http.StatusCreated || r.Header.Get("Idempotent-Replayed") != "" {
		t.Fatalf("same key, other subject = %d replayed=%q %s", r.Status, r.Header.Get("Idempotent-Replayed"), r.Body)
	}
	// Another key for an order already paid: a conflict, not a second charge.
	if r := svc.Do(t, http.MethodPost, "/payments", body, exampletest.JSON(append(ada, "Idempotency-Key", key+"-b")...)...); r.Status != http.StatusConflict {
		t.Fatalf("another key for a paid order = %d %s", r.Status, r.Body)
	}
	if n := payments(t, pg, id); n != 1 {
		t.Fatalf("%d payments for order %d, want 1", n, id)
	}
}

func TestPaymentsRefused(t *testing.T) {
	t.Parallel()
	svc, _ := start(t)
	ada := exampletest.Bearer(t, "ada")
	good := `{"order_id":` + itoa(orderID()) + `,"amount_minor":500,"currency":"EUR"}`
	cases := []struct {
		name    string
		body    string
		headers []string
		status  int
		want    string
	}{
		{"no key", good, ada, http.StatusBadRequest, "Idempotency-Key"},
		{"no token", good, []string{"Idempotency-Key", "k-no-token"}, http.StatusUnauthorized, "bearer"},
		{"not JSON", "{", append(ada, "Idempotency-Key", "k-not-json"), http.StatusBadRequest, "not valid JSON"},
		{"not a JSON content type", good, append(ada, "Idempotency-Key", "k-text", "Content-Type", "text/plain"), http.StatusUnsupportedMediaType, "this route takes JSON"},
		{"unknown field", `{"order_id":1,"amount_minor":5,"currency":"EUR","amount":5}`, append(ada, "Idempotency-Key", "k-unknown"), http.StatusUnprocessableEntity, `"field":"amount"`},
		{"invalid fields", `{"order_id":0,"amount_minor":-1,"currency":"E"}`, append(ada, "Idempotency-Key", "k-invalid"), http.StatusUnprocessableEntity, "currency"},
	}
	for _, tc := range cases {
		r := svc.Do(t, http.MethodPost, "/payments", tc.body, exampletest.JSON(tc.headers...)...)
		if r.Status != tc.status || !strings.Contains(r.String(), tc.want) {
			t.Errorf("%s: POST /payments = %d %s, want %d containing %q", tc.name, r.Status, r.Body, tc.status, tc.want)
		}
	}
}

func TestOperations(t *testing.T) {
	t.Parallel()
	svc, _ := start(t)
	if r := svc.Get(t, "/live"); r.Status != http.StatusOK {
		t.Fatalf("/live = %d", r.Status)
	}
	r := svc.Get(t, "/ready")
	if r.Status != http.StatusOK || !strings.Contains(r.String(), `"status":"ok"`) {
		t.Fatalf("/ready = %d %s", r.Status, r.Body)
	}
	for _, check := range []string{`"db"`, `"auth"`, `"idempotency"`} {
		if !strings.Contains(r.String(), check) {
			t.Errorf("/ready has no %s check: %s", check, r.Body)
		}
	}
	if r := svc.Get(t, "/metrics"); r.Status != http.StatusOK || !strings.Contains(r.String(), "jfast_db_pool_max_connections") {
		t.Fatalf("/metrics = %d", r.Status)
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
