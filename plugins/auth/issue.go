package auth

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"

	"github.com/golang-jwt/jwt/v5"
)

// Issue signs claims as a token, with the first of algorithms and the secret
// (hmac mode) or private_key (public_key mode). It sets iat to now, exp to now +
// access_ttl when the claims have none, a random jti when they have none, and
// iss and aud from the configuration when they are empty. It returns
// ErrIssueDisabled unless issue = true.
func (p *Plugin) Issue(_ context.Context, c Claims) (string, error) {
	if !p.cfg.Issue {
		return "", ErrIssueDisabled
	}
	if p.clock == nil {
		return "", errNotStarted
	}
	now := p.clock.Now()
	c.IssuedAt = jwt.NewNumericDate(now)
	if c.ExpiresAt == nil {
		c.ExpiresAt = jwt.NewNumericDate(now.Add(p.cfg.AccessTTL))
	}
	if c.ID == "" {
		var b [16]byte
		_, _ = rand.Read(b[:]) // never fails (crypto/rand, Go 1.24+)
		c.ID = base64.RawURLEncoding.EncodeToString(b[:])
	}
	if c.Issuer == "" {
		c.Issuer = p.cfg.Issuer
	}
	if len(c.Audience) == 0 && p.cfg.Audience != "" {
		c.Audience = jwt.ClaimStrings{p.cfg.Audience}
	}
	method := jwt.GetSigningMethod(p.keys.algorithms[0])
	s, err := jwt.NewWithClaims(method, c).SignedString(p.keys.signing)
	if err != nil {
		return "", fmt.Errorf("auth: issue: sign with %s: %w", method.Alg(), err)
	}
	return s, nil
}
