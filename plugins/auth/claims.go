package auth

import (
	"context"
	"encoding/json"
	"slices"
	"strings"

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

var registeredNames = []string{"iss", "sub", "aud", "exp", "nbf", "iat", "jti", "scope", "scp", "roles"}

// UnmarshalJSON decodes a token's payload.
func (c *Claims) UnmarshalJSON(b []byte) error {
	if err := json.Unmarshal(b, &c.RegisteredClaims); err != nil {
		return err
	}
	var all map[string]json.RawMessage
	if err := json.Unmarshal(b, &all); err != nil {
		return err
	}
	if raw, ok := all["scope"]; ok {
		c.Scopes = stringsClaim(raw)
	} else if raw, ok := all["scp"]; ok {
		c.Scopes = stringsClaim(raw)
	}
	if raw, ok := all["roles"]; ok {
		c.Roles = stringsClaim(raw)
	}
	for name, raw := range all {
		if slices.Contains(registeredNames, name) {
			continue
		}
		var v any
		if err := json.Unmarshal(raw, &v); err != nil {
			return err
		}
		if c.Custom == nil {
			c.Custom = make(map[string]any, len(all))
		}
		c.Custom[name] = v
	}
	return nil
}

// stringsClaim reads a claim that is a space-separated string or a list of
// strings; anything else is no values.
func stringsClaim(raw json.RawMessage) []string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return strings.Fields(s)
	}
	var list []string
	if json.Unmarshal(raw, &list) == nil {
		return list
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
