package service

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/golang-jwt/jwt/v5"
	"github.com/jackc/pgx/v5"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/jfastframework/jfast/examples/inventory/shoppb"
	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/plugins/auth"
	jhttp "github.com/jfastframework/jfast/plugins/http"
	"github.com/jfastframework/jfast/plugins/mail"
	"github.com/jfastframework/jfast/problem"
)

const orderColumns = `id, sku, quantity, amount_minor, currency, email, status, created_at, customer, charge_key`

func scanOrder(row pgx.Row, o *Order) error {
	return row.Scan(&o.ID, &o.SKU, &o.Quantity, &o.AmountMinor, &o.Currency, &o.Email, &o.Status, &o.CreatedAt, &o.customer, &o.chargeKey)
}

func customer(r *http.Request) string {
	c, _ := auth.ClaimsFrom(r.Context()) // RequireAuth let the request in: the claims are there
	return c.Subject
}

// createOrder inserts the order and reserves its items in one transaction, then
// charges billing; the confirmation mail is enqueued by the charge, in the
// transaction that marks the order paid.
//
// With an Idempotency-Key the request can be retried safely, whatever failed:
// the key is unique per customer in the orders table, so a retry finds the
// order the first attempt committed, and the charge carries the order's own
// charge key and the same body, so billing answers a charge it already made
// with its stored result instead of charging again. Without a key a client
// retry places a second order (the http client's own retries of the charge
// are still safe: they carry the charge key).
func (s *service) createOrder(w http.ResponseWriter, r *http.Request) error {
	key := r.Header.Get("Idempotency-Key")
	if len(key) > 255 {
		return problem.BadRequest("Idempotency-Key is longer than 255 bytes")
	}
	var req OrderRequest
	if err := framework.DecodeJSON(r, &req, framework.DisallowUnknownFields()); err != nil {
		return err // 415, 413, 400 or 422, saying what is wrong and where
	}
	if err := req.validate(); err != nil {
		return err
	}
	who := customer(r)

	var o Order
	created := false
	err := s.db.Tx(r.Context(), func(tx pgx.Tx) error {
		var price int64
		var currency string
		err := tx.QueryRow(r.Context(), `SELECT price_minor, currency FROM stock WHERE sku = $1`, req.SKU).Scan(&price, &currency)
		if errors.Is(err, pgx.ErrNoRows) {
			return problem.Unprocessable("the order is invalid", problem.FieldError{Field: "sku", Detail: "no such sku"})
		}
		if err != nil {
			return err
		}
		var nullableKey *string
		if key != "" {
			nullableKey = &key
		}
		err = scanOrder(tx.QueryRow(r.Context(), `
			INSERT INTO orders (sku, quantity, amount_minor, currency, email, customer, idempotency_key)
			VALUES ($1, $2, $3, $4, $5, $6, $7)
			ON CONFLICT (customer, idempotency_key) DO NOTHING
			RETURNING `+orderColumns,
			req.SKU, req.Quantity, price*int64(req.Quantity), currency, req.Email, who, nullableKey), &o)
		if errors.Is(err, pgx.ErrNoRows) { // a retry: the first attempt committed this key's order
			err = scanOrder(tx.QueryRow(r.Context(),
				`SELECT `+orderColumns+` FROM orders WHERE customer = $1 AND idempotency_key = $2`, who, key), &o)
			if err != nil {
				return err
			}
			if o.SKU != req.SKU || o.Quantity != req.Quantity || o.Email != req.Email {
				return problem.Unprocessable("this Idempotency-Key was used for another order; use a new key for a new order")
			}
			return nil
		}
		if err != nil {
			return err
		}
		created = true
		// Last, so that running out of stock (or the inventory being
		// unreachable) rolls back the order.
		return s.reserve(r.Context(), o)
	})
	if err != nil {
		return err
	}
	if created {
		// Best effort: the entry expires within 30 s anyway.
		if err := s.cache.Delete(r.Context(), stockKey(o.SKU)); err != nil {
			s.log.WarnContext(r.Context(), "orders: stock cache entry not deleted", "sku", o.SKU, "err", err)
		}
	}
	if o.Status != "paid" {
		if err := s.charge(r.Context(), &o); err != nil {
			return err
		}
	}
	w.Header().Set("Location", "/orders/"+strconv.FormatInt(o.ID, 10))
	return framework.JSON(w, http.StatusCreated, o)
}

