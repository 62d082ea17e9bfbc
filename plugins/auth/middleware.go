package auth

import (
	"errors"
	"net/http"
	"slices"
	"strings"

	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/problem"
)

// Requirement is what a route needs beyond a valid token; see Scopes and Roles.
type Requirement struct {
	scopes []string
	roles  []string
}

// Scopes requires every one of scopes in the token ("scope" or "scp").
func Scopes(scopes ...string) Requirement { return Requirement{scopes: scopes} }

// Roles requires at least one of roles in the token's "roles".
func Roles(roles ...string) Requirement { return Requirement{roles: roles} }

// RequireAuth returns middleware that lets a request through only with a valid
// "Authorization: Bearer <JWT>" meeting every requirement. It answers 401
// problem+json with WWW-Authenticate: Bearer error="invalid_token" for a missing
// or refused token, 403 with error="insufficient_scope" when a requirement is not
// met, and 503 naming the dependency when the token cannot be checked (see
// Verify). A request let through carries the claims (ClaimsFrom) and the raw
// token (framework.BearerToken, which the http plugin forwards only to upstreams
// with forward_authorization = true).
//
//	a, err := auth.From(app)
//	r.With(a.RequireAuth(auth.Scopes("orders:write"))).Method("POST", "/orders", framework.Handler(create))
func (p *Plugin) RequireAuth(reqs ...Requirement) func(http.Handler) http.Handler {
	var need Requirement
	for _, r := range reqs {
		need.scopes = append(need.scopes, r.scopes...)
		need.roles = append(need.roles, r.roles...)
	}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			raw, ok := bearerToken(r)
			if !ok {
				p.refuse(w, r, &TokenError{Reason: ReasonMissing})
				return
			}
			claims, err := p.Verify(r.Context(), raw)
			if err != nil {
				p.refuse(w, r, err)
				return
			}
			if !need.met(claims) {
				p.refuse(w, r, &ScopeError{Scopes: need.scopes, Roles: need.roles})
				return
			}
			p.count("ok")
			ctx := framework.ContextWithBearerToken(r.Context(), raw)
			next.ServeHTTP(w, r.WithContext(ContextWithClaims(ctx, claims)))
		})
	}
}

func (n Requirement) met(c *Claims) bool {
	for _, s := range n.scopes {
		if !c.HasScope(s) {
			return false
		}
	}
	return len(n.roles) == 0 || slices.ContainsFunc(n.roles, c.HasRole)
}

func (p *Plugin) refuse(w http.ResponseWriter, r *http.Request, err error) {
	var te *TokenError
	var se *ScopeError
	switch {
	case errors.As(err, &te):
		p.count(string(te.Reason))
	case errors.As(err, &se):
		p.count("forbidden")
	default:
		if _, ok := problem.As(err); ok {
			p.count("unavailable")
		} else {
			p.count("error")
		}
	}
	framework.WriteError(w, r, err)
}

func (p *Plugin) count(result string) {
	if p.verifications != nil {
		p.verifications.WithLabelValues(result).Inc()
	}
}

// bearerToken reads "Authorization: Bearer <token>"; the scheme is
// case-insensitive (RFC 9110 §11.1). Any other scheme is no bearer token.
func bearerToken(r *http.Request) (string, bool) {
	h := r.Header.Get("Authorization")
	scheme, token, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}
