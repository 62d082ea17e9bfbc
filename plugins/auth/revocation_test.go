package auth_test

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/plugins/auth"
)

// fakeCache stands for the cache plugin, which offers the real revocation store
// (Redis); this package must not import it, and the store's own behaviour is
// tested there. It is an in-process fake on purpose: what is tested here is how
// auth uses framework.RevocationProvider — a revoked jti is 401, a store that
// cannot answer is 503 (fails closed).
type fakeCache struct {
	mu      sync.Mutex
	revoked map[string]time.Time
	down    bool
}

func (f *fakeCache) Name() string                               { return "cache" }
func (f *fakeCache) RevocationStore() framework.RevocationStore { return f }

func (f *fakeCache) Revoke(_ context.Context, jti string, until time.Time) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.down {
		return errors.New("redis: connection refused")
	}
	f.revoked[jti] = until
	return nil
}

func (f *fakeCache) IsRevoked(_ context.Context, jti string) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.down {
		return false, errors.New("redis: connection refused")
	}
	_, ok := f.revoked[jti]
	return ok, nil
}

func (f *fakeCache) setDown(down bool) {
	f.mu.Lock()
	f.down = down
	f.mu.Unlock()
}

var _ framework.RevocationProvider = (*fakeCache)(nil)

// TestRevocation: with check_revocation on and a revocation provider enabled, a
// revoked jti is 401, a token without jti is 401, and a store that cannot answer
// is 503 naming the provider.
func TestRevocation(t *testing.T) {
	t.Parallel()
	cache := &fakeCache{revoked: map[string]time.Time{"revoked-1": {}}}
	s := startService(t, `
[plugins]
enabled = ["auth", "cache"]
[plugin.auth]
mode = "hmac"
secret = "`+testSecret+`"
check_revocation = true
`, cache)
	now := s.clock.Now()
	key := []byte(testSecret)
	c := claimsAt(now)
	c["jti"] = "live-1"
	live := sign(t, "HS256", "", c, key)
	if r := s.Get(t, "/me", bearer(live)...); r.Status != 200 {
		t.Fatalf("live token: %d %s", r.Status, r.Body)
	}
	c["jti"] = "revoked-1"
	expect401(t, s.Get(t, "/me", bearer(sign(t, "HS256", "", c, key))...), auth.ReasonRevoked)
	delete(c, "jti")
	expect401(t, s.Get(t, "/me", bearer(sign(t, "HS256", "", c, key))...), auth.ReasonNoJTI)

	// Revoke through the plugin, from the claims a handler has.
	claims, err := s.auth.Verify(t.Context(), live)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.auth.Revoke(t.Context(), claims); err != nil {
		t.Fatal(err)
	}
	cache.mu.Lock()
	until := cache.revoked["live-1"]
	cache.mu.Unlock()
	if !until.Equal(claims.ExpiresAt.Add(auth.DefaultLeeway)) {
		t.Errorf("revoked until %s, want exp + leeway", until)
	}
	expect401(t, s.Get(t, "/me", bearer(live)...), auth.ReasonRevoked)

	// The store cannot answer: fail closed with 503 naming the cache.
	cache.setDown(true)
	c["jti"] = "live-2"
	r := s.Get(t, "/me", bearer(sign(t, "HS256", "", c, key))...)
	if p := decodeProblem(t, r); r.Status != http.StatusServiceUnavailable || p.Dependency != "cache" {
		t.Fatalf("store down: %d %+v", r.Status, p)
	}
	cache.setDown(false)
	if r := s.Get(t, "/me", bearer(sign(t, "HS256", "", c, key))...); r.Status != 200 {
		t.Fatalf("store back: %d %s", r.Status, r.Body)
	}
}

// TestRevokeWithoutCheckRevocation: Revoke refuses when verification would not
// look at the store.
func TestRevokeWithoutCheckRevocation(t *testing.T) {
	t.Parallel()
	s := startService(t, hmacTOML)
	err := s.auth.Revoke(t.Context(), &auth.Claims{RegisteredClaims: jwt.RegisteredClaims{ID: "x"}})
	if err == nil {
		t.Fatal("Revoke succeeded with check_revocation = false")
	}
}
