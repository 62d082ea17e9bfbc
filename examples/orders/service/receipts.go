package service

import (
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/plugins/storage"
	"github.com/jfastframework/jfast/problem"
)

const (
	// maxReceipt bounds an upload, in place of app.max_body_bytes: a scanned
	// receipt is well under 5 MiB.
	maxReceipt = 5 << 20
	// receiptURLTTL is how long a receipt's temporary URL works.
	receiptURLTTL = 15 * time.Minute
)

func receiptKey(id int64) string { return "order-" + strconv.FormatInt(id, 10) }

type receiptLink struct {
	URL       string    `json:"url"`
	ExpiresAt time.Time `json:"expires_at"`
}

// putReceipt streams the body to the receipts disk (never whole in memory).
func (s *service) putReceipt(w http.ResponseWriter, r *http.Request) error {
	o, err := s.loadOrder(r)
	if err != nil {
		return err
	}
	// The route reads at most maxReceipt bytes (framework.MaxBodyBytes).
	body := storage.Sized(r.Body, r.ContentLength)
	if err := s.receipts.Put(r.Context(), receiptKey(o.ID), body, r.Header.Get("Content-Type")); err != nil {
		return err // 503 naming storage, 413 over maxReceipt, 400 for a body cut short, 408 for one too slow
	}
	link, err := s.receiptLink(r, o.ID)
	if err != nil {
		return err
	}
	w.Header().Set("Location", "/orders/"+strconv.FormatInt(o.ID, 10)+"/receipt")
	return framework.JSON(w, http.StatusCreated, link)
}

// getReceipt answers a temporary URL to the receipt.
func (s *service) getReceipt(w http.ResponseWriter, r *http.Request) error {
	o, err := s.loadOrder(r)
	if err != nil {
		return err
	}
	if _, err := s.receipts.Stat(r.Context(), receiptKey(o.ID)); errors.Is(err, storage.ErrNotExist) {
		return problem.NotFound("no receipt for this order")
	} else if err != nil {
		return err
	}
	link, err := s.receiptLink(r, o.ID)
	if err != nil {
		return err
	}
	return framework.JSON(w, http.StatusOK, link)
}

func (s *service) receiptLink(r *http.Request, id int64) (receiptLink, error) {
	u, err := s.receipts.TemporaryURL(r.Context(), receiptKey(id), receiptURLTTL)
	if err != nil {
		return receiptLink{}, err
	}
	return receiptLink{URL: u, ExpiresAt: time.Now().Add(receiptURLTTL).UTC().Truncate(time.Second)}, nil
}
