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

type handlers struct {
	db *db.DB
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
	var inv Invoice
	err = h.db.QueryRow(r.Context(), `SELECT id, amount_minor, currency, status, created_at FROM invoices WHERE id = $1`, id).
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
	p := Payment{InvoiceID: req.OrderID, AmountMinor: req.AmountMinor, Currency: req.Currency, Status: "paid"}
	err := h.db.Tx(r.Context(), func(tx pgx.Tx) error {
		_, err := tx.Exec(r.Context(),
			`INSERT INTO invoices (id, amount_minor, currency) VALUES ($1, $2, $3)`,
			req.OrderID, req.AmountMinor, req.Currency)
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
