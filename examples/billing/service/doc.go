// Package service is the billing example's HTTP service: invoices and
// idempotent payments in PostgreSQL. examples/billing's main serves it on
// 127.0.0.1:8010; examples/orders calls it, and its tests start it in-process.
//
//	GET  /invoices/{id}  the invoice of order id: 200 JSON, or 404 problem
//	                     (also for another customer's invoice)
//	POST /payments       charge an order; Idempotency-Key required, kept per
//	                     caller: the same key with the same body answers the
//	                     stored result, the same key with another body 422 (the
//	                     idempotency plugin); an Order-Token from orders must
//	                     say the order is the caller's, for this amount (403)
//
// Both routes need a bearer token (the auth plugin, hmac mode): orders
// forwards its caller's token, and billing answers for its subject only.
package service
