package service

import (
	"log/slog"
	"time"

	"github.com/jfastframework/jfast/examples/inventory/shoppb"
	"github.com/jfastframework/jfast/plugins/auth"
	"github.com/jfastframework/jfast/plugins/cache"
	"github.com/jfastframework/jfast/plugins/channels"
	"github.com/jfastframework/jfast/plugins/db"
	jhttp "github.com/jfastframework/jfast/plugins/http"
	"github.com/jfastframework/jfast/plugins/mail"
	"github.com/jfastframework/jfast/plugins/storage"
)

// service holds what the handlers use, all taken at boot.
type service struct {
	db       *db.DB
	cache    *cache.Plugin
	billing  *jhttp.ServiceClient
	mail     *mail.Plugin
	receipts *storage.Disk
	events   *channels.Plugin
	// inventory is examples/inventory's generated client on the grpc
	// plugin's "inventory" upstream.
	inventory shoppb.InventoryClient
	auth      *auth.Plugin
	log       *slog.Logger
}

// Stock is what GET /stock/{sku} answers.
type Stock struct {
	SKU        string `json:"sku"`
	Available  int    `json:"available"`
	PriceMinor int64  `json:"price_minor"`
	Currency   string `json:"currency"`
}

// OrderRequest is the body of POST /orders.
type OrderRequest struct {
	SKU      string `json:"sku"`
	Quantity int    `json:"quantity"`
	Email    string `json:"email"`
}

// Order is an order as the routes answer it.
type Order struct {
	ID          int64     `json:"id"`
	SKU         string    `json:"sku"`
	Quantity    int       `json:"quantity"`
	AmountMinor int64     `json:"amount_minor"`
	Currency    string    `json:"currency"`
	Email       string    `json:"email"`
	Status      string    `json:"status"`
	CreatedAt   time.Time `json:"created_at"`

	customer  string // the token's subject
	chargeKey string // the Idempotency-Key of its charge at billing
}

// Invoice is billing's invoice, as GET /orders/{id} shows it.
type Invoice struct {
	ID          int64     `json:"id"`
	AmountMinor int64     `json:"amount_minor"`
	Currency    string    `json:"currency"`
	Status      string    `json:"status"`
	CreatedAt   time.Time `json:"created_at"`
}

// orderTokenHeader is where billing's POST /payments takes the order token
// (billing's OrderTokenHeader; the services share a contract, not code).
const orderTokenHeader = "Order-Token"

// payment is the body of billing's POST /payments.
type payment struct {
	OrderID     int64  `json:"order_id"`
	AmountMinor int64  `json:"amount_minor"`
	Currency    string `json:"currency"`
}
