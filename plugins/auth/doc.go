// Package auth is jfast's JWT plugin: it verifies bearer tokens with a shared
// secret (hmac), one public key (public_key) or the issuer's JWK Set (jwks, through
// keyfunc), and issues tokens in hmac mode or with a private key.
//
// The key decides the algorithm family, so a token cannot choose how it is
// checked: alg none is never accepted, and an HS256 token signed with an RSA
// public key as the secret is refused. In jwks mode known keys are read from
// memory only; a token with an unknown kid triggers at most one rate-limited
// fetch, bounded by jwks_timeout and guarded by a breaker. While the issuer is
// down, cached keys keep verifying, and a token whose kid is unknown gets a 503
// naming "jwks" rather than a 401.
//
// # Example
//
//	[plugins]
//	enabled = ["auth"]
//
//	[plugin.auth]
//	mode = "jwks"
//	jwks_url = "https://issuer.example/.well-known/jwks.json"
//	issuer = "https://issuer.example/"
//	audience = "orders"
//
// Routes take the plugin at boot and protect what needs it:
//
//	func routes(app *framework.App, r chi.Router) error {
//		a, err := auth.From(app)
//		if err != nil {
//			return err
//		}
//		r.With(a.RequireAuth(auth.Scopes("orders:read"))).Method("GET", "/orders", framework.Handler(
//			func(w http.ResponseWriter, r *http.Request) error {
//				claims, _ := auth.ClaimsFrom(r.Context())
//				return framework.JSON(w, 200, map[string]string{"subject": claims.Subject})
//			}))
//		return nil
//	}
//
// See docs/auth.md for every key, its default and the reasons.
package auth
