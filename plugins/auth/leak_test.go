package auth_test

import (
	"crypto"
	"net/http"
	"testing"

	"go.uber.org/goleak"

	"github.com/jfastframework/jfast/plugins/auth"
)

// TestJWKSGoroutinesStopWithTheApp: after an App has verified tokens, refreshed
// its keys and then had a fetch hang on the issuer, Stop leaves no goroutine
// behind: not the refresh loop, not the hanging fetch, not the fetch client's
// connections. Not parallel, so the snapshot holds only what ran before.
func TestJWKSGoroutinesStopWithTheApp(t *testing.T) {
	testKeys(t)
	before := goleak.IgnoreCurrent()
	is := newIssuer(t)
	is.publish(t, map[string]crypto.PublicKey{"k1": &rsa1.PublicKey})
	s := startJWKS(t, is, "1m")
	if r := s.Get(t, "/me", bearer(sign(t, "RS256", "k1", claimsAt(s.clock.Now()), rsa1))...); r.Status != 200 {
		t.Fatalf("status %d %s", r.Status, r.Body)
	}
	is.set("hang")
	s.clock.BlockUntil(1) // the refresh loop waits for the next interval
	s.clock.Advance(auth.DefaultJWKSRefreshInterval)
	waitFor(t, "the hanging refresh", func() bool { return is.hanging.Load() == 1 })

	if err := s.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	is.close()
	http.DefaultClient.CloseIdleConnections() // the test's own client
	goleak.VerifyNone(t, before)
}
