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

// paying returns the headers of subject's payment of order id: bearer,
// Idempotency-Key, and the Order-Token orders would sign for subject's order.
func paying(t *testing.T, subject string, id, amount int64, key string) []string {
	t.Helper()
	return exampletest.JSON(append(exampletest.Bearer(t, subject),
		"Idempotency-Key", key, OrderTokenHeader, exampletest.OrderToken(t, subject, id, amount, "EUR"))...)
}

func paymentBody(id, amount int64) string {
	return `{"order_id":` + itoa(id) + `,"amount_minor":` + itoa(amount) + `,"currency":"EUR"}`
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

	if r := svc.Do(t, http.MethodPost, "/payments", paymentBody(id, 1998), paying(t, "ada", id, 1998, "inv-"+itoa(id))...); r.Status != http.StatusCreated {
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
	id := orderID()
	key := "charge-" + itoa(id)
	body := paymentBody(id, 500)

	first := svc.Do(t, http.MethodPost, "/payments", body, paying(t, "ada", id, 500, key)...)
	if first.Status != http.StatusCreated || first.Header.Get("Location") != "/invoices/"+itoa(id) {
		t.Fatalf("first POST = %d %v %s", first.Status, first.Header, first.Body)
	}
	var p Payment
	if err := json.Unmarshal(first.Body, &p); err != nil || p.ID == 0 || p.InvoiceID != id || p.Status != "paid" {
		t.Fatalf("payment = %s (%v)", first.Body, err)
	}

	// The same key and body, with a fresh token of the same subject (a client
	// that refreshed its token between retries): the stored result, no new charge.
	again := svc.Do(t, http.MethodPost, "/payments", body, paying(t, "ada", id, 500, key)...)
	if again.Status != http.StatusCreated || again.Header.Get("Idempotent-Replayed") != "true" || string(again.Body) != string(first.Body) {
		t.Fatalf("repeat = %d replayed=%q %s, want the stored %s", again.Status, again.Header.Get("Idempotent-Replayed"), again.Body, first.Body)
	}
	if n := payments(t, pg, id); n != 1 {
		t.Fatalf("%d payments for order %d, want 1", n, id)
	}

	// The same key with another body: refused, nothing charged.
	other := `{"order_id":` + itoa(id) + `,"amount_minor":9999,"currency":"EUR"}`
	if r := svc.Do(t, http.MethodPost, "/payments", other, paying(t, "ada", id, 9999, key)...); r.Status != http.StatusUnprocessableEntity || r.Header.Get("Content-Type") != problem.ContentType {
		t.Fatalf("same key, other body = %d %s", r.Status, r.Body)
	}
	// The same key from another customer is another customer's key: ada's
	// stored payment is not replayed to bob, and nothing is charged.
	if r := svc.Do(t, http.MethodPost, "/payments", body, exampletest.JSON(append(exampletest.Bearer(t, "bob"), "Idempotency-Key", key)...)...); r.Status == http.StatusCreated || r.Header.Get("Idempotent-Replayed") != "" {
		t.Fatalf("same key, other subject = %d replayed=%q %s", r.Status, r.Header.Get("Idempotent-Replayed"), r.Body)
	}
	// Another key for an order already paid: a conflict, not a second charge.
	if r := svc.Do(t, http.MethodPost, "/payments", body, paying(t, "ada", id, 500, key+"-b")...); r.Status != http.StatusConflict {
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
	id := orderID()
	good := paymentBody(id, 500)
	// Keys of this run's own: a stored refusal outlives the run (go test
	// -count=2 shares the database), and the next run's body differs.
	key := func(k string) string { return k + "-" + itoa(id) }
	vouched := func(subject string, id, amount int64) []string {
		return []string{OrderTokenHeader, exampletest.OrderToken(t, subject, id, amount, "EUR")}
	}
	cases := []struct {
		name    string
		body    string
		headers []string
		status  int
		want    string
	}{
		{"no key", good, ada, http.StatusBadRequest, "Idempotency-Key"},
		{"no token", good, []string{"Idempotency-Key", key("k-no-token")}, http.StatusUnauthorized, "bearer"},
		{"not JSON", "{", append(ada, "Idempotency-Key", key("k-not-json")), http.StatusBadRequest, "not valid JSON"},
		{"not a JSON content type", good, append(ada, "Idempotency-Key", key("k-text"), "Content-Type", "text/plain"), http.StatusUnsupportedMediaType, "this route takes JSON"},
		{"unknown field", `{"order_id":1,"amount_minor":5,"currency":"EUR","amount":5}`, append(ada, "Idempotency-Key", key("k-unknown")), http.StatusUnprocessableEntity, `"field":"amount"`},
		{"invalid fields", `{"order_id":0,"amount_minor":-1,"currency":"E"}`, append(ada, "Idempotency-Key", key("k-invalid")), http.StatusUnprocessableEntity, "currency"},
		{"no order token", good, append(ada, "Idempotency-Key", key("k-no-order")), http.StatusForbidden, "needs the Order-Token"},
		{"a bearer token as order token", good, append(ada, "Idempotency-Key", key("k-bearer"), OrderTokenHeader, exampletest.Token(t, "ada")), http.StatusForbidden, "for another order"},
		{"order token not valid", good, append(ada, "Idempotency-Key", key("k-forged"), OrderTokenHeader, "e30.e30.c2ln"), http.StatusForbidden, "not valid"},
		{"another customer's order", good, append(ada, append([]string{"Idempotency-Key", key("k-bobs")}, vouched("bob", id, 500)...)...), http.StatusForbidden, "not the caller's"},
		{"another order", good, append(ada, append([]string{"Idempotency-Key", key("k-other-order")}, vouched("ada", id+1, 500)...)...), http.StatusForbidden, "another order"},
		{"another amount", good, append(ada, append([]string{"Idempotency-Key", key("k-other-amount")}, vouched("ada", id, 1)...)...), http.StatusForbidden, "another order, amount"},
	}
	for _, tc := range cases {
		r := svc.Do(t, http.MethodPost, "/payments", tc.body, exampletest.JSON(tc.headers...)...)
		if r.Status != tc.status || !strings.Contains(r.String(), tc.want) {
			t.Errorf("%s: POST /payments = %d %s, want %d containing %q", tc.name, r.Status, r.Body, tc.status, tc.want)
		}
	}
}

// TestCrossCustomerPayment: bob, with his own valid bearer token, cannot pay
// ada's order, with her order token or without one (nor a future order id to
// block it); nothing is stored, and ada then pays it as usual.
func TestCrossCustomerPayment(t *testing.T) {
	t.Parallel()
	svc, pg := start(t)
	id := orderID()
	body := paymentBody(id, 700)
	bob := exampletest.Bearer(t, "bob")
	for name, headers := range map[string][]string{
		"ada's order token": append(bob, "Idempotency-Key", "bob-1-"+itoa(id), OrderTokenHeader, exampletest.OrderToken(t, "ada", id, 700, "EUR")),
		"no order token":    append(bob, "Idempotency-Key", "bob-2-"+itoa(id)),
	} {
		r := svc.Do(t, http.MethodPost, "/payments", body, exampletest.JSON(headers...)...)
		if r.Status != http.StatusForbidden || r.Header.Get("Content-Type") != problem.ContentType {
			t.Fatalf("bob paying ada's order with %s = %d %s", name, r.Status, r.Body)
		}
	}
	if n := payments(t, pg, id); n != 0 {
		t.Fatalf("%d payments after bob's attempts, want 0", n)
	}
	if r := svc.Do(t, http.MethodPost, "/payments", body, paying(t, "ada", id, 700, "ada-1-"+itoa(id))...); r.Status != http.StatusCreated {
		t.Fatalf("ada paying her order after bob's attempts = %d %s", r.Status, r.Body)
	}
	var payer string
	if err := pg.QueryRow(context.Background(), `SELECT payer FROM payments WHERE invoice_id = $1`, id).Scan(&payer); err != nil || payer != "ada" {
		t.Fatalf("payer = %q (%v), want ada", payer, err)
	}
}

// TestReadingAnothersInvoice: ada's invoice is a 404 to bob, the same 404 as
// an invoice that does not exist; ada reads it.
func TestReadingAnothersInvoice(t *testing.T) {
	t.Parallel()
	svc, _ := start(t)
	id := orderID()
	if r := svc.Do(t, http.MethodPost, "/payments", paymentBody(id, 300), paying(t, "ada", id, 300, "read-"+itoa(id))...); r.Status != http.StatusCreated {
		t.Fatalf("POST /payments = %d %s", r.Status, r.Body)
	}
	path := "/invoices/" + itoa(id)
	if r := svc.Get(t, path, exampletest.Bearer(t, "ada")...); r.Status != http.StatusOK {
		t.Fatalf("ada's GET %s = %d %s", path, r.Status, r.Body)
	}
	mine := svc.Get(t, path, exampletest.Bearer(t, "bob")...)
	none := svc.Get(t, "/invoices/"+itoa(orderID()), exampletest.Bearer(t, "bob")...)
	if mine.Status != http.StatusNotFound || strings.Contains(mine.String(), "300") {
		t.Fatalf("bob's GET of ada's invoice = %d %s", mine.Status, mine.Body)
	}
	detail := func(r jfasttest.Response) string {
		var p problem.Problem
		_ = json.Unmarshal(r.Body, &p)
		return p.Detail
	}
	if detail(mine) != detail(none) {
		t.Fatalf("another's invoice answers %q, a missing one %q: bob can tell them apart", detail(mine), detail(none))
	}
}

// TestKeySquatting: keys are per customer. Bob taking the key ada will use,
// first for a payment of his own and then for a refused one, changes nothing
// for ada: her payment with that key is hers, neither 422 nor his replay, and
// his repeat still replays his own.
func TestKeySquatting(t *testing.T) {
	t.Parallel()
	svc, pg := start(t)
	bobs, adas, later := orderID(), orderID(), orderID()
	key := "charge-squatted-" + itoa(bobs) // the run's own: a stored key outlives the run
	bobFirst := svc.Do(t, http.MethodPost, "/payments", paymentBody(bobs, 100), paying(t, "bob", bobs, 100, key)...)
	if bobFirst.Status != http.StatusCreated {
		t.Fatalf("bob's payment = %d %s", bobFirst.Status, bobFirst.Body)
	}
	r := svc.Do(t, http.MethodPost, "/payments", paymentBody(adas, 200), paying(t, "ada", adas, 200, key)...)
	var p Payment
	if err := json.Unmarshal(r.Body, &p); err != nil || r.Status != http.StatusCreated || r.Header.Get("Idempotent-Replayed") != "" || p.InvoiceID != adas {
		t.Fatalf("ada's payment with bob's key = %d replayed=%q %s", r.Status, r.Header.Get("Idempotent-Replayed"), r.Body)
	}
	if again := svc.Do(t, http.MethodPost, "/payments", paymentBody(bobs, 100), paying(t, "bob", bobs, 100, key)...); again.Header.Get("Idempotent-Replayed") != "true" || string(again.Body) != string(bobFirst.Body) {
		t.Fatalf("bob's repeat = %d %s, want his stored %s", again.Status, again.Body, bobFirst.Body)
	}
	// Bob stores a refusal under ada's next key; her payment is untouched by it.
	if r := svc.Do(t, http.MethodPost, "/payments", paymentBody(later, 50), exampletest.JSON(append(exampletest.Bearer(t, "bob"), "Idempotency-Key", key+"-next")...)...); r.Status != http.StatusForbidden {
		t.Fatalf("bob's squat = %d %s", r.Status, r.Body)
	}
	if r := svc.Do(t, http.MethodPost, "/payments", paymentBody(later, 50), paying(t, "ada", later, 50, key+"-next")...); r.Status != http.StatusCreated || r.Header.Get("Idempotent-Replayed") != "" {
		t.Fatalf("ada's payment with the key bob took = %d %s", r.Status, r.Body)
	}
	for _, id := range []int64{bobs, adas, later} {
		if n := payments(t, pg, id); n != 1 {
			t.Fatalf("%d payments for order %d, want 1", n, id)
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
