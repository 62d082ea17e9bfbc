package service

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jfastframework/jfast/examples/internal/exampletest"
	"github.com/jfastframework/jfast/jfasttest"
)

func getStock(t *testing.T, b *bundle, sku string) Stock {
	t.Helper()
	r := b.svc.Get(t, "/stock/"+sku)
	var s Stock
	if err := json.Unmarshal(r.Body, &s); err != nil || r.Status != http.StatusOK {
		t.Fatalf("GET /stock/%s = %d %s", sku, r.Status, r.Body)
	}
	return s
}

// TestStockCached: the answer is remembered in Redis for 30 s; an order
// drops the SKU's entry.
func TestStockCached(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	sku := b.newSKU(t, 3, 700)
	if s := getStock(t, b, sku); s.Available != 3 || s.PriceMinor != 700 || s.Currency != "EUR" {
		t.Fatalf("stock = %+v", s)
	}
	ttl, ok, err := b.cache.TTL(context.Background(), stockKey(sku))
	if err != nil || !ok || ttl <= 0 || ttl > 30*time.Second {
		t.Fatalf("cache entry ttl = %v %v %v, want within 30s", ttl, ok, err)
	}
	b.stock.Set(sku, 9)
	if s := getStock(t, b, sku); s.Available != 3 {
		t.Fatalf("stock within the TTL = %d, want the cached 3", s.Available)
	}
	if r := b.svc.Do(t, http.MethodPost, "/orders", orderBody(sku, 1), exampletest.JSON(exampletest.Bearer(t, "ada")...)...); r.Status != http.StatusCreated {
		t.Fatalf("POST /orders = %d %s", r.Status, r.Body)
	}
	if s := getStock(t, b, sku); s.Available != 8 {
		t.Fatalf("stock after an order = %d, want 8 (the entry dropped)", s.Available)
	}
	if r := b.svc.Get(t, "/stock/no-such-sku"); r.Status != http.StatusNotFound {
		t.Fatalf("GET /stock/no-such-sku = %d %s", r.Status, r.Body)
	}
	if _, ok, _ := b.cache.Get(context.Background(), stockKey("no-such-sku")); ok {
		t.Fatal("a missing SKU was cached")
	}
}

// TestStockWithoutRedis: Redis is down and the route still answers from
// PostgreSQL and the inventory; /ready says cache is the problem, and stays 200 (degraded).
func TestStockWithoutRedis(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{cacheURL: "redis://" + closedPort(t) + "/0"})
	sku := b.newSKU(t, 4, 300)
	for range 3 {
		if s := getStock(t, b, sku); s.Available != 4 {
			t.Fatalf("stock = %+v", s)
		}
	}
	b.stock.Set(sku, 2)
	if s := getStock(t, b, sku); s.Available != 2 {
		t.Fatalf("stock without Redis = %d, want the inventory's 2", s.Available)
	}
	r := b.svc.Get(t, "/ready")
	if r.Status != http.StatusOK || !strings.Contains(r.String(), `"status":"degraded"`) || !strings.Contains(r.String(), `"cache":{"healthy":false`) {
		t.Fatalf("/ready without Redis = %d %s", r.Status, r.Body)
	}
}

// TestInventoryDown: with nothing listening at the inventory's address, GET
// /stock answers 503 naming inventory (GetStock retried within its timeout
// first), and POST /orders answers 503 naming inventory with nothing left
// behind: Reserve's failure rolls the order and its mail back.
func TestInventoryDown(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{inventory: closedPort(t)})
	sku := b.newSKU(t, 5, 100)
	for _, r := range []jfasttest.Response{
		b.svc.Get(t, "/stock/"+sku),
		b.svc.Do(t, http.MethodPost, "/orders", orderBody(sku, 1), exampletest.JSON(exampletest.Bearer(t, "ada")...)...),
	} {
		if r.Status != http.StatusServiceUnavailable || !strings.Contains(r.String(), `"upstream":"inventory"`) || !strings.Contains(r.String(), `"dependency":"inventory"`) {
			t.Fatalf("with the inventory down: %d %s", r.Status, r.Body)
		}
	}
	if n := b.count(t, `SELECT count(*) FROM orders WHERE sku = $1`, sku); n != 0 {
		t.Fatalf("%d orders left behind", n)
	}
	if n := b.mailJobs(t, sku); n != 0 {
		t.Fatalf("%d mails left behind", n)
	}
	if _, ok, _ := b.cache.Get(context.Background(), stockKey(sku)); ok {
		t.Fatal("a failed stock read was cached")
	}
}
