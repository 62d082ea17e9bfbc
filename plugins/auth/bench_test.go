package auth_test

import (
	"crypto"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// BenchmarkVerify compares Plugin.Verify with a bare jwt/v5 parse of the same
// token into jwt.MapClaims (the baseline): what the plugin adds is the claims decoding, the
// allow-list and key-type checks and, in jwks mode, the in-memory kid lookup
// through keyfunc.
func BenchmarkVerify(b *testing.B) {
	testKeys(b)
	hmac := startService(b, hmacTOML)
	hsToken := sign(b, "HS256", "", claimsAt(hmac.clock.Now()), []byte(testSecret))

	is := newIssuer(b)
	is.publish(b, map[string]crypto.PublicKey{"k1": &rsa1.PublicKey})
	jwks := startJWKS(b, is, "5s")
	rsToken := sign(b, "RS256", "k1", claimsAt(jwks.clock.Now()), rsa1)

	// The baseline decodes every claim too (jwt.MapClaims), as the plugin does
	// for Claims.Custom, scopes and roles.
	bare := func(b *testing.B, token string, key any, now func() time.Time) {
		p := jwt.NewParser(jwt.WithTimeFunc(now), jwt.WithValidMethods([]string{"HS256", "RS256"}),
			jwt.WithExpirationRequired(), jwt.WithIssuer(testIssuer), jwt.WithAudience(testAudience))
		b.ReportAllocs()
		for b.Loop() {
			if _, err := p.ParseWithClaims(token, jwt.MapClaims{}, func(*jwt.Token) (any, error) { return key, nil }); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Run("HS256/jwt-baseline", func(b *testing.B) { bare(b, hsToken, []byte(testSecret), hmac.clock.Now) })
	b.Run("HS256/auth-hmac", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := hmac.auth.Verify(b.Context(), hsToken); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("RS256/jwt-baseline", func(b *testing.B) { bare(b, rsToken, &rsa1.PublicKey, jwks.clock.Now) })
	b.Run("RS256/auth-jwks", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := jwks.auth.Verify(b.Context(), rsToken); err != nil {
				b.Fatal(err)
			}
		}
	})
}
