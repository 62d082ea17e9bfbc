// Package service is the orders example's HTTP service: orders in PostgreSQL,
// paid through the billing example, stock checked and reserved through the
// inventory example over gRPC, with a cached stock route, a confirmation
// mail sent through the queue, and receipts on a storage disk.
//
//	GET  /stock/{sku}            price (PostgreSQL) and availability (inventory's
//	                             GetStock), cached 30 s in Redis (Remember);
//	                             Redis down: answered from both
//	GET  /events                 Bearer; server-sent events: order.paid for the
//	                             caller's own orders, from any replica (a
//	                             durable channel: Last-Event-ID resumes)
//	POST /orders                 Bearer; inserts the order and reserves its
//	                             items at the inventory (gRPC) in one
//	                             transaction, charges billing's POST
//	                             /payments (the order's random charge key, an
//	                             order token saying it is the caller's), marks
//	                             it paid and enqueues its confirmation mail in
//	                             one transaction, then publishes order.paid;
//	                             201 + Location
//	GET  /orders/{id}            Bearer; the order plus its invoice from billing
//	PUT  /orders/{id}/receipt    Bearer; stores the receipt on the "receipts" disk
//	GET  /orders/{id}/receipt    Bearer; a temporary URL to the receipt
//
// What a failing dependency does to each route is in docs/tutorial.md.
package service
