package service

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"regexp"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jfastframework/jfast/examples/internal/exampletest"
	"github.com/jfastframework/jfast/jfasttest"
)

// TestChargeKeyNotGuessable: the Idempotency-Key orders sends with a charge
// is a random UUID of the order's, not derived from its sequential id, and
// two orders have two keys. Each charge carries an Order-Token.
func TestChargeKeyNotGuessable(t *testing.T) {
	t.Parallel()
	bill := startBilling(t)
	target, err := url.Parse(bill.URL)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var keys, tokens []string
	proxy := &httputil.ReverseProxy{Rewrite: func(pr *httputil.ProxyRequest) {
		pr.SetURL(target)
		if pr.In.Method == http.MethodPost && pr.In.URL.Path == "/payments" {
			mu.Lock()
			keys = append(keys, pr.In.Header.Get("Idempotency-Key"))
			tokens = append(tokens, pr.In.Header.Get(orderTokenHeader))
			mu.Unlock()
		}
	}}
	front := httptest.NewServer(proxy)
	t.Cleanup(front.Close)

	b := setup(t, setupOpts{billingURL: front.URL})
	sku := b.newSKU(t, 5, 300)
	var ids []int64
	for range 2 {
		r := b.svc.Do(t, http.MethodPost, "/orders", orderBody(sku, 1), exampletest.JSON(exampletest.Bearer(t, "ada")...)...)
		if r.Status != http.StatusCreated {
			t.Fatalf("POST /orders = %d %s", r.Status, r.Body)
		}
		ids = append(ids, decodeOrder(t, r.Body).ID)
	}
	mu.Lock()
	defer mu.Unlock()
	uuid := regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
	if len(keys) != 2 || keys[0] == keys[1] {
		t.Fatalf("charge keys %q, want two different ones", keys)
	}
	for i, k := range keys {
		if !uuid.MatchString(k) {
			t.Errorf("order %d charged with key %q, want a random UUID", ids[i], k)
		}
		if tokens[i] == "" {
			t.Errorf("order %d charged without an Order-Token", ids[i])
		}
	}
}

// TestAnotherCustomerCannotPay: bob, with a valid token of his own, calls
// billing directly to pay ada's order and a future order id (to block
// whoever places it): refused, no payment, and ada's next order is paid as
// usual.
func TestAnotherCustomerCannotPay(t *testing.T) {
	t.Parallel()
	bill := startBilling(t)
	b := setup(t, setupOpts{billingURL: bill.URL})
	sku := b.newSKU(t, 5, 400)
	r := b.svc.Do(t, http.MethodPost, "/orders", orderBody(sku, 1), exampletest.JSON(exampletest.Bearer(t, "ada")...)...)
	if r.Status != http.StatusCreated {
		t.Fatalf("POST /orders = %d %s", r.Status, r.Body)
	}
	id := decodeOrder(t, r.Body).ID
	// A future order's id: far ahead, since the tests running beside this
	// one place (and pay) the ids right after ada's.
	for _, target := range []int64{id, id + 1_000_000} {
		body := `{"order_id":` + itoa(target) + `,"amount_minor":400,"currency":"EUR"}`
		p := bill.Do(t, http.MethodPost, "/payments", body,
			exampletest.JSON(append(exampletest.Bearer(t, "bob"), "Idempotency-Key", "order-"+itoa(target))...)...)
		if p.Status != http.StatusForbidden {
			t.Fatalf("bob paying order %d at billing = %d %s", target, p.Status, p.Body)
		}
		if n := billingPayments(t, target); target != id && n != 0 {
			t.Fatalf("%d payments for order %d after bob's attempt", n, target)
		}
	}
	if n := billingPayments(t, id); n != 1 {
		t.Fatalf("%d payments for ada's order %d, want her 1", n, id)
	}
	if r := b.svc.Get(t, "/orders/"+itoa(id), exampletest.Bearer(t, "bob")...); r.Status != http.StatusNotFound {
		t.Fatalf("bob's GET of ada's order = %d %s", r.Status, r.Body)
	}
	if inv := bill.Get(t, "/invoices/"+itoa(id), exampletest.Bearer(t, "bob")...); inv.Status != http.StatusNotFound {
		t.Fatalf("bob's GET of ada's invoice at billing = %d %s", inv.Status, inv.Body)
	}
	r = b.svc.Do(t, http.MethodPost, "/orders", orderBody(sku, 1), exampletest.JSON(exampletest.Bearer(t, "ada")...)...)
	if o := decodeOrder(t, r.Body); r.Status != http.StatusCreated || o.Status != "paid" {
		t.Fatalf("ada's next order = %d %s", r.Status, r.Body)
	}
}

