package auth_test

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/jfastframework/jfast/plugins/auth"
)

const hmacTOML = `
[plugins]
enabled = ["auth"]
[plugin.auth]
mode = "hmac"
secret = "` + testSecret + `"
algorithms = ["HS256"]
issuer = "` + testIssuer + `"
audience = "` + testAudience + `"
`

// TestHMACRejections: every way a token is refused answers 401 problem+json with
// WWW-Authenticate: Bearer error="invalid_token" and the reason.
func TestHMACRejections(t *testing.T) {
	t.Parallel()
	s := startService(t, hmacTOML)
	now := s.clock.Now()
	key := []byte(testSecret)
	with := func(edit func(jwt.MapClaims)) jwt.MapClaims {
		c := claimsAt(now)
		edit(c)
		return c
	}
	unsigned, err := jwt.NewWithClaims(jwt.SigningMethodNone, claimsAt(now)).SignedString(jwt.UnsafeAllowNoneSignatureType)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name    string
		headers []string
		reason  auth.Reason
	}{
		{"no Authorization header", nil, auth.ReasonMissing},
		{"Basic credentials", []string{"Authorization", "Basic dXNlcjpwYXNz"}, auth.ReasonMissing},
		{"empty bearer", []string{"Authorization", "Bearer "}, auth.ReasonMissing},
		{"not a JWT", bearer("not-a-jwt"), auth.ReasonMalformed},
		{"expired beyond the leeway", bearer(sign(t, "HS256", "", with(func(c jwt.MapClaims) { c["exp"] = now.Add(-31 * time.Second).Unix() }), key)), auth.ReasonExpired},
		{"not valid yet", bearer(sign(t, "HS256", "", with(func(c jwt.MapClaims) { c["nbf"] = now.Add(time.Minute).Unix() }), key)), auth.ReasonNotYetValid},
		{"bad signature", bearer(sign(t, "HS256", "", claimsAt(now), []byte("another-secret-another-secret-xx"))), auth.ReasonSignature},
		{"wrong audience", bearer(sign(t, "HS256", "", with(func(c jwt.MapClaims) { c["aud"] = "billing" }), key)), auth.ReasonAudience},
		{"wrong issuer", bearer(sign(t, "HS256", "", with(func(c jwt.MapClaims) { c["iss"] = "https://evil.test/" }), key)), auth.ReasonIssuer},
		{"no exp", bearer(sign(t, "HS256", "", with(func(c jwt.MapClaims) { delete(c, "exp") }), key)), auth.ReasonClaims},
		{"alg none", bearer(unsigned), auth.ReasonAlgorithm},
		{"alg outside the allow-list", bearer(sign(t, "HS384", "", claimsAt(now), key)), auth.ReasonAlgorithm},
		{"unknown alg", bearer(forgeHeader(t, sign(t, "HS256", "", claimsAt(now), key), `{"alg":"XS256","typ":"JWT"}`)), auth.ReasonAlgorithm},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			expect401(t, s.Get(t, "/me", tc.headers...), tc.reason)
		})
	}
}

// forgeHeader replaces a token's header.
func forgeHeader(t *testing.T, token, header string) string {
	t.Helper()
	parts := strings.Split(token, ".")
	parts[0] = base64.RawURLEncoding.EncodeToString([]byte(header))
	return strings.Join(parts, ".")
}

// TestHMACAccepts: a valid token passes, within the leeway too; the handler finds
// the claims and the raw bearer token in the context.
func TestHMACAccepts(t *testing.T) {
	t.Parallel()
	s := startService(t, hmacTOML)
	now := s.clock.Now()
	c := claimsAt(now)
	c["exp"] = now.Add(-20 * time.Second).Unix() // expired, but within the 30 s leeway
	token := sign(t, "HS256", "", c, []byte(testSecret))
	r := s.Get(t, "/me", bearer(token)...)
	if r.Status != 200 {
		t.Fatalf("status %d, body %s", r.Status, r.Body)
	}
	var got struct {
		Sub    string         `json:"sub"`
		Scopes []string       `json:"scopes"`
		Roles  []string       `json:"roles"`
		Custom map[string]any `json:"custom"`
		Bearer string         `json:"bearer"`
	}
	if err := json.Unmarshal(r.Body, &got); err != nil {
		t.Fatal(err)
	}
	if got.Sub != "user-1" || strings.Join(got.Scopes, " ") != "orders:read profile" ||
		strings.Join(got.Roles, ",") != "clerk" || got.Custom["tenant"] != "acme" || got.Bearer != token {
		t.Fatalf("context holds %+v", got)
	}
	if _, ok := got.Custom["exp"]; ok {
		t.Errorf("registered claims leaked into Custom: %v", got.Custom)
	}
	// The clock moves past the leeway: the same token is now refused.
	s.clock.Advance(11 * time.Second)
	expect401(t, s.Get(t, "/me", bearer(token)...), auth.ReasonExpired)

	for _, result := range []string{"ok", "expired"} {
		if got := counter(t, s, "jfast_auth_verifications_total", result); got != 1 {
			t.Errorf("jfast_auth_verifications_total{result=%q} = %v, want 1", result, got)
		}
	}
}