// reserve takes the order's items through the inventory's Reserve. Reserve
// is not in the upstream's idempotent_methods, so it is never retried: a
// Reserve whose answer was lost may have reserved, and a retry would reserve
// again. Its failure rolls the order back; a reservation whose order then
// fails to commit stays taken (the inventory of a real shop expires
// reservations that no order confirms).
func (s *service) reserve(ctx context.Context, o Order) error {
	_, err := s.inventory.Reserve(ctx, &shoppb.ReserveRequest{
		Sku: o.SKU, Quantity: int64(o.Quantity), OrderId: strconv.FormatInt(o.ID, 10),
	})
	switch status.Code(err) {
	case codes.OK:
		return nil
	case codes.FailedPrecondition:
		return problem.Conflict(fmt.Sprintf("not enough %s in stock for %d", o.SKU, o.Quantity))
	case codes.NotFound:
		return problem.Unprocessable("the order is invalid", problem.FieldError{Field: "sku", Detail: "not in the inventory"})
	}
	return err // no answer from the inventory: 503 naming inventory
}

// orderTokenTTL bounds an order token: long enough for the charge and its
// retries (the billing upstream's timeout is 10 s), short enough that
// one seen in a log is soon worthless.
const orderTokenTTL = 5 * time.Minute

// charge pays the order through billing's POST /payments, then marks it paid
// and enqueues its confirmation mail in one transaction: a customer is never
// thanked for an order billing did not take, and a paid order always gets its
// mail.
//
// The call carries the caller's bearer token (forward_authorization), the
// order's charge key as Idempotency-Key (random, so nobody can guess it, and
// the same on every retry), and an order token: orders' signed word that this
// order, at this amount, is the caller's. Billing pays nothing without it,
// so a customer calling billing directly cannot pay someone else's order.
func (s *service) charge(ctx context.Context, o *Order) error {
	token, err := s.auth.Issue(ctx, auth.Claims{
		RegisteredClaims: jwt.RegisteredClaims{Subject: o.customer, ExpiresAt: jwt.NewNumericDate(time.Now().Add(orderTokenTTL))},
		Custom: map[string]any{
			"order_id":     strconv.FormatInt(o.ID, 10),
			"amount_minor": strconv.FormatInt(o.AmountMinor, 10),
			"currency":     o.Currency,
		},
	})
	if err != nil {
		return err
	}
	resp, err := s.billing.Post(ctx, "/payments",
		payment{OrderID: o.ID, AmountMinor: o.AmountMinor, Currency: o.Currency},
		jhttp.IdempotencyKey(o.chargeKey), jhttp.Header(orderTokenHeader, token))
	if err != nil {
		return err // no answer from billing: 503 naming billing; the order stays pending
	}
	if resp.StatusCode >= 500 {
		return problem.BadGateway("billing", fmt.Sprintf("billing answered %d to the payment of order %d; it stays pending", resp.StatusCode, o.ID))
	}
	if resp.StatusCode == http.StatusConflict && resp.Header.Get("Retry-After") != "" {
		// Billing is running a charge with this order's charge key: another
		// request with the client's Idempotency-Key (on this replica or
		// another) is paying the order right now. Not a refusal: the client
		// retries with its key, after Retry-After, and gets the paid order.
		p := problem.Conflict(fmt.Sprintf("order %d is being paid by another request with this Idempotency-Key; retry with the same key", o.ID))
		p.RetryAfter = retryAfter(resp.Header.Get("Retry-After"))
		return p
	}
	if resp.StatusCode != http.StatusCreated {
		return problem.BadGateway("billing", fmt.Sprintf("billing refused the payment of order %d with %d", o.ID, resp.StatusCode))
	}
	marked := false
	err = s.db.Tx(ctx, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `UPDATE orders SET status = 'paid' WHERE id = $1 AND status = 'pending'`, o.ID)
		if err != nil || tag.RowsAffected() == 0 {
			return err // already marked by a concurrent retry: its mail is on its way
		}
		marked = true
		return s.mail.SendTx(ctx, tx, confirmation(*o))
	})
	if err != nil {
		return err // billing has the payment; the retry (same charge key) finishes the job
	}
	o.Status = "paid"
	if marked {
		s.paid(ctx, o)
	}
	return nil
}

