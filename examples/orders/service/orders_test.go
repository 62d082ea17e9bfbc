package service

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/jfastframework/jfast/drills"
	"github.com/jfastframework/jfast/examples/internal/exampletest"
	"github.com/jfastframework/jfast/problem"
)

func orderBody(sku string, quantity int) string {
	return `{"sku":"` + sku + `","quantity":` + itoa(int64(quantity)) + `,"email":"ada@example.com"}`
}

func decodeOrder(t *testing.T, body []byte) Order {
	t.Helper()
	var o Order
	if err := json.Unmarshal(body, &o); err != nil {
		t.Fatalf("not an order: %s (%v)", body, err)
	}
	return o
}

// TestOrder follows one order: created with its mail in one transaction,
// charged once, read back with billing's invoice.
func TestOrder(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	ada := exampletest.Bearer(t, "ada")
	sku := b.newSKU(t, 5, 999)

	r := b.svc.Do(t, http.MethodPost, "/orders", orderBody(sku, 2), exampletest.JSON(ada...)...)
	if r.Status != http.StatusCreated {
		t.Fatalf("POST /orders = %d %s", r.Status, r.Body)
	}
	o := decodeOrder(t, r.Body)
	if r.Header.Get("Location") != "/orders/"+itoa(o.ID) || o.Status != "paid" || o.AmountMinor != 1998 || o.Currency != "EUR" {
		t.Fatalf("POST /orders = Location %q, %+v", r.Header.Get("Location"), o)
	}
	if n := b.mailJobs(t, sku); n != 1 {
		t.Fatalf("%d confirmation mails enqueued, want 1", n)
	}
	if n := billingPayments(t, o.ID); n != 1 {
		t.Fatalf("%d payments in billing, want 1", n)
	}
	if n := b.available(sku); n != 3 {
		t.Fatalf("stock after the order = %d, want 3", n)
	}

	r = b.svc.Get(t, "/orders/"+itoa(o.ID), ada...)
	var got struct {
		Order   Order   `json:"order"`
		Invoice Invoice `json:"invoice"`
	}
	if err := json.Unmarshal(r.Body, &got); err != nil || r.Status != http.StatusOK {
		t.Fatalf("GET /orders/%d = %d %s", o.ID, r.Status, r.Body)
	}
	if got.Order.ID != o.ID || got.Invoice.ID != o.ID || got.Invoice.AmountMinor != 1998 || got.Invoice.Status != "paid" {
		t.Fatalf("GET /orders/%d = %+v", o.ID, got)
	}

	// Another customer cannot see it; no token, no order.
	if r := b.svc.Get(t, "/orders/"+itoa(o.ID), exampletest.Bearer(t, "bob")...); r.Status != http.StatusNotFound {
		t.Fatalf("bob's GET of ada's order = %d %s", r.Status, r.Body)
	}
	if r := b.svc.Do(t, http.MethodPost, "/orders", orderBody(sku, 1), exampletest.JSON()...); r.Status != http.StatusUnauthorized {
		t.Fatalf("POST /orders without a token = %d %s", r.Status, r.Body)
	}
}

// TestOrderOneTransaction: an order that fails inside the transaction (not
// enough stock, checked after the insert and the mail) leaves neither.
func TestOrderOneTransaction(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	sku := b.newSKU(t, 1, 500)
	r := b.svc.Do(t, http.MethodPost, "/orders", orderBody(sku, 2), exampletest.JSON(exampletest.Bearer(t, "ada")...)...)
	if r.Status != http.StatusConflict || !strings.Contains(r.String(), "not enough") {
		t.Fatalf("POST /orders over the stock = %d %s", r.Status, r.Body)
	}
	if n := b.count(t, `SELECT count(*) FROM orders WHERE sku = $1`, sku); n != 0 {
		t.Fatalf("%d orders left behind", n)
	}
	if n := b.mailJobs(t, sku); n != 0 {
		t.Fatalf("%d mails left behind", n)
	}
	for _, tc := range []struct{ body, want string }{
		{`{"sku":"` + sku + `","quantity":0,"email":"nope"}`, "quantity"},
		{`{"sku":"no-such-sku","quantity":1,"email":"ada@example.com"}`, "no such sku"},
	} {
		if r := b.svc.Do(t, http.MethodPost, "/orders", tc.body, exampletest.JSON(exampletest.Bearer(t, "ada")...)...); r.Status != http.StatusUnprocessableEntity || !strings.Contains(r.String(), tc.want) {
			t.Errorf("POST /orders %s = %d %s", tc.body, r.Status, r.Body)
		}
	}
}

