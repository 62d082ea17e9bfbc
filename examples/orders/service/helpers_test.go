package service

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"strconv"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/jackc/pgx/v5"

	billing "github.com/jfastframework/jfast/examples/billing/service"
	"github.com/jfastframework/jfast/examples/internal/exampletest"
	inventory "github.com/jfastframework/jfast/examples/inventory/service"
	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/jfasttest"
	"github.com/jfastframework/jfast/plugins/cache"
	"github.com/jfastframework/jfast/plugins/db"
	jgrpc "github.com/jfastframework/jfast/plugins/grpc"
)

// bundle is what a test gets from setup.
type bundle struct {
	svc   *jfasttest.Service
	db    *db.DB
	cache *cache.Plugin
	stock *inventory.Store // the stock of the inventory service the test started
}

type setupOpts struct {
	billingURL string   // billing's base_url; empty starts billing in-process
	inventory  string   // the inventory upstream's target; empty starts inventory in-process
	cacheURL   string   // empty: the machine's Redis
	replace    []string // old, new pairs applied to jfast.toml
}

// startBilling runs examples/billing from its own jfast.toml on the private
// billing database.
func startBilling(t *testing.T, replace ...string) *jfasttest.Service {
	t.Helper()
	return jfasttest.Start(t, jfasttest.Options{
		TOML:    exampletest.Config(t, "../../billing/jfast.toml", replace...),
		Plugins: billing.Options().Plugins,
		Routes:  billing.Routes,
		Env:     map[string]string{"JFAST_DB_URL": billingURL},
	})
}

// startInventory runs examples/inventory from its own jfast.toml, gRPC on a
// free port, serving store; it returns the gRPC address.
func startInventory(t *testing.T, store *inventory.Store) string {
	t.Helper()
	p := jgrpc.New()
	jfasttest.Start(t, jfasttest.Options{
		TOML:    exampletest.Config(t, "../../inventory/jfast.toml", `listen = "127.0.0.1:9020"`, `listen = "127.0.0.1:0"`),
		Plugins: []framework.Plugin{p},
		Routes:  inventory.Routes(store),
	})
	return p.Addr()
}

// setup runs orders from its own jfast.toml on the private database, with its
// own Redis key prefix (the app name) and storage directory.
func setup(t *testing.T, o setupOpts) *bundle {
	t.Helper()
	if o.billingURL == "" {
		o.billingURL = startBilling(t).URL
	}
	b := &bundle{stock: inventory.NewStore(nil)}
	if o.inventory == "" {
		o.inventory = startInventory(t, b.stock)
	}
	env := map[string]string{
		"JFAST_DB_URL": ordersURL,
		"JFAST_GRPC_UPSTREAMS__INVENTORY__TARGET": o.inventory,
		"JFAST_HTTP_UPSTREAMS__BILLING__BASE_URL": o.billingURL,
		"JFAST_STORAGE_DISKS__RECEIPTS__ROOT":     t.TempDir(),
	}
	if o.cacheURL != "" {
		env["JFAST_CACHE_URL"] = o.cacheURL
	}
	b.svc = jfasttest.Start(t, jfasttest.Options{
		TOML: exampletest.Config(t, "../jfast.toml",
			append([]string{`name = "orders"`, `name = "orders-test-` + random() + `"`,
				`public_url = "http://127.0.0.1:8000"`, `public_url = ""`}, o.replace...)...),
		Plugins: Options().Plugins,
		Env:     env,
		Routes: func(app *framework.App, r chi.Router) error {
			var err error
			if b.db, err = db.Get(app); err != nil {
				return err
			}
			if b.cache, err = cache.From(app); err != nil {
				return err
			}
			return Routes(app, r)
		},
	})
	return b
}

func random() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// newSKU adds a SKU of its own to the catalogue (its price) and to the
// inventory (how many are available), so tests do not share counts.
func (b *bundle) newSKU(t *testing.T, available int, price int64) string {
	t.Helper()
	sku := "sku-" + random()
	if _, err := b.db.Exec(context.Background(),
		`INSERT INTO stock (sku, price_minor) VALUES ($1, $2)`, sku, price); err != nil {
		t.Fatal(err)
	}
	b.stock.Set(sku, int64(available))
	return sku
}

// available is the inventory's stock of sku.
func (b *bundle) available(sku string) int {
	n, _ := b.stock.Available(sku)
	return int(n)
}

// insertOrder adds an order straight to the database (no charge, no mail).
func (b *bundle) insertOrder(t *testing.T, customer string) int64 {
	t.Helper()
	sku := b.newSKU(t, 1, 100)
	var id int64
	if err := b.db.QueryRow(context.Background(), `
		INSERT INTO orders (sku, quantity, amount_minor, currency, email, customer)
		VALUES ($1, 1, 100, 'EUR', 'ada@example.com', $2) RETURNING id`, sku, customer).Scan(&id); err != nil {
		t.Fatal(err)
	}
	return id
}

// count runs a count(*) query on the orders database.
func (b *bundle) count(t *testing.T, sql string, args ...any) int {
	t.Helper()
	var n int
	if err := b.db.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// mailJobs counts the confirmation mails enqueued for sku. The queue's
// postgres backend keeps jobs in River's river_job table, the mail plugin's
// message as the job's payload.
func (b *bundle) mailJobs(t *testing.T, sku string) int {
	if b.count(t, `SELECT count(*) FROM pg_class WHERE oid = to_regclass('river_job')`) == 0 {
		return 0 // the queue has not made its tables yet: nothing enqueued
	}
	return b.count(t, `SELECT count(*) FROM river_job WHERE kind = 'mail.send'
		AND args->'job'->'payload'->>'subject' LIKE '% × ' || $1`, sku)
}

// billingPayments counts billing's payments for an order.
func billingPayments(t *testing.T, order int64) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, billingURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var n int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM payments WHERE invoice_id = $1`, order).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// closedPort returns a loopback address where connections are refused until
// the test ends (jfasttest.RefusedAddr holds the port).
func closedPort(t *testing.T) string { return jfasttest.RefusedAddr(t) }

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