// retryAfter reads a Retry-After in seconds; anything else is one second,
// billing's idempotency retry_after.
func retryAfter(v string) time.Duration {
	if n, err := strconv.Atoi(v); err == nil && n > 0 {
		return time.Duration(n) * time.Second
	}
	return time.Second
}

func confirmation(o Order) mail.Message {
	return mail.Message{
		To:      []string{o.Email},
		Subject: fmt.Sprintf("Order %d: %d × %s", o.ID, o.Quantity, o.SKU),
		Text: fmt.Sprintf("Thank you for your order %d: %d × %s, %d.%02d %s.\n",
			o.ID, o.Quantity, o.SKU, o.AmountMinor/100, o.AmountMinor%100, o.Currency),
	}
}

func (req OrderRequest) validate() error {
	var bad []problem.FieldError
	if req.SKU == "" {
		bad = append(bad, problem.FieldError{Field: "sku", Detail: "required"})
	}
	if req.Quantity < 1 || req.Quantity > 100 {
		bad = append(bad, problem.FieldError{Field: "quantity", Detail: "must be between 1 and 100"})
	}
	if at := strings.IndexByte(req.Email, '@'); at < 1 || at == len(req.Email)-1 {
		bad = append(bad, problem.FieldError{Field: "email", Detail: "must be an email address"})
	}
	if len(bad) > 0 {
		return problem.Unprocessable("the order is invalid", bad...)
	}
	return nil
}

// getOrder answers the order with its invoice from billing.
func (s *service) getOrder(w http.ResponseWriter, r *http.Request) error {
	o, err := s.loadOrder(r)
	if err != nil {
		return err
	}
	resp, err := s.billing.Get(r.Context(), "/invoices/"+strconv.FormatInt(o.ID, 10))
	if err != nil {
		return err // timeout, refused, breaker open, bulkhead full: 503 naming billing
	}
	switch {
	case resp.StatusCode == http.StatusNotFound:
		return problem.NotFound("no invoice for this order")
	case resp.StatusCode >= 500:
		return problem.BadGateway("billing", fmt.Sprintf("billing answered %d", resp.StatusCode))
	case resp.StatusCode != http.StatusOK:
		return problem.BadGateway("billing", fmt.Sprintf("billing answered %d to GET /invoices/%d", resp.StatusCode, o.ID))
	}
	var inv Invoice
	if err := jhttp.DecodeJSON(resp, &inv); err != nil {
		return problem.BadGateway("billing", "billing's invoice is not the JSON expected")
	}
	return framework.JSON(w, http.StatusOK, struct {
		Order   Order   `json:"order"`
		Invoice Invoice `json:"invoice"`
	}{o, inv})
}

// loadOrder reads the order of the URL's id; another customer's order is a 404.
func (s *service) loadOrder(r *http.Request) (Order, error) {
	var o Order
	id, err := strconv.ParseInt(chi.URLParam(r, "id"), 10, 64)
	if err != nil || id <= 0 {
		return o, problem.NotFound("no such order")
	}
	err = scanOrder(s.db.QueryRow(r.Context(), `SELECT `+orderColumns+` FROM orders WHERE id = $1 AND customer = $2`, id, customer(r)), &o)
	if errors.Is(err, pgx.ErrNoRows) {
		return o, problem.NotFound("no such order")
	}
	return o, err
}
