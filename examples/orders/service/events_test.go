package service

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jfastframework/jfast/examples/internal/exampletest"
)

// openEvents opens GET /events with headers and returns its lines, once the
// stream is open (its first line, the retry delay, arrived).
func openEvents(t *testing.T, b *bundle, headers ...string) <-chan string {
	t.Helper()
	return exampletest.Events(t, b.svc.URL+"/events", headers...)
}

// nextEvent returns the next event's id and data.
func nextEvent(t *testing.T, lines <-chan string) (string, OrderPaid) {
	t.Helper()
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
			if strings.Contains(data, "@example.com") {
				t.Fatalf("the event carries the email: %s", data)
			}
			var ev OrderPaid
			if err := json.Unmarshal([]byte(data), &ev); err != nil {
				t.Fatalf("event data %q: %v", data, err)
			}
			return id, ev
		case <-timeout:
			t.Fatal("no order.paid event within 10s")
		}
	}
}

// TestOrderPaidEvent: GET /events needs a token and streams the caller's own
// order.paid events: paying an order sends it to its customer, with the
// stream entry's id, and not to another customer, whose stream gets only
// their own; a Last-Event-ID replays only the caller's. Without a token
// (even with Last-Event-ID 0-0, the whole stream) the answer is 401.
func TestOrderPaidEvent(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	for _, h := range [][]string{nil, {"Last-Event-ID", "0-0"}, {"Authorization", "Bearer not-a-token", "Last-Event-ID", "0-0"}} {
		if r := b.svc.Get(t, "/events", h...); r.Status != http.StatusUnauthorized || r.Header.Get("Content-Type") != "application/problem+json" {
			t.Fatalf("GET /events with %q = %d %s", h, r.Status, r.Body)
		}
	}
	ada := openEvents(t, b, exampletest.Bearer(t, "ada")...)
	bob := openEvents(t, b, exampletest.Bearer(t, "bob")...)
	// The stream's reader of order.paid reads from Redis once /ready says so.
	deadline := time.Now().Add(10 * time.Second)
	for tailState(t, b) != "up" {
		if time.Now().After(deadline) {
			t.Fatalf("order.paid's reader is not up: %s", b.svc.Get(t, "/ready"))
		}
		time.Sleep(20 * time.Millisecond)
	}

	sku := b.newSKU(t, 5, 999)
	order := func(who string) Order {
		r := b.svc.Do(t, http.MethodPost, "/orders", orderBody(sku, 2), exampletest.JSON(exampletest.Bearer(t, who)...)...)
		if r.Status != http.StatusCreated {
			t.Fatalf("POST /orders as %s = %d %s", who, r.Status, r.Body)
		}
		return decodeOrder(t, r.Body)
	}
	adas := order("ada")
	bobs := order("bob")
	id, ev := nextEvent(t, ada)
	if ev.ID != adas.ID || ev.SKU != sku || ev.Quantity != 2 || ev.AmountMinor != 1998 || ev.Currency != "EUR" || ev.Customer != "ada" || id == "" {
		t.Fatalf("ada's stream: event id %q data %+v, want order %d", id, ev, adas.ID)
	}
	// bob's first event is his own order, not ada's, which came before it.
	if _, ev := nextEvent(t, bob); ev.ID != bobs.ID || ev.Customer != "bob" {
		t.Fatalf("bob's stream: %+v, want his order %d only", ev, bobs.ID)
	}
	// Replaying from the start gives bob his own order and nothing of ada's.
	again := openEvents(t, b, append(exampletest.Bearer(t, "bob"), "Last-Event-ID", "0-0")...)
	if _, ev := nextEvent(t, again); ev.Customer != "bob" {
		t.Fatalf("bob's replay from 0-0 sent %+v", ev)
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