// TestSameKeyWhileBillingCharges: a second request with the client's
// Idempotency-Key arrives while billing is still running the first one's
// charge (held on a row lock of billing's database): it gets 409 with
// Retry-After, not a 502, and nothing is charged twice; the first gets its
// 201, and the retry with the same key gets the same order, paid.
func TestSameKeyWhileBillingCharges(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	sku := b.newSKU(t, 5, 700)
	const key = "same-key-while-charging"
	var id int64
	if err := b.db.QueryRow(context.Background(), `
		INSERT INTO orders (sku, quantity, amount_minor, currency, email, customer, idempotency_key)
		VALUES ($1, 1, 700, 'EUR', 'ada@example.com', 'ada', $2) RETURNING id`, sku, key).Scan(&id); err != nil {
		t.Fatal(err)
	}

	// Billing's insert of this order's invoice waits on this transaction.
	ctx := context.Background()
	hold, err := pgx.Connect(ctx, billingURL)
	if err != nil {
		t.Fatal(err)
	}
	defer hold.Close(ctx)
	tx, err := hold.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	// Another connection watches: pg_stat_activity is read once per
	// transaction.
	watch, err := pgx.Connect(ctx, billingURL)
	if err != nil {
		t.Fatal(err)
	}
	defer watch.Close(ctx)
	if _, err := tx.Exec(ctx, `INSERT INTO invoices (id, amount_minor, currency, customer) VALUES ($1, 700, 'EUR', 'ada')`, id); err != nil {
		t.Fatal(err)
	}

	post := func() jfasttest.Response {
		return b.svc.Do(t, http.MethodPost, "/orders", orderBody(sku, 1),
			exampletest.JSON(append(exampletest.Bearer(t, "ada"), "Idempotency-Key", key)...)...)
	}
	first := make(chan jfasttest.Response, 1)
	go func() { first <- post() }()
	// Until billing's insert waits on the held row: within the billing
	// upstream's timeout (10 s), after which the charge would have failed.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		var n int
		if err := watch.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%INSERT INTO invoices%'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			break
		}
		select {
		case r := <-first:
			t.Fatalf("the first request ended before its charge waited: %d %s", r.Status, r.Body)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("billing's charge of order %d never waited on the held row", id)
		}
	}

	second := post()
	if second.Status != http.StatusConflict || second.Header.Get("Retry-After") == "" {
		t.Errorf("the same key while billing charges = %d (Retry-After %q) %s, want 409 with Retry-After",
			second.Status, second.Header.Get("Retry-After"), second.Body)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if r := <-first; r.Status != http.StatusCreated || decodeOrder(t, r.Body).ID != id {
		t.Fatalf("the first request = %d %s", r.Status, r.Body)
	}
	if r := post(); r.Status != http.StatusCreated || decodeOrder(t, r.Body).ID != id || decodeOrder(t, r.Body).Status != "paid" {
		t.Fatalf("the retry with the same key = %d %s", r.Status, r.Body)
	}
	if n := billingPayments(t, id); n != 1 {
		t.Fatalf("%d payments for order %d, want 1", n, id)
	}
}