// TestOrderRetryChargesOnce: billing is unreachable for the first attempt,
// which answers 503 naming billing with the order committed, pending and no
// mail enqueued (the mail goes with the payment); the retry with the same
// Idempotency-Key finds that order, charges it once, and enqueues its one
// mail. Further retries change nothing.
func TestOrderRetryChargesOnce(t *testing.T) {
	t.Parallel()
	bill := startBilling(t)
	proxy, err := drills.StartProxy(strings.TrimPrefix(bill.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = proxy.Close() })
	b := setup(t, setupOpts{billingURL: "http://" + proxy.Addr()})
	sku := b.newSKU(t, 10, 250)
	keyed := func() []string {
		return append(exampletest.Bearer(t, "ada"), "Idempotency-Key", "retry-"+sku)
	}

	if err := proxy.Refuse(); err != nil {
		t.Fatal(err)
	}
	r := b.svc.Do(t, http.MethodPost, "/orders", orderBody(sku, 3), exampletest.JSON(keyed()...)...)
	if r.Status != http.StatusServiceUnavailable || !strings.Contains(r.String(), `"dependency":"billing"`) || !strings.Contains(r.String(), `"upstream":"billing"`) {
		t.Fatalf("POST /orders with billing down = %d %s", r.Status, r.Body)
	}
	if n := b.count(t, `SELECT count(*) FROM orders WHERE sku = $1 AND status = 'pending'`, sku); n != 1 {
		t.Fatalf("%d pending orders after the failed charge, want 1", n)
	}
	if n := b.mailJobs(t, sku); n != 0 {
		t.Fatalf("%d confirmation mails for an order not paid, want 0", n)
	}

	if err := proxy.Pass(); err != nil {
		t.Fatal(err)
	}
	var id int64
	for i := range 3 {
		r := b.svc.Do(t, http.MethodPost, "/orders", orderBody(sku, 3), exampletest.JSON(keyed()...)...)
		if r.Status != http.StatusCreated {
			t.Fatalf("retry %d = %d %s", i+1, r.Status, r.Body)
		}
		o := decodeOrder(t, r.Body)
		if id != 0 && o.ID != id || o.Status != "paid" {
			t.Fatalf("retry %d = %+v, want order %d paid", i+1, o, id)
		}
		id = o.ID
	}
	if n := b.count(t, `SELECT count(*) FROM orders WHERE sku = $1`, sku); n != 1 {
		t.Fatalf("%d orders, want 1", n)
	}
	if n := billingPayments(t, id); n != 1 {
		t.Fatalf("%d payments, want 1", n)
	}
	if n := b.mailJobs(t, sku); n != 1 {
		t.Fatalf("%d mails, want 1", n)
	}
	if n := b.available(sku); n != 7 {
		t.Fatalf("stock = %d, want 7 (taken once)", n)
	}
	// The same key for another order is refused.
	if r := b.svc.Do(t, http.MethodPost, "/orders", orderBody(sku, 1), exampletest.JSON(keyed()...)...); r.Status != http.StatusUnprocessableEntity {
		t.Fatalf("same key, other order = %d %s", r.Status, r.Body)
	}
}

// TestOrderBillingFailures: billing's 404, a 5xx it answered, and no answer.
func TestOrderBillingFailures(t *testing.T) {
	t.Parallel()
	ada := exampletest.Bearer(t, "ada")

	t.Run("404", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{})
		id := b.insertOrder(t, "ada")
		r := b.svc.Get(t, "/orders/"+itoa(id), ada...)
		if r.Status != http.StatusNotFound || !strings.Contains(r.String(), "no invoice for this order") {
			t.Fatalf("GET /orders/%d = %d %s", id, r.Status, r.Body)
		}
		if r := b.svc.Get(t, "/orders/99999999", ada...); r.Status != http.StatusNotFound || !strings.Contains(r.String(), "no such order") {
			t.Fatalf("GET a missing order = %d %s", r.Status, r.Body)
		}
	})

	t.Run("5xx", func(t *testing.T) {
		t.Parallel()
		broken := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			http.Error(w, "boom", http.StatusInternalServerError)
		}))
		t.Cleanup(broken.Close)
		b := setup(t, setupOpts{billingURL: broken.URL})
		id := b.insertOrder(t, "ada")
		r := b.svc.Get(t, "/orders/"+itoa(id), ada...)
		if r.Status != http.StatusBadGateway || r.Header.Get("Content-Type") != problem.ContentType || !strings.Contains(r.String(), `"upstream":"billing"`) {
			t.Fatalf("GET /orders/%d with billing answering 500 = %d %s", id, r.Status, r.Body)
		}
	})

	t.Run("unreachable", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{billingURL: "http://" + closedPort(t)})
		id := b.insertOrder(t, "ada")
		r := b.svc.Get(t, "/orders/"+itoa(id), ada...)
		if r.Status != http.StatusServiceUnavailable || r.Header.Get("Content-Type") != problem.ContentType || !strings.Contains(r.String(), `"upstream":"billing"`) {
			t.Fatalf("GET /orders/%d with billing down = %d %s", id, r.Status, r.Body)
		}
		ready := b.svc.Get(t, "/ready")
		if ready.Status != http.StatusOK || !strings.Contains(ready.String(), `"http"`) {
			t.Fatalf("/ready = %d %s", ready.Status, ready.Body)
		}
	})
}
