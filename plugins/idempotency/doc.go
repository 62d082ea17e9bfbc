// Package idempotency is jfast's server side of safe POST retries: a
// middleware that stores the first response to a request carrying an
// Idempotency-Key and answers a repeat of that request with the stored
// response instead of acting twice.
//
// The http plugin retries a POST only when the call carries an
// Idempotency-Key (http.IdempotencyKey); this plugin is what makes that retry
// safe on the receiving service.
//
// # Configuration
//
//	[plugins]
//	enabled = ["observability", "db", "auth", "idempotency"]
//
//	[plugin.idempotency]
//	store = "postgres"   # or "redis", with the cache plugin
//	scope = "caller"     # each caller its own keys; "global" shares them
//	ttl = "24h"
//
// See Config for every key and docs/idempotency.md for the reasons behind the
// defaults.
//
// # Example
//
//	func routes(app *framework.App, r chi.Router) error {
//		a, err := auth.From(app)
//		if err != nil {
//			return err
//		}
//		idem, err := idempotency.From(app)
//		if err != nil {
//			return err
//		}
//		r.With(a.RequireAuth(), idem.Middleware(idempotency.Opts{RequireKey: true})).
//			Post("/payments", framework.Handler(charge))
//		return nil
//	}
//
// # Behaviour
//
// A key belongs to its caller (Opts.Subject, by default the bearer token the
// auth plugin verified): each caller has its own key space, and a keyed request
// whose caller is unknown is refused with 500 without running, unless the
// route opts into one shared key space (scope "global", Opts.Scope). A request
// with a key is fingerprinted (method, path and query, the SHA-256 of its body
// and the caller). The first request takes the key in the store under a lease
// and runs; a response below 500 (except 429)
// is stored with its allow-listed headers for ttl. A repeat with the same key:
//
//   - same fingerprint, response stored: the stored response, with
//     Idempotent-Replayed: true;
//   - same fingerprint, first request still running: 409 with Retry-After;
//   - another fingerprint: 422;
//   - the store does not answer: 503 naming the store's plugin, and the
//     handler does not run (fails closed).
//
// A 5xx or 429 first response is not stored and the key is released, so a
// retry runs the handler again. A first request that crashes holds its key
// until its lease ends.
//
// The first response goes to the client, with its Content-Length, when the
// handler returns and before it is stored (or its key released), so a slow
// store delays the record, not the answer; a repeat that reaches the same
// instance while that write is under way waits for it.
package idempotency
