package auth_test

import (
	"errors"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/jfastframework/jfast/plugins/auth"
)

// TestIssueHMAC: issued tokens carry iat, exp (access_ttl), a fresh jti, iss and
// aud, and verify through the same plugin.
func TestIssueHMAC(t *testing.T) {
	t.Parallel()
	s := startService(t, hmacTOML+"issue = true\naccess_ttl = \"10m\"\n")
	now := s.clock.Now()
	token, err := s.auth.Issue(t.Context(), auth.Claims{
		RegisteredClaims: jwt.RegisteredClaims{Subject: "user-7"},
		Scopes:           []string{"orders:read", "orders:write"},
		Roles:            []string{"admin"},
		Custom:           map[string]any{"tenant": "acme"},
	})
	if err != nil {
		t.Fatal(err)
	}
	c, err := s.auth.Verify(t.Context(), token)
	if err != nil {
		t.Fatal(err)
	}
	if !c.IssuedAt.Equal(now) || !c.ExpiresAt.Equal(now.Add(10*time.Minute)) || c.ID == "" ||
		c.Issuer != testIssuer || len(c.Audience) != 1 || c.Audience[0] != testAudience || c.Subject != "user-7" ||
		!c.HasScope("orders:write") || !c.HasRole("admin") || c.Custom["tenant"] != "acme" {
		t.Fatalf("claims %+v", c)
	}
	other, err := s.auth.Issue(t.Context(), auth.Claims{})
	if err != nil {
		t.Fatal(err)
	}
	c2, err := s.auth.Verify(t.Context(), other)
	if err != nil {
		t.Fatal(err)
	}
	if c2.ID == c.ID {
		t.Fatalf("two tokens share jti %q", c.ID)
	}
	if r := s.Get(t, "/orders", bearer(token)...); r.Status != 200 {
		t.Fatalf("issued token on a scoped route: %d %s", r.Status, r.Body)
	}
	s.clock.Advance(10*time.Minute + auth.DefaultLeeway + time.Second)
	expect401(t, s.Get(t, "/me", bearer(token)...), auth.ReasonExpired)
}

// TestIssuePrivateKey: public_key mode with private_key issues tokens with the
// first allowed algorithm; the public key is derived when not given.
func TestIssuePrivateKey(t *testing.T) {
	t.Parallel()
	testKeys(t)
	cases := []struct {
		name, toml, alg string
	}{
		{"RSA PS256", "public_key = " + tomlString(publicPEM(t, &rsa1.PublicKey)) + "\nprivate_key = " + tomlString(privatePEM(t, rsa1)) + "\nalgorithms = [\"PS256\", \"RS256\"]\n", "PS256"},
		{"ECDSA derived public key", "private_key = " + tomlString(privatePEM(t, ec256)) + "\n", "ES256"},
		{"Ed25519", "private_key = " + tomlString(privatePEM(t, ed)) + "\n", "EdDSA"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := startService(t, "[plugins]\nenabled = [\"auth\"]\n[plugin.auth]\nmode = \"public_key\"\nissue = true\n"+tc.toml)
			token, err := s.auth.Issue(t.Context(), auth.Claims{RegisteredClaims: jwt.RegisteredClaims{Subject: "svc"}})
			if err != nil {
				t.Fatal(err)
			}
			parsed, _, err := jwt.NewParser().ParseUnverified(token, jwt.MapClaims{})
			if err != nil || parsed.Method.Alg() != tc.alg {
				t.Fatalf("alg = %v (%v), want %s", parsed.Method.Alg(), err, tc.alg)
			}
			if r := s.Get(t, "/me", bearer(token)...); r.Status != 200 {
				t.Fatalf("issued token: %d %s", r.Status, r.Body)
			}
		})
	}
}

// TestIssueDisabled: Issue refuses unless issue = true.
func TestIssueDisabled(t *testing.T) {
	t.Parallel()
	s := startService(t, hmacTOML)
	if _, err := s.auth.Issue(t.Context(), auth.Claims{}); !errors.Is(err, auth.ErrIssueDisabled) {
		t.Fatalf("Issue with issue = false: %v", err)
	}
}
