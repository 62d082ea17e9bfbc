package service

import (
	"bufio"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jfastframework/jfast/examples/internal/exampletest"
)

// TestOrderPaidEvent: GET /events streams order.paid; paying an order sends
// it, with the stream entry's id, as `curl -N localhost:8000/events` shows.
func TestOrderPaidEvent(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	resp, err := http.Get(b.svc.URL + "/events")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("GET /events = %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	lines := make(chan string, 64)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	// The stream is open once its first line (the retry delay) arrived.
	if l := <-lines; !strings.HasPrefix(l, "retry: ") {
		t.Fatalf("first line = %q", l)
	}
	// The stream's reader of order.paid reads from Redis once /ready says so.
	deadline := time.Now().Add(10 * time.Second)
	for tailState(t, b) != "up" {
		if time.Now().After(deadline) {
			t.Fatalf("order.paid's reader is not up: %s", b.svc.Get(t, "/ready"))
		}
		time.Sleep(20 * time.Millisecond)
	}

	sku := b.newSKU(t, 5, 999)
	r := b.svc.Do(t, http.MethodPost, "/orders", orderBody(sku, 2), exampletest.JSON(exampletest.Bearer(t, "ada")...)...)
	if r.Status != http.StatusCreated {
		t.Fatalf("POST /orders = %d %s", r.Status, r.Body)
	}
	o := decodeOrder(t, r.Body)

	var id string
	timeout := time.After(10 * time.Second)
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatal("the stream ended")
			}
			if v, ok := strings.CutPrefix(l, "id: "); ok {
				id = v
			}
			data, ok := strings.CutPrefix(l, "data: ")
			if !ok {
				continue
			}
			var ev OrderPaid
			if err := json.Unmarshal([]byte(data), &ev); err != nil {
				t.Fatalf("event data %q: %v", data, err)
			}
			if ev.ID != o.ID || ev.SKU != sku || ev.Quantity != 2 || ev.AmountMinor != 1998 || ev.Currency != "EUR" || id == "" {
				t.Fatalf("event id %q data %+v, want order %d", id, ev, o.ID)
			}
			if strings.Contains(data, "ada@example.com") {
				t.Fatalf("the public event carries the email: %s", data)
			}
			return
		case <-timeout:
			t.Fatal("no order.paid event within 10s")
		}
	}
}

// tailState is the state /ready gives the reader behind GET /events.
func tailState(t *testing.T, b *bundle) string {
	var body struct {
		Checks map[string]struct {
			Meta struct {
				Subscriptions map[string]struct {
					State string `json:"state"`
				} `json:"subscriptions"`
			} `json:"meta"`
		} `json:"checks"`
	}
	if err := json.Unmarshal(b.svc.Get(t, "/ready").Body, &body); err != nil {
		t.Fatal(err)
	}
	return body.Checks["channels"].Meta.Subscriptions["sse tail order.paid"].State
}
