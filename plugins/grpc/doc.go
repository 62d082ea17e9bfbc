// Package grpc is how a jfast service calls gRPC services and serves gRPC:
// one [ServiceClient] per upstream per process, with one deadline over every
// attempt, retries only for the methods listed as idempotent (within a retry
// budget), a circuit breaker and a bulkhead per upstream, channels shared
// through a [Pool] only when their settings are identical; and a gRPC server
// whose every RPC gets a request ID, a deadline, panic recovery, an access
// log, metrics and tracing, with grpc.health.v1 answering from /ready's
// checks.
//
// Configure the upstreams and the server in jfast.toml:
//
//	[plugins]
//	enabled = ["observability", "grpc"]
//
//	[plugin.grpc.upstreams.inventory]
//	target = "inventory:9000"
//	insecure = true
//	idempotent_methods = ["/shop.Inventory/GetStock"]
//
//	[plugin.grpc.server]
//	listen = "127.0.0.1:9001"
//
// and take the client, or register services, once, when mounting routes:
//
//	func routes(app *framework.App, r chi.Router) error {
//		client, err := grpc.Client(app, "inventory")
//		if err != nil {
//			return err // unknown upstream: the boot fails naming it
//		}
//		inventory := shoppb.NewInventoryClient(client)
//		// ... handlers call inventory.GetStock(r.Context(), ...); a failure is
//		// an *Error, which renders as problem+json (503 naming "inventory"
//		// for an outage).
//
//		srv, err := grpc.Server(app)
//		if err != nil {
//			return err // [plugin.grpc.server] listen is not set
//		}
//		ordersv1.RegisterOrdersServer(srv, orders)
//		return nil
//	}
//
// Outside a service (a script, a test) build a client with [NewClient] and
// Close it when done.
//
// docs/grpc.md explains what is retried and why, the budget, the breaker,
// the channel pool, streams, what travels with a call, serving, every
// setting and what is tested.
package grpc
