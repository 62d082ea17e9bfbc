package auth

import (
	"errors"
	"net/http"
	"strings"

	"github.com/jfastframework/jfast/problem"
)

// Reason says why a token was refused. It is the "reason" member of the 401 body
// and the result label of the verification metric.
type Reason string

// Why a request is refused with 401.
const (
	ReasonMissing      Reason = "missing"       // no Authorization: Bearer header
	ReasonMalformed    Reason = "malformed"     // not a JWT
	ReasonAlgorithm    Reason = "algorithm"     // alg not allowed (including none) or not fitting the key
	ReasonKID          Reason = "kid"           // jwks mode: no kid, or a kid the issuer does not publish
	ReasonSignature    Reason = "signature"     // the signature does not verify
	ReasonExpired      Reason = "expired"       // exp has passed (beyond the leeway)
	ReasonNotYetValid  Reason = "not_yet_valid" // nbf or iat in the future (beyond the leeway)
	ReasonIssuer       Reason = "issuer"        // iss is not the configured issuer
	ReasonAudience     Reason = "audience"      // aud does not hold the configured audience
	ReasonClaims       Reason = "claims"        // exp missing (a registered claim of the wrong type is malformed)
	ReasonRevoked      Reason = "revoked"       // the jti was revoked
	ReasonNoJTI        Reason = "no_jti"        // check_revocation is on and the token has no jti
	ReasonUnverifiable Reason = "unverifiable"  // any other reason the token cannot be verified
)

var reasonDetail = map[Reason]string{
	ReasonMissing:      "the request has no bearer token",
	ReasonMalformed:    "the bearer token is not a well-formed JWT",
	ReasonAlgorithm:    "the token's algorithm is not accepted",
	ReasonKID:          "the token's key ID is not one of the issuer's keys",
	ReasonSignature:    "the token's signature is invalid",
	ReasonExpired:      "the token has expired",
	ReasonNotYetValid:  "the token is not valid yet",
	ReasonIssuer:       "the token's issuer is not accepted",
	ReasonAudience:     "the token's audience is not accepted",
	ReasonClaims:       "the token's claims are invalid",
	ReasonRevoked:      "the token has been revoked",
	ReasonNoJTI:        "the token has no jti, so its revocation cannot be checked",
	ReasonUnverifiable: "the token cannot be verified",
}

// TokenError is a token refused: it renders as a 401 problem with
// WWW-Authenticate: Bearer error="invalid_token" (RFC 6750 §3.1).
type TokenError struct {
	Reason Reason
	// Err is the cause from the JWT library, for logs only: it is never rendered.
	Err error
}

// Error returns "auth: invalid token: <reason>: <cause>".
func (e *TokenError) Error() string {
	s := "auth: invalid token: " + string(e.Reason)
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Unwrap returns the cause.
func (e *TokenError) Unwrap() error { return e.Err }

// Problem renders e as a 401.
func (e *TokenError) Problem() *problem.Problem {
	detail := reasonDetail[e.Reason]
	if detail == "" {
		detail = reasonDetail[ReasonUnverifiable]
	}
	p := problem.Unauthorized(detail)
	p.Extensions = map[string]any{"reason": string(e.Reason)}
	p.Header = http.Header{"WWW-Authenticate": {`Bearer error="invalid_token", error_description="` + detail + `"`}}
	p.Err = e
	return p
}

// ScopeError is a verified token without what the route needs: it renders as a
// 403 problem with WWW-Authenticate: Bearer error="insufficient_scope".
type ScopeError struct {
	// Scopes the route needs (all of them), or nil.
	Scopes []string
	// Roles the route accepts (any of them), or nil.
	Roles []string
}

// Error names what the token lacked.
func (e *ScopeError) Error() string {
	var parts []string
	if len(e.Scopes) > 0 {
		parts = append(parts, "scopes "+strings.Join(e.Scopes, " "))
	}
	if len(e.Roles) > 0 {
		parts = append(parts, "one of the roles "+strings.Join(e.Roles, " "))
	}
	return "auth: insufficient scope: the route needs " + strings.Join(parts, " and ")
}

// Problem renders e as a 403.
func (e *ScopeError) Problem() *problem.Problem {
	p := problem.Forbidden("the token does not grant this route: it needs " + strings.TrimPrefix(e.Error(), "auth: insufficient scope: the route needs "))
	ext := map[string]any{}
	challenge := `Bearer error="insufficient_scope"`
	if len(e.Scopes) > 0 {
		ext["required_scopes"] = e.Scopes
		challenge += `, scope="` + strings.Join(e.Scopes, " ") + `"`
	}
	if len(e.Roles) > 0 {
		ext["accepted_roles"] = e.Roles
	}
	p.Extensions = ext
	p.Header = http.Header{"WWW-Authenticate": {challenge}}
	p.Err = e
	return p
}

// ErrIssueDisabled is returned by Issue when [plugin.auth] issue is false.
var ErrIssueDisabled = errors.New("auth: issuing is disabled; set [plugin.auth] issue = true")

var (
	_ problem.Renderer = (*TokenError)(nil)
	_ problem.Renderer = (*ScopeError)(nil)
)
