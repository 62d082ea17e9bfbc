package auth

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// Claims are a verified token's claims: the registered ones (iss, sub, aud, exp,
// nbf, iat, jti), the scopes and roles RequireAuth checks, and every other claim
// in Custom.
type Claims struct {
	jwt.RegisteredClaims

	// Scopes are read from "scope" (a space-separated string, RFC 8693 §4.2) or,
	// when that is absent, "scp" (a list or a string). Issued tokens carry them in
	// "scope".
	Scopes []string
	// Roles are read from "roles" (a list or a string).
	Roles []string
	// Custom holds every other claim, as decoded JSON.
	Custom map[string]any
}

// UnmarshalJSON decodes a token's payload in one pass (as jwt.MapClaims does),
// then takes the registered claims, scopes and roles out of it; what is left is
// Custom.
func (c *Claims) UnmarshalJSON(b []byte) error {
	var all map[string]any
	if err := json.Unmarshal(b, &all); err != nil {
		return err
	}
	_, hasScope := all["scope"]
	var err error
	for name, v := range all {
		switch name {
		case "iss":
			c.Issuer, err = stringClaim(name, v)
		case "sub":
			c.Subject, err = stringClaim(name, v)
		case "jti":
			c.ID, err = stringClaim(name, v)
		case "aud":
			c.Audience, err = audienceClaim(v)
		case "exp":
			c.ExpiresAt, err = dateClaim(name, v)
		case "nbf":
			c.NotBefore, err = dateClaim(name, v)
		case "iat":
			c.IssuedAt, err = dateClaim(name, v)
		case "scope":
			c.Scopes = stringsClaim(v)
		case "scp":
			if !hasScope {
				c.Scopes = stringsClaim(v)
			}
		case "roles":
			c.Roles = stringsClaim(v)
		default:
			continue
		}
		if err != nil {
			return err
		}
		delete(all, name)
	}
	if len(all) > 0 {
		c.Custom = all
	}
	return nil
}

func stringClaim(name string, v any) (string, error) {
	if v == nil {
		return "", nil
	}
	s, ok := v.(string)
	if !ok {
		return "", fmt.Errorf("%w: %q must be a string", jwt.ErrInvalidType, name)
	}
	return s, nil
}

// audienceClaim reads "aud": one string or a list of strings (RFC 7519 §4.1.3).
func audienceClaim(v any) (jwt.ClaimStrings, error) {
	switch v := v.(type) {
	case nil:
		return nil, nil
	case string:
		return jwt.ClaimStrings{v}, nil
	case []any:
		out := make(jwt.ClaimStrings, len(v))
		for i, e := range v {
			s, ok := e.(string)
			if !ok {
				return nil, fmt.Errorf("%w: \"aud\" must hold strings", jwt.ErrInvalidType)
			}
			out[i] = s
		}
		return out, nil
	}
	return nil, fmt.Errorf("%w: \"aud\" must be a string or a list of strings", jwt.ErrInvalidType)
}

// dateClaim reads exp, nbf or iat: seconds since the epoch, fractions allowed.
func dateClaim(name string, v any) (*jwt.NumericDate, error) {
	switch v := v.(type) {
	case nil:
		return nil, nil
	case float64:
		sec, frac := math.Modf(v)
		return jwt.NewNumericDate(time.Unix(int64(sec), int64(frac*1e9))), nil
	}
	return nil, fmt.Errorf("%w: %q must be a number", jwt.ErrInvalidType, name)
}

// stringsClaim reads a claim that is a space-separated string or a list of
// strings; anything else is no values.
func stringsClaim(v any) []string {
	switch v := v.(type) {
	case string:
		return strings.Fields(v)
	case []any:
		out := make([]string, 0, len(v))
		for _, e := range v {
			if s, ok := e.(string); ok {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}

// MarshalJSON encodes the claims as a token payload: Custom first, then the
// registered claims, "scope" and "roles" over any Custom entry of the same name.
func (c Claims) MarshalJSON() ([]byte, error) {
	out := make(map[string]any, len(c.Custom)+9)
	for k, v := range c.Custom {
		out[k] = v
	}
	reg, err := json.Marshal(c.RegisteredClaims)
	if err != nil {
		return nil, err
	}
	var regMap map[string]any
	if err := json.Unmarshal(reg, &regMap); err != nil {
		return nil, err
	}
	for k, v := range regMap {
		out[k] = v
	}
	if len(c.Scopes) > 0 {
		out["scope"] = strings.Join(c.Scopes, " ")
	}
	if len(c.Roles) > 0 {
		out["roles"] = c.Roles
	}
	return json.Marshal(out)
}

// HasScope reports whether the token carries scope.
func (c *Claims) HasScope(scope string) bool { return slices.Contains(c.Scopes, scope) }

// HasRole reports whether the token carries role.
func (c *Claims) HasRole(role string) bool { return slices.Contains(c.Roles, role) }

type claimsKey struct{}

// ContextWithClaims returns ctx carrying c; RequireAuth calls it for every
// verified request.
func ContextWithClaims(ctx context.Context, c *Claims) context.Context {
	return context.WithValue(ctx, claimsKey{}, c)
}

// ClaimsFrom returns the verified claims RequireAuth put in ctx, and false when
// the request did not pass through RequireAuth.
func ClaimsFrom(ctx context.Context) (*Claims, bool) {
	c, ok := ctx.Value(claimsKey{}).(*Claims)
	return c, ok && c != nil
}
