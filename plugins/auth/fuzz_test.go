package auth_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/jfastframework/jfast/plugins/auth"
)

// FuzzVerify feeds arbitrary bearer tokens, mutated from a valid one and from
// refused ones, to an hmac verifier: it never panics, anything it refuses is a
// *TokenError answering 401, and anything it accepts carries the claims the
// one signed token carries (a token cannot be forged by mutating one).
func FuzzVerify(f *testing.F) {
	s := startService(f, `[plugins]
enabled = ["auth"]
[plugin.auth]
mode = "hmac"
secret = "`+testSecret+`"
issuer = "`+testIssuer+`"
audience = "`+testAudience+`"
`)
	now := s.clock.Now()
	valid := sign(f, "HS256", "", claimsAt(now), []byte(testSecret))
	header, rest, _ := strings.Cut(valid, ".")
	payload, _, _ := strings.Cut(rest, ".")
	for _, tok := range []string{
		valid,
		valid + "x",
		header + "." + payload + ".",
		"eyJhbGciOiJub25lIiwidHlwIjoiSldUIn0." + payload + ".",
		sign(f, "HS256", "", claimsAt(now), []byte("another secret, another secret!!")),
		sign(f, "HS384", "kid-1", claimsAt(now), []byte(testSecret)),
		"", ".", "..", "a.b.c", "Bearer " + valid, strings.Repeat("e", 4096),
	} {
		f.Add(tok)
	}
	ctx := context.Background()
	f.Fuzz(func(t *testing.T, token string) {
		c, err := s.auth.Verify(ctx, token)
		if err != nil {
			var te *auth.TokenError
			if !errors.As(err, &te) || te.Problem().Status != http.StatusUnauthorized {
				t.Fatalf("Verify(%q) = %v, want a *TokenError answering 401", token, err)
			}
			return
		}
		if c.Subject != "user-1" || c.Issuer != testIssuer || c.Custom["tenant"] != "acme" {
			t.Fatalf("Verify(%q) accepted claims nobody signed: %+v", token, c)
		}
	})
}
