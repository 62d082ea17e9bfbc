package cache

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jfastframework/jfast/framework"
)

func TestTokenStore(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	ctx := context.Background()
	rp, ok := b.svc.Plugin("cache").(framework.RevocationProvider)
	if !ok {
		t.Fatal("the cache plugin is not a framework.RevocationProvider")
	}
	store := rp.RevocationStore()

	if revoked, err := store.IsRevoked(ctx, "jti-1"); err != nil || revoked {
		t.Fatalf("IsRevoked before Revoke = %v, %v", revoked, err)
	}
	until := time.Now().Add(time.Hour)
	if err := store.Revoke(ctx, "jti-1", until); err != nil {
		t.Fatal(err)
	}
	if revoked, err := store.IsRevoked(ctx, "jti-1"); err != nil || !revoked {
		t.Fatalf("IsRevoked after Revoke = %v, %v", revoked, err)
	}
	if revoked, _ := store.IsRevoked(ctx, "jti-2"); revoked {
		t.Error("another jti is revoked too")
	}
	// The record lives until the token's own expiry, no longer.
	d, err := b.cache.Client().PTTL(ctx, b.prefix+"token:revoked:jti-1").Result()
	if err != nil || d > time.Hour || d < time.Hour-time.Minute {
		t.Errorf("revocation record TTL = %s, %v; want about 1h", d, err)
	}
	// A token already expired needs no record.
	if err := store.Revoke(ctx, "old", time.Now().Add(-time.Second)); err != nil {
		t.Fatal(err)
	}
	if n, _ := b.cache.Client().Exists(ctx, b.prefix+"token:revoked:old").Result(); n != 0 {
		t.Error("an expired token was recorded")
	}
	if err := store.Revoke(ctx, "", until); err == nil {
		t.Error("Revoke of an empty jti accepted")
	}
	if revoked, err := store.IsRevoked(ctx, ""); revoked || err != nil {
		t.Errorf("IsRevoked(\"\") = %v, %v", revoked, err)
	}
	// Short revocations expire with Redis's clock.
	if err := store.Revoke(ctx, "brief", time.Now().Add(400*time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(600 * time.Millisecond)
	if revoked, _ := store.IsRevoked(ctx, "brief"); revoked {
		t.Error("revocation outlived its until")
	}
}

// Of 50 concurrent uses of one one-time token, exactly one is the first.
func TestTokenStoreUseOnce(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	ctx := context.Background()
	tokens := b.cache.Tokens()
	var first atomic.Int64
	var wg sync.WaitGroup
	for range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ok, err := tokens.Use(ctx, "once", time.Now().Add(time.Minute))
			if err != nil {
				t.Error(err)
			}
			if ok {
				first.Add(1)
			}
		}()
	}
	wg.Wait()
	if first.Load() != 1 {
		t.Fatalf("%d uses were first, want 1", first.Load())
	}
	if ok, err := tokens.Use(ctx, "expired", time.Now().Add(-time.Second)); ok || err != nil {
		t.Errorf("Use of an expired token = %v, %v", ok, err)
	}
	if _, err := tokens.Use(ctx, "", time.Now().Add(time.Minute)); err == nil {
		t.Error("Use of an empty jti accepted")
	}
}
