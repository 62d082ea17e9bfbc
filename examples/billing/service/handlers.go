package service

import (
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/plugins/auth"
	"github.com/jfastframework/jfast/plugins/db"
	"github.com/jfastframework/jfast/problem"
)

// Invoice is what GET /invoices/{id} answers.
type Invoice struct {
	ID          int64     `json:"id"`
	AmountMinor int64     `json:"amount_minor"`
	Currency    string    `json:"currency"`
	Status      string    `json:"status"`
	CreatedAt   time.Time `json:"created_at"`
}

// PaymentRequest is the body of POST /payments.
type PaymentRequest struct {
	OrderID     int64  `json:"order_id"`
	AmountMinor int64  `json:"amount_minor"`
	Currency    string `json:"currency"`
}

// Payment is what POST /payments answers (201).
type Payment struct {
	ID          int64  `json:"payment_id"`
	InvoiceID   int64  `json:"invoice_id"`
	AmountMinor int64  `json:"amount_minor"`
	Currency    string `json:"currency"`
	Status      string `json:"status"`
}

// OrderTokenHeader carries orders' word that the caller owns the order it
// pays: a token orders signs (the auth plugin's Issue) for the customer, with
// the order's id, amount and currency as claims. The caller's own bearer
// token says who pays; only orders can say whose order it is.
const OrderTokenHeader = "Order-Token"

// The claims of an order token, all strings (numbers in a JWT are floats).
const (
	claimOrderID     = "order_id"
	claimAmountMinor = "amount_minor"
	claimCurrency    = "currency"
)

type handlers struct {
	db   *db.DB
	auth *auth.Plugin
}

func subject(r *http.Request) string {
	if c, ok := auth.ClaimsFrom(r.Context()); ok {
		return c.Subject
	}
	return ""
}

func (h *handlers) invoice(w http.ResponseWriter, r *http.Request) error {
	id, err := strconv.ParseInt(chi.URLParam(r, "id"), 10, 64)
	if err != nil || id <= 0 {
		return problem.NotFound("no such invoice")
	}
	// Another customer's invoice is as absent as one that does not exist: a
	// 403 would tell bob that ada's order 7 was paid.
	var inv Invoice
	err = h.db.QueryRow(r.Context(), `SELECT id, amount_minor, currency, status, created_at FROM invoices WHERE id = $1 AND customer = $2`, id, subject(r)).
		Scan(&inv.ID, &inv.AmountMinor, &inv.Currency, &inv.Status, &inv.CreatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return problem.NotFound("no such invoice")
	}
	if err != nil {
		return err // database unreachable: 503 naming db
	}
	return framework.JSON(w, http.StatusOK, inv)
}

func (h *handlers) pay(w http.ResponseWriter, r *http.Request) error {
	var req PaymentRequest
	if err := framework.DecodeJSON(r, &req, framework.DisallowUnknownFields()); err != nil {
		return err // 415, 413, 400 or 422, saying what is wrong and where
	}
	var bad []problem.FieldError
	if req.OrderID <= 0 {
		bad = append(bad, problem.FieldError{Field: "order_id", Detail: "must be a positive order id"})
	}
	if req.AmountMinor <= 0 {
		bad = append(bad, problem.FieldError{Field: "amount_minor", Detail: "must be a positive amount in minor units (cents)"})
	}
	if len(req.Currency) != 3 {
		bad = append(bad, problem.FieldError{Field: "currency", Detail: "must be an ISO 4217 code such as EUR"})
	}
	if len(bad) > 0 {
		return problem.Unprocessable("the payment is invalid", bad...)
	}
	if err := h.checkOrder(r, req); err != nil {
		return err
	}
	p := Payment{InvoiceID: req.OrderID, AmountMinor: req.AmountMinor, Currency: req.Currency, Status: "paid"}
	err := h.db.Tx(r.Context(), func(tx pgx.Tx) error {
		_, err := tx.Exec(r.Context(),
			`INSERT INTO invoices (id, amount_minor, currency, customer) VALUES ($1, $2, $3, $4)`,
			req.OrderID, req.AmountMinor, req.Currency, subject(r))
		if err != nil {
			return err
		}
		return tx.QueryRow(r.Context(),
			`INSERT INTO payments (invoice_id, amount_minor, currency, payer) VALUES ($1, $2, $3, $4) RETURNING id`,
			req.OrderID, req.AmountMinor, req.Currency, subject(r)).Scan(&p.ID)
	})
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "23505" { // unique_violation on invoices.id
		return problem.Conflict("order " + strconv.FormatInt(req.OrderID, 10) + " is already paid (under another Idempotency-Key)")
	}
	if err != nil {
		return err
	}
	w.Header().Set("Location", "/invoices/"+strconv.FormatInt(req.OrderID, 10))
	return framework.JSON(w, http.StatusCreated, p)
}

// checkOrder refuses a payment unless orders vouches that the caller owns the
// order and that it costs what the body says: the Order-Token header must be
// a valid token (signed with the key billing verifies bearer tokens with)
// whose subject is the caller's and whose claims are this order, amount and
// currency. A customer calling billing directly has the bearer token but no
// order token for someone else's order, so cannot pay it, nor pay a future
// order id first to block its owner.
func (h *handlers) checkOrder(r *http.Request, req PaymentRequest) error {
	raw := r.Header.Get(OrderTokenHeader)
	if raw == "" {
		return problem.Forbidden("a payment needs the " + OrderTokenHeader + " orders signs for the order")
	}
	c, err := h.auth.Verify(r.Context(), raw)
	var refused *auth.TokenError
	if errors.As(err, &refused) {
		return problem.Forbidden("the " + OrderTokenHeader + " is not valid: " + string(refused.Reason))
	}
	if err != nil {
		return err // the verifier's dependency is down: 503 naming it
	}
	claim := func(name string) string { s, _ := c.Custom[name].(string); return s }
	if c.Subject != subject(r) {
		return problem.Forbidden("order " + strconv.FormatInt(req.OrderID, 10) + " is not the caller's")
	}
	if claim(claimOrderID) != strconv.FormatInt(req.OrderID, 10) ||
		claim(claimAmountMinor) != strconv.FormatInt(req.AmountMinor, 10) || claim(claimCurrency) != req.Currency {
		return problem.Forbidden("the " + OrderTokenHeader + " is for another order, amount or currency than the payment's")
	}
	return nil
}
