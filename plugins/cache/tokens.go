package cache

import (
	"context"
	"errors"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/jfastframework/jfast/framework"
)

// TokenStore records revoked and used token IDs (JWT jti) in Redis, each until
// the token would have expired anyway. It implements framework.RevocationStore;
// the auth plugin asks it through [Plugin.RevocationStore].
//
// It fails closed: when Redis does not answer, IsRevoked and Use return an
// [*UnavailableError] (a 503 naming the cache), never "not revoked" — a revoked
// token must not work again because Redis is down.
type TokenStore struct {
	client  redis.UniversalClient
	revoked string // key prefix of revoked IDs
	used    string // key prefix of used one-time IDs
	now     func() time.Time
}

// Tokens returns the plugin's token store.
func (p *Plugin) Tokens() *TokenStore {
	return &TokenStore{client: p.client, revoked: p.prefix + "token:revoked:", used: p.prefix + "token:used:", now: time.Now}
}

// RevocationStore implements framework.RevocationProvider.
func (p *Plugin) RevocationStore() framework.RevocationStore { return p.Tokens() }

// errNoID is returned for an empty token ID.
var errNoID = errors.New("cache: token store: the token has no ID (jti)")

// Revoke records jti as revoked until until (the token's expiry). A token that has
// already expired needs no record, and none is made.
func (s *TokenStore) Revoke(ctx context.Context, jti string, until time.Time) error {
	if jti == "" {
		return errNoID
	}
	if !until.After(s.now()) {
		return nil
	}
	return s.client.SetArgs(ctx, s.revoked+jti, "1", redis.SetArgs{ExpireAt: until}).Err()
}

// IsRevoked reports whether jti was revoked. An empty jti is never revoked (there
// is nothing to look up); the auth plugin decides whether such tokens are
// acceptable.
func (s *TokenStore) IsRevoked(ctx context.Context, jti string) (bool, error) {
	if jti == "" {
		return false, nil
	}
	n, err := s.client.Exists(ctx, s.revoked+jti).Result()
	if err != nil {
		return false, err
	}
	return n > 0, nil
}

// Use marks the one-time token jti as used until until and reports whether this
// was its first use: of any number of concurrent calls for the same jti, exactly
// one gets true. A token already expired is refused (false).
func (s *TokenStore) Use(ctx context.Context, jti string, until time.Time) (bool, error) {
	if jti == "" {
		return false, errNoID
	}
	if !until.After(s.now()) {
		return false, nil
	}
	err := s.client.SetArgs(ctx, s.used+jti, "1", redis.SetArgs{Mode: "NX", ExpireAt: until}).Err()
	switch {
	case err == nil:
		return true, nil
	case err == redis.Nil:
		return false, nil
	}
	return false, err
}

var _ framework.RevocationStore = (*TokenStore)(nil)