// TestScopesAndRoles: a valid token without what the route needs is 403
// insufficient_scope; scopes are all required, roles any one of.
func TestScopesAndRoles(t *testing.T) {
	t.Parallel()
	s := startService(t, hmacTOML)
	now := s.clock.Now()
	key := []byte(testSecret)
	reader := sign(t, "HS256", "", claimsAt(now), key)

	r := s.Get(t, "/orders", bearer(reader)...)
	if r.Status != http.StatusForbidden {
		t.Fatalf("missing scope: status %d, body %s", r.Status, r.Body)
	}
	if h := r.Header.Get("WWW-Authenticate"); h != `Bearer error="insufficient_scope", scope="orders:write"` {
		t.Errorf("WWW-Authenticate = %q", h)
	}
	if p := decodeProblem(t, r); p.Status != 403 {
		t.Errorf("problem %+v", p)
	}

	c := claimsAt(now)
	c["scp"] = []string{"orders:write"} // the list form some issuers use
	delete(c, "scope")
	if r := s.Get(t, "/orders", bearer(sign(t, "HS256", "", c, key))...); r.Status != 200 {
		t.Fatalf("scp list with the scope: status %d, body %s", r.Status, r.Body)
	}

	if r := s.Get(t, "/admin", bearer(reader)...); r.Status != http.StatusForbidden {
		t.Fatalf("role clerk on /admin: status %d", r.Status)
	}
	c = claimsAt(now)
	c["roles"] = []string{"clerk", "owner"}
	if r := s.Get(t, "/admin", bearer(sign(t, "HS256", "", c, key))...); r.Status != 200 {
		t.Fatalf("role owner on /admin: status %d, body %s", r.Status, r.Body)
	}
	// An invalid token on a scoped route is still 401, not 403.
	expect401(t, s.Get(t, "/orders"), auth.ReasonMissing)
}

// TestPublicKeyModes: RSA (RS and PS), ECDSA and Ed25519 public keys verify their
// own family, and the key type decides: an HS256 token whose "secret" is the RSA
// public key's PEM (the algorithm-confusion attack) is refused.
func TestPublicKeyModes(t *testing.T) {
	t.Parallel()
	testKeys(t)
	cases := []struct {
		name    string
		pub     any
		priv    any
		alg     string
		algList string
	}{
		{"RSA RS256", &rsa1.PublicKey, rsa1, "RS256", ""},
		{"RSA PS512", &rsa1.PublicKey, rsa1, "PS512", ""},
		{"ECDSA P-256", &ec256.PublicKey, ec256, "ES256", ""},
		{"Ed25519", ed.Public(), ed, "EdDSA", `algorithms = ["EdDSA"]`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			pemText := publicPEM(t, tc.pub)
			s := startService(t, "[plugins]\nenabled = [\"auth\"]\n[plugin.auth]\nmode = \"public_key\"\npublic_key = "+tomlString(pemText)+"\n"+tc.algList+"\n")
			now := s.clock.Now()
			if r := s.Get(t, "/me", bearer(sign(t, tc.alg, "", claimsAt(now), tc.priv))...); r.Status != 200 {
				t.Fatalf("status %d, body %s", r.Status, r.Body)
			}
			// Algorithm confusion: HS256 with the public key's PEM as the secret.
			expect401(t, s.Get(t, "/me", bearer(sign(t, "HS256", "", claimsAt(now), []byte(pemText)))...), auth.ReasonAlgorithm)
			// A different key of the same family: bad signature.
			other := map[string]any{"RS256": rsa2, "PS512": rsa2, "ES256": mustEC(t), "EdDSA": mustEd(t)}[tc.alg]
			expect401(t, s.Get(t, "/me", bearer(sign(t, tc.alg, "", claimsAt(now), other))...), auth.ReasonSignature)
		})
	}
}

// TestClaimsDecoding: scope wins over scp, aud may be a string or a list, a
// registered claim of the wrong type refuses the token, other claims land in
// Custom.
func TestClaimsDecoding(t *testing.T) {
	t.Parallel()
	s := startService(t, hmacTOML)
	now := s.clock.Now()
	key := []byte(testSecret)
	c := claimsAt(now)
	c["scp"] = []string{"ignored"}
	c["aud"] = []string{"billing", testAudience}
	c["exp"] = float64(now.Add(time.Hour).Unix()) + 0.5
	c["nested"] = map[string]any{"n": 1}
	got, err := s.auth.Verify(t.Context(), sign(t, "HS256", "", c, key))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(got.Scopes, " ") != "orders:read profile" || len(got.Audience) != 2 ||
		got.ExpiresAt.Unix() != now.Add(time.Hour).Unix() || got.Custom["nested"].(map[string]any)["n"] != float64(1) {
		t.Fatalf("claims %+v", got)
	}
	for _, k := range []string{"scp", "aud", "exp", "scope", "roles", "iss"} {
		if _, ok := got.Custom[k]; ok {
			t.Errorf("Custom holds %q", k)
		}
	}
	for claim, bad := range map[string]any{"exp": "tomorrow", "iss": 7, "aud": []any{1}, "sub": true} {
		c := claimsAt(now)
		c[claim] = bad
		_, err := s.auth.Verify(t.Context(), sign(t, "HS256", "", c, key))
		var te *auth.TokenError
		if !errors.As(err, &te) || te.Reason != auth.ReasonMalformed {
			t.Errorf("%s = %v: err %v, want a malformed-token error", claim, bad, err)
		}
	}
}
