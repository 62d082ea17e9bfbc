// Package service is the inventory example: a gRPC service (shop.Inventory,
// examples/inventory/shoppb) served by the grpc plugin next to the usual
// HTTP endpoints (/health, /ready, /metrics). examples/orders reads stock
// through GetStock (which its client retries: it changes nothing) and takes
// items with Reserve (which it never retries: every call reserves again).
//
//	GetStock  how many items of a SKU are available (NOT_FOUND for no such SKU)
//	Reserve   take items out of the stock (FAILED_PRECONDITION when too few)
//	Export    every SKU and its stock, streamed in SKU order
//
// The stock lives in the process's memory, seeded at boot ([Seed]): enough
// for an example, and it keeps the service to one dependency-free binary. A
// real inventory keeps it in a database.
package service
