package auth

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/golang-jwt/jwt/v5"

	"github.com/jfastframework/jfast/framework/resilience"
	"github.com/jfastframework/jfast/problem"
)

// Verify checks a raw token (without "Bearer ") and returns its claims. The
// error is a *TokenError (401) when the token is refused, or a
// *problem.DependencyError (503) when it could not be checked: the issuer's key
// set cannot be fetched for an unknown kid (dependency "jwks"), or the
// revocation store cannot answer (the revocation plugin's name).
func (p *Plugin) Verify(ctx context.Context, token string) (*Claims, error) {
	if p.parser == nil {
		return nil, errNotStarted
	}
	claims := &Claims{}
	if _, err := p.parser.ParseWithClaims(token, claims, func(t *jwt.Token) (any, error) {
		return p.key(ctx, t)
	}); err != nil {
		return nil, classify(err)
	}
	if p.revocation != nil {
		if err := p.checkRevoked(ctx, claims); err != nil {
			return nil, err
		}
	}
	return claims, nil
}

// key returns the key that verifies t. The allow-list is checked first, then the
// key's type decides whether it fits the token's alg: a token cannot pick how its
// signature is checked (an HS256 token "signed" with an RSA public key as the
// secret is refused, so is alg none).
func (p *Plugin) key(ctx context.Context, t *jwt.Token) (any, error) {
	alg := t.Method.Alg()
	if !slices.Contains(p.keys.algorithms, alg) {
		return nil, &TokenError{Reason: ReasonAlgorithm, Err: fmt.Errorf("alg %q is not in the allow-list", alg)}
	}
	var key any
	switch {
	case p.jwks != nil:
		k, err := p.jwks.key(ctx, t)
		if err != nil {
			return nil, err
		}
		key = k
	case p.keys.family == familyHMAC:
		key = p.keys.secret
	default:
		key = p.keys.public
	}
	if !keyFits(key, alg) {
		return nil, &TokenError{Reason: ReasonAlgorithm, Err: fmt.Errorf("alg %q does not fit a %T key", alg, key)}
	}
	return key, nil
}

// classify turns the JWT library's error into a *TokenError, keeping the errors
// the keyfunc raised (TokenError, DependencyError) as they are.
func classify(err error) error {
	var te *TokenError
	if errors.As(err, &te) {
		return te
	}
	var de *problem.DependencyError
	if errors.As(err, &de) {
		return de
	}
	reason := ReasonUnverifiable
	switch {
	case errors.Is(err, jwt.ErrTokenMalformed):
		reason = ReasonMalformed
	case errors.Is(err, jwt.ErrTokenSignatureInvalid):
		reason = ReasonSignature
	case errors.Is(err, jwt.ErrTokenExpired):
		reason = ReasonExpired
	case errors.Is(err, jwt.ErrTokenNotValidYet), errors.Is(err, jwt.ErrTokenUsedBeforeIssued):
		reason = ReasonNotYetValid
	case errors.Is(err, jwt.ErrTokenInvalidIssuer):
		reason = ReasonIssuer
	case errors.Is(err, jwt.ErrTokenInvalidAudience):
		reason = ReasonAudience
	case errors.Is(err, jwt.ErrTokenRequiredClaimMissing), errors.Is(err, jwt.ErrTokenInvalidClaims), errors.Is(err, jwt.ErrInvalidType):
		reason = ReasonClaims
	case errors.Is(err, jwt.ErrTokenUnverifiable):
		// Left here: an alg the library does not implement, or none given.
		reason = ReasonAlgorithm
	}
	return &TokenError{Reason: reason, Err: err}
}

// checkRevoked asks the revocation store; it fails closed.
func (p *Plugin) checkRevoked(ctx context.Context, c *Claims) error {
	if c.ID == "" {
		return &TokenError{Reason: ReasonNoJTI}
	}
	revoked, err := p.revocation.IsRevoked(ctx, c.ID)
	if err != nil {
		de := &problem.DependencyError{
			Dependency: p.revocationBy,
			Err:        fmt.Errorf("auth: revocation check: %w", err),
			Detail:     "the token revocation store cannot answer, so the token cannot be accepted",
		}
		var ra resilience.RetryAfterError
		if errors.As(err, &ra) {
			de.RetryAfter = ra.RetryAfter()
		}
		return de
	}
	if revoked {
		return &TokenError{Reason: ReasonRevoked}
	}
	return nil
}

// Revoke records c's jti as revoked until the token expires (plus the leeway,
// during which it would still verify). It needs check_revocation = true.
func (p *Plugin) Revoke(ctx context.Context, c *Claims) error {
	if p.revocation == nil {
		return errors.New("auth: revoke: check_revocation is false, so revoked tokens would not be refused; set [plugin.auth] check_revocation = true")
	}
	if c == nil || c.ID == "" {
		return errors.New("auth: revoke: the token has no jti")
	}
	until := p.clock.Now().Add(p.cfg.AccessTTL)
	if c.ExpiresAt != nil {
		until = c.ExpiresAt.Time
	}
	if err := p.revocation.Revoke(ctx, c.ID, until.Add(p.cfg.Leeway)); err != nil {
		return &problem.DependencyError{Dependency: p.revocationBy, Err: fmt.Errorf("auth: revoke: %w", err)}
	}
	return nil
}
