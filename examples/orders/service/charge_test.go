package service

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/jfastframework/jfast/examples/internal/exampletest"
)

// TestChargeAnswerLost is the lost answer of docs/design.md ("Calling other
// services"): billing stores the payment, then
// the caller gets a 503 instead of its answer (here a proxy that replaces
// billing's first answer). The http client retries the POST because it
// carries an Idempotency-Key, and billing answers the retry with the payment
// it stored: two requests, one charge, and the order is paid.
func TestChargeAnswerLost(t *testing.T) {
	t.Parallel()
	bill := startBilling(t)
	target, err := url.Parse(bill.URL)
	if err != nil {
		t.Fatal(err)
	}
	var payments, lost atomic.Int32
	proxy := httputil.NewSingleHostReverseProxy(target)
	proxy.ModifyResponse = func(resp *http.Response) error {
		if resp.Request.Method != http.MethodPost || resp.Request.URL.Path != "/payments" {
			return nil
		}
		if payments.Add(1) == 1 && resp.StatusCode == http.StatusCreated {
			lost.Add(1)
			_ = resp.Body.Close()
			resp.StatusCode = http.StatusServiceUnavailable
			resp.Status = "503 Service Unavailable"
			resp.Body = io.NopCloser(strings.NewReader("lost on the way"))
			resp.ContentLength = int64(len("lost on the way"))
			resp.Header = http.Header{"Content-Type": {"text/plain"}}
		}
		return nil
	}
	front := httptest.NewServer(proxy)
	t.Cleanup(front.Close)

	b := setup(t, setupOpts{billingURL: front.URL})
	sku := b.newSKU(t, 5, 1200)
	r := b.svc.Do(t, http.MethodPost, "/orders", orderBody(sku, 1),
		exampletest.JSON(append(exampletest.Bearer(t, "ada"), "Idempotency-Key", "lost-"+sku)...)...)
	if r.Status != http.StatusCreated {
		t.Fatalf("POST /orders = %d %s", r.Status, r.Body)
	}
	o := decodeOrder(t, r.Body)
	if o.Status != "paid" {
		t.Fatalf("order = %+v, want paid", o)
	}
	if lost.Load() != 1 || payments.Load() != 2 {
		t.Fatalf("billing saw %d POST /payments (%d answers lost), want 2 and 1", payments.Load(), lost.Load())
	}
	if n := billingPayments(t, o.ID); n != 1 {
		t.Fatalf("%d payments for order %d, want 1", n, o.ID)
	}
}
