// Package service is the billing example's HTTP service: invoices and
// idempotent payments in PostgreSQL. examples/billing's main serves it on
// 127.0.0.1:8010; examples/orders calls it, and its tests start it in-process.
//
//	GET  /invoices/{id}  the invoice of order id: 200 JSON, or 404 problem
//	POST /payments       charge an order; Idempotency-Key required: the same
//	                     key with the same body answers the stored result, the
//	                     same key with another body 422 (the idempotency plugin)
//
// Both routes need a bearer token (the auth plugin, hmac mode): orders
// forwards its caller's token.
package service
