package framework

import (
	"context"
	"time"
)

// The small interfaces through which plugins use each other without importing each
// other. A plugin finds another with App.Plugin and a type assertion on one of
// these (or on a one-method interface over the other plugin's client type, such as
// interface{ Pool() *pgxpool.Pool }).

// RevocationStore records revoked token IDs (jti). The cache plugin's token store
// implements it; the auth plugin asks it when check_revocation is on. An error
// means the store could not answer: callers that authenticate must fail closed.
type RevocationStore interface {
	Revoke(ctx context.Context, jti string, until time.Time) error
	IsRevoked(ctx context.Context, jti string) (bool, error)
}

// RevocationProvider is a plugin that offers a RevocationStore.
type RevocationProvider interface {
	Plugin
	RevocationStore() RevocationStore
}

type bearerKey struct{}

// ContextWithBearerToken records the caller's verified bearer token (without the
// "Bearer " prefix). The auth plugin's middleware sets it; the http plugin forwards
// it to upstreams with forward_authorization = true, and to no other.
func ContextWithBearerToken(ctx context.Context, token string) context.Context {
	return context.WithValue(ctx, bearerKey{}, token)
}

// BearerToken returns the caller's bearer token recorded in ctx, or "".
func BearerToken(ctx context.Context) string {
	s, _ := ctx.Value(bearerKey{}).(string)
	return s
}
