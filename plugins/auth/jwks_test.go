package auth_test

import (
	"crypto"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/MicahParks/jwkset"

	"github.com/jfastframework/jfast/jfasttest"
	"github.com/jfastframework/jfast/plugins/auth"
)

// jwksTOML configures jwks mode against is, with a short jwks_timeout so the
// drill's hanging fetches end quickly in real time.
func jwksTOML(is *issuer, timeout string) string {
	return fmt.Sprintf(`
[plugins]
enabled = ["auth"]
[plugin.auth]
mode = "jwks"
jwks_url = %q
issuer = %q
audience = %q
jwks_timeout = %q
`, is.url(), testIssuer, testAudience, timeout)
}

// startJWKS starts an App in jwks mode and waits until its first fetch filled the
// cache (the boot itself does not wait for it).
func startJWKS(t testing.TB, is *issuer, timeout string) service {
	t.Helper()
	s := startService(t, jwksTOML(is, timeout))
	waitFor(t, "the first JWKS fetch", func() bool {
		_, c := readyCheck(t, s.Service)
		return c["healthy"] == true
	})
	return s
}

// TestJWKSVerifies: tokens signed by any published key verify; kid is required;
// keys are read from memory (no fetch per request).
func TestJWKSVerifies(t *testing.T) {
	t.Parallel()
	testKeys(t)
	is := newIssuer(t)
	is.publish(t, map[string]crypto.PublicKey{"rsa-1": &rsa1.PublicKey, "ec-1": &ec256.PublicKey, "ed-1": ed.Public()})
	s := startJWKS(t, is, "2s")
	now := s.clock.Now()
	hits := is.hits.Load()
	for _, tc := range []struct {
		alg, kid string
		key      any
	}{{"RS256", "rsa-1", rsa1}, {"PS256", "rsa-1", rsa1}, {"ES256", "ec-1", ec256}, {"EdDSA", "ed-1", ed}} {
		if r := s.Get(t, "/me", bearer(sign(t, tc.alg, tc.kid, claimsAt(now), tc.key))...); r.Status != 200 {
			t.Fatalf("%s/%s: status %d, body %s", tc.alg, tc.kid, r.Status, r.Body)
		}
	}
	if got := is.hits.Load(); got != hits {
		t.Fatalf("known kids fetched the key set %d more times", got-hits)
	}
	// No kid: refused without a fetch.
	expect401(t, s.Get(t, "/me", bearer(sign(t, "RS256", "", claimsAt(now), rsa1))...), auth.ReasonKID)
	// A known kid with a token of another family: the JWK's type decides.
	expect401(t, s.Get(t, "/me", bearer(sign(t, "ES256", "rsa-1", claimsAt(now), ec256))...), auth.ReasonAlgorithm)
	// HS256 "signed" with the RSA key's PEM under its kid: outside jwks mode's
	// allow-list and not fitting an RSA key.
	expect401(t, s.Get(t, "/me", bearer(sign(t, "HS256", "rsa-1", claimsAt(now), []byte(publicPEM(t, &rsa1.PublicKey))))...), auth.ReasonAlgorithm)
	if got := is.hits.Load(); got != hits {
		t.Fatalf("refused tokens fetched the key set %d times", got-hits)
	}
	status, c := readyCheck(t, s.Service)
	meta := c["meta"].(map[string]any)
	if status != 200 || c["status"] != "pass" || meta["keys"] != float64(3) || meta["last_refresh"] == nil {
		t.Fatalf("/ready: %d %v", status, c)
	}
	// Every fetch that made a request is timed: as many as the issuer saw.
	fetched := counter(t, s, "jfast_auth_jwks_fetches_total", "ok") + counter(t, s, "jfast_auth_jwks_fetches_total", "error")
	if timed := histogramCount(t, s, "jfast_auth_jwks_fetch_duration_seconds"); fetched == 0 || float64(timed) != fetched || timed != int64(is.hits.Load()) {
		t.Fatalf("jfast_auth_jwks_fetch_duration_seconds counts %d fetches; %v were counted, the issuer saw %d", timed, fetched, is.hits.Load())
	}
}

// TestJWKSKeyMetadata: a JWK's own "alg" and "use" restrict what it verifies.
func TestJWKSKeyMetadata(t *testing.T) {
	t.Parallel()
	testKeys(t)
	is := newIssuer(t)
	rs256 := jwkWith(t, "rs256-only", &rsa1.PublicKey, jwkset.JWKMetadataOptions{ALG: jwkset.AlgRS256, USE: jwkset.UseSig})
	enc := jwkWith(t, "enc", &rsa2.PublicKey, jwkset.JWKMetadataOptions{USE: jwkset.UseEnc})
	is.publishRaw([]byte(`{"keys":[` + rs256 + `,` + enc + `]}`))
	s := startJWKS(t, is, "2s")
	c := claimsAt(s.clock.Now())
	if r := s.Get(t, "/me", bearer(sign(t, "RS256", "rs256-only", c, rsa1))...); r.Status != 200 {
		t.Fatalf("RS256 with its key: %d %s", r.Status, r.Body)
	}
	expect401(t, s.Get(t, "/me", bearer(sign(t, "PS256", "rs256-only", c, rsa1))...), auth.ReasonAlgorithm)
	expect401(t, s.Get(t, "/me", bearer(sign(t, "RS256", "enc", c, rsa2))...), auth.ReasonAlgorithm)
}

// TestJWKSSymmetricKeyIgnored: an "oct" key in the published set is never used as
// an HMAC secret.
func TestJWKSSymmetricKeyIgnored(t *testing.T) {
	t.Parallel()
	testKeys(t)
	is := newIssuer(t)
	secret := []byte("a-symmetric-key-published-by-mistake")
	jwk := fmt.Sprintf(`{"keys":[{"kty":"oct","kid":"sym","k":%q},%s]}`,
		b64(secret), jwkJSON(t, "rsa-1", &rsa1.PublicKey))
	is.publishRaw([]byte(jwk))
	s := startJWKS(t, is, "2s")
	c := claimsAt(s.clock.Now())
	expect401(t, s.Get(t, "/me", bearer(sign(t, "HS256", "sym", c, secret))...), auth.ReasonAlgorithm)
	// With HS256 allowed it would still not verify: the kid is unknown.
	if r := s.Get(t, "/me", bearer(sign(t, "RS256", "rsa-1", c, rsa1))...); r.Status != 200 {
		t.Fatalf("the RSA key next to it: status %d, body %s", r.Status, r.Body)
	}
}

// TestJWKSUnknownKIDRateLimited: an unknown kid refreshes the set once; more
// unknown kids within jwks_min_refresh_interval are refused without a fetch.
func TestJWKSUnknownKIDRateLimited(t *testing.T) {
	t.Parallel()
	testKeys(t)
	is := newIssuer(t)
	is.publish(t, map[string]crypto.PublicKey{"rsa-1": &rsa1.PublicKey})
	s := startJWKS(t, is, "2s")
	now := s.clock.Now()
	hits := is.hits.Load()
	expect401(t, s.Get(t, "/me", bearer(sign(t, "RS256", "made-up-1", claimsAt(now), rsa2))...), auth.ReasonKID)
	if got := is.hits.Load() - hits; got != 1 {
		t.Fatalf("first unknown kid: %d fetches, want 1", got)
	}
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			expect401(t, s.Get(t, "/me", bearer(sign(t, "RS256", fmt.Sprintf("made-up-%d", i+2), claimsAt(now), rsa2))...), auth.ReasonKID)
		}()
	}
	wg.Wait()
	if got := is.hits.Load() - hits; got != 1 {
		t.Fatalf("20 more unknown kids: %d fetches in all, want 1", got)
	}
	s.clock.Advance(auth.DefaultJWKSMinRefreshInterval)
	expect401(t, s.Get(t, "/me", bearer(sign(t, "RS256", "made-up-99", claimsAt(now), rsa2))...), auth.ReasonKID)
	if got := is.hits.Load() - hits; got != 2 {
		t.Fatalf("after jwks_min_refresh_interval: %d fetches, want 2", got)
	}
}

// TestJWKSKeyRotation: the issuer adds a key and withdraws the old one; the new
// kid is fetched on first sight, the withdrawn one stops verifying.
func TestJWKSKeyRotation(t *testing.T) {
	t.Parallel()
	testKeys(t)
	is := newIssuer(t)
	is.publish(t, map[string]crypto.PublicKey{"2026-01": &rsa1.PublicKey})
	s := startJWKS(t, is, "2s")
	now := s.clock.Now()
	old := sign(t, "RS256", "2026-01", claimsAt(now), rsa1)
	if r := s.Get(t, "/me", bearer(old)...); r.Status != 200 {
		t.Fatalf("old key: %d %s", r.Status, r.Body)
	}
	is.publish(t, map[string]crypto.PublicKey{"2026-02": &rsa2.PublicKey})
	if r := s.Get(t, "/me", bearer(sign(t, "RS256", "2026-02", claimsAt(now), rsa2))...); r.Status != 200 {
		t.Fatalf("new key: %d %s", r.Status, r.Body)
	}
	expect401(t, s.Get(t, "/me", bearer(old)...), auth.ReasonKID)
}

// TestJWKSSetWithoutSigningKeysKeepsTheCache: only keys a token could verify
// with count as usable: use "sig" or unset, and an algorithm of the
// allow-list fitting the key's "alg" and type. /ready counts those alone, and
// a refreshed set holding none of them (an encryption key, a P-256 key and an
// RSA key marked PS256 under algorithms = ["RS256"]) is a failed fetch that
// keeps the cached signing key, not a new set that refuses every token.
func TestJWKSSetWithoutSigningKeysKeepsTheCache(t *testing.T) {
	t.Parallel()
	testKeys(t)
	is := newIssuer(t)
	enc := jwkWith(t, "enc-1", &rsa2.PublicKey, jwkset.JWKMetadataOptions{USE: jwkset.UseEnc})
	is.publishRaw([]byte(`{"keys":[` + jwkWith(t, "sig-1", &rsa1.PublicKey, jwkset.JWKMetadataOptions{USE: jwkset.UseSig}) + `,` + enc + `]}`))
	s := startService(t, jwksTOML(is, "2s")+"algorithms = [\"RS256\"]\n")
	cached := func() map[string]any {
		_, c := readyCheck(t, s.Service)
		return c
	}
	waitFor(t, "the first JWKS fetch", func() bool { return cached()["healthy"] == true })
	if c := cached(); c["meta"].(map[string]any)["keys"] != float64(1) || c["detail"] != "jwks: 1 keys cached" {
		t.Fatalf("/ready with a signing and an encryption key: %v, want 1 key counted", c)
	}
	tok := sign(t, "RS256", "sig-1", claimsAt(s.clock.Now()), rsa1)
	if r := s.Get(t, "/me", bearer(tok)...); r.Status != 200 {
		t.Fatalf("before: %d %s", r.Status, r.Body)
	}

	// The issuer breaks: nothing in its set verifies an RS256 token.
	is.publishRaw([]byte(`{"keys":[` + enc + `,` +
		jwkWith(t, "ec-1", &ec256.PublicKey, jwkset.JWKMetadataOptions{USE: jwkset.UseSig}) + `,` +
		jwkWith(t, "ps-1", &rsa3.PublicKey, jwkset.JWKMetadataOptions{ALG: jwkset.AlgPS256}) + `]}`))
	s.clock.BlockUntil(1) // the refresh loop waits on the clock
	s.clock.Advance(auth.DefaultJWKSRefreshInterval)
	waitFor(t, "the refresh to fail", func() bool { return cached()["meta"].(map[string]any)["last_error"] != nil })
	c := cached()
	if lastErr, _ := c["meta"].(map[string]any)["last_error"].(string); !strings.Contains(lastErr, "no usable keys") {
		t.Errorf("last_error = %q, want it to say the set has no usable keys", lastErr)
	}
	if c["meta"].(map[string]any)["keys"] != float64(1) || c["healthy"] != false {
		t.Errorf("/ready after the set without signing keys: %v, want unhealthy with the 1 cached key", c)
	}
	if r := s.Get(t, "/me", bearer(tok)...); r.Status != 200 {
		t.Fatalf("a set without a signing key replaced the cached keys: a valid token now gets %d %s", r.Status, r.Body)
	}
}

// TestJWKSShadowedSigningKeyIsNotUsable: a token's kid finds the first key
// of the set with it, so a signing key behind an encryption key of the same
// kid verifies nothing and is no usable key: a refreshed set holding only
// that pair is a failed fetch that keeps the cached key, not a set /ready
// calls healthy while every token is refused.
func TestJWKSShadowedSigningKeyIsNotUsable(t *testing.T) {
	t.Parallel()
	testKeys(t)
	is := newIssuer(t)
	sig := jwkWith(t, "k1", &rsa1.PublicKey, jwkset.JWKMetadataOptions{USE: jwkset.UseSig})
	is.publishRaw([]byte(`{"keys":[` + sig + `]}`))
	s := startService(t, jwksTOML(is, "2s"))
	waitFor(t, "the first JWKS fetch", func() bool { _, c := readyCheck(t, s.Service); return c["healthy"] == true })
	tok := sign(t, "RS256", "k1", claimsAt(s.clock.Now()), rsa1)
	if r := s.Get(t, "/me", bearer(tok)...); r.Status != 200 {
		t.Fatalf("before: %d %s", r.Status, r.Body)
	}
	enc := jwkWith(t, "k1", &rsa2.PublicKey, jwkset.JWKMetadataOptions{USE: jwkset.UseEnc})
	is.publishRaw([]byte(`{"keys":[` + enc + `,` + sig + `]}`))
	s.clock.BlockUntil(1) // the refresh loop waits on the clock
	s.clock.Advance(auth.DefaultJWKSRefreshInterval)
	waitFor(t, "the refresh to fail", func() bool {
		_, c := readyCheck(t, s.Service)
		return c["meta"].(map[string]any)["last_error"] != nil
	})
	if r := s.Get(t, "/me", bearer(tok)...); r.Status != 200 {
		t.Fatalf("a set whose signing key is shadowed by an encryption key of the same kid replaced the cached keys: %d %s", r.Status, r.Body)
	}
}

// TestJWKSPeriodicRefresh: the set is fetched again every jwks_refresh_interval
// (on the App's clock), so a withdrawn key stops verifying without any unknown kid.
func TestJWKSPeriodicRefresh(t *testing.T) {
	t.Parallel()
	testKeys(t)
	is := newIssuer(t)
	is.publish(t, map[string]crypto.PublicKey{"a": &rsa1.PublicKey, "b": &rsa2.PublicKey})
	s := startJWKS(t, is, "2s")
	tokenA := sign(t, "RS256", "a", claimsAt(s.clock.Now()), rsa1)
	is.publish(t, map[string]crypto.PublicKey{"b": &rsa2.PublicKey})
	hits := is.hits.Load()
	s.clock.BlockUntil(1) // the refresh loop waits on the clock
	s.clock.Advance(auth.DefaultJWKSRefreshInterval)
	waitFor(t, "the periodic refresh", func() bool {
		_, c := readyCheck(t, s.Service)
		return is.hits.Load() > hits && c["meta"].(map[string]any)["keys"] == float64(1)
	})
	s.clock.Advance(auth.DefaultJWKSMinRefreshInterval) // let the unknown kid refresh; it stays unknown
	expect401(t, s.Get(t, "/me", bearer(tokenA)...), auth.ReasonKID)
}

// TestJWKSDrill is the identity-provider drill: the issuer hangs, fails and comes
// back while the App keeps serving.
func TestJWKSDrill(t *testing.T) {
	t.Parallel()
	testKeys(t)
	is := newIssuer(t)
	is.publish(t, map[string]crypto.PublicKey{"k1": &rsa1.PublicKey})
	// Long enough that the checks below, made while the fetch hangs, finish before
	// it times out even on a loaded CI machine.
	const timeout = 2 * time.Second
	s := startJWKS(t, is, timeout.String())
	now := s.clock.Now()
	known := sign(t, "RS256", "k1", claimsAt(now), rsa1)
	fresh := sign(t, "RS256", "k2", claimsAt(now), rsa2)

	// 1. The issuer hangs. Tokens with an unknown kid start one fetch, which
	// hangs; the ones arriving meanwhile join it.
	is.set("hang")
	hits := is.hits.Load()
	type result struct {
		r       jfasttest.Response
		elapsed time.Duration
	}
	const waiting = 4
	done := make(chan result, waiting)
	for range waiting {
		go func() {
			start := time.Now()
			r := s.Get(t, "/me", bearer(fresh)...)
			done <- result{r, time.Since(start)}
		}()
	}
	waitFor(t, "the hanging fetch", func() bool { return is.hanging.Load() == 1 })

	// 2. Meanwhile known kids verify without waiting on the issuer: each answer
	// arrives while the fetch is still hanging (a request that waited on it could
	// only finish after it ended).
	for range 5 {
		start := time.Now()
		r := s.Get(t, "/me", bearer(known)...)
		el := time.Since(start)
		if r.Status != 200 || is.hanging.Load() != 1 {
			t.Fatalf("known kid while the issuer hangs: status %d in %s, fetch hanging: %v", r.Status, el, is.hanging.Load() == 1)
		}
		if el > timeout/2 {
			t.Errorf("known kid while the issuer hangs took %s", el)
		}
	}

	// 3. The unknown kids get 503 naming jwks within jwks_timeout, from one fetch.
	for range waiting {
		res := <-done
		if res.r.Status != http.StatusServiceUnavailable || res.elapsed > timeout+time.Second {
			t.Fatalf("unknown kid while the issuer hangs: status %d in %s, body %s", res.r.Status, res.elapsed, res.r.Body)
		}
		if p := decodeProblem(t, res.r); p.Dependency != "jwks" {
			t.Fatalf("503 does not name jwks: %+v", p)
		}
		// The fetch they waited for opened the breaker: they are told its
		// cool-down, as the callers after them are.
		if ra := res.r.Header.Get("Retry-After"); ra != "30" {
			t.Fatalf("unknown kid that waited for the failed fetch: Retry-After = %q, want 30 (breaker_cool_down)", ra)
		}
	}
	if got := is.hits.Load() - hits; got != 1 {
		t.Fatalf("%d unknown-kid requests made %d fetches, want 1", waiting, got)
	}

	// 4. The breaker is open: unknown kids are answered at once, without a fetch,
	// with the cool-down in Retry-After; known kids still verify.
	hits = is.hits.Load()
	for range 5 {
		start := time.Now()
		r := s.Get(t, "/me", bearer(fresh)...)
		if el := time.Since(start); r.Status != 503 || el > timeout/2 {
			t.Fatalf("unknown kid with the breaker open: status %d in %s", r.Status, el)
		}
		if r.Header.Get("Retry-After") != "30" {
			t.Fatalf("Retry-After = %q, want 30 (breaker_cool_down)", r.Header.Get("Retry-After"))
		}
	}
	if r := s.Get(t, "/me", bearer(known)...); r.Status != 200 {
		t.Fatalf("known kid with the breaker open: %d", r.Status)
	}
	if got := is.hits.Load(); got != hits {
		t.Fatalf("the open breaker let %d fetches through", got-hits)
	}
	if got := counter(t, s, "jfast_auth_jwks_fetches_total", "circuit_open"); got < 5 {
		t.Errorf("jfast_auth_jwks_fetches_total{result=\"circuit_open\"} = %v, want at least 5", got)
	}

	// 5. /ready: degraded (200), not critical, with keys, last refresh and breaker.
	status, c := readyCheck(t, s.Service)
	meta := c["meta"].(map[string]any)
	br := meta["breaker"].(map[string]any)
	if status != 200 || c["overall"] != "degraded" || c["healthy"] != false || c["critical"] != false ||
		meta["keys"] != float64(1) || meta["last_refresh"] == nil || br["state"] != "open" {
		t.Fatalf("/ready while the issuer hangs: %d %v", status, c)
	}

	// 6. The issuer fails outright (500) through the next probe: the breaker
	// reopens for a full cool-down; the 503 is immediate.
	is.set("fail")
	s.clock.Advance(30 * time.Second)
	waitFor(t, "the probe after the cool-down", func() bool {
		_, c := readyCheck(t, s.Service)
		b := c["meta"].(map[string]any)["breaker"].(map[string]any)
		return b["state"] == "open" && is.hits.Load() > hits
	})
	if r := s.Get(t, "/me", bearer(fresh)...); r.Status != 503 {
		t.Fatalf("unknown kid with the issuer failing: %d", r.Status)
	}
	if r := s.Get(t, "/me", bearer(known)...); r.Status != 200 {
		t.Fatalf("known kid with the issuer failing: %d", r.Status)
	}

	// 7. The issuer recovers with a new key; after the cool-down the new kid is
	// accepted on the same App.
	is.publish(t, map[string]crypto.PublicKey{"k1": &rsa1.PublicKey, "k2": &rsa2.PublicKey})
	is.set("answer")
	s.clock.Advance(30 * time.Second)
	if r := s.Get(t, "/me", bearer(fresh)...); r.Status != 200 {
		t.Fatalf("new kid after the issuer recovered: %d %s", r.Status, r.Body)
	}
	waitFor(t, "/ready to pass", func() bool {
		_, c := readyCheck(t, s.Service)
		return c["healthy"] == true
	})
}

// TestJWKSBreakerInSharedMetrics: the JWKS breaker is in the breaker families
// every plugin that calls out shares, as plugin "auth", dependency "jwks":
// closed (0) from the start, open (1) once a failed fetch opened it, closed
// again after the probe that followed the cool-down, each transition counted.
func TestJWKSBreakerInSharedMetrics(t *testing.T) {
	t.Parallel()
	testKeys(t)
	is := newIssuer(t)
	is.publish(t, map[string]crypto.PublicKey{"k1": &rsa1.PublicKey})
	s := startJWKS(t, is, "2s")
	breaker := func() float64 {
		return jfasttest.Metric(t, s.Metrics(), "jfast_client_breaker_state", "plugin", "auth", "dependency", "jwks")
	}
	transitions := func(from, to string) float64 {
		return jfasttest.Metric(t, s.Metrics(), "jfast_client_breaker_transitions_total",
			"plugin", "auth", "dependency", "jwks", "from", from, "to", to)
	}
	if _, ok := jfasttest.Series(t, s.Metrics(), "jfast_client_breaker_state", "plugin", "auth", "dependency", "jwks"); !ok || breaker() != 0 {
		t.Fatalf("jfast_client_breaker_state{plugin=\"auth\",dependency=\"jwks\"} before any failure = %v, want a series at 0 (closed)", breaker())
	}

	// A token with an unknown kid starts a fetch, which fails and opens the
	// breaker (breaker_failures = 1). The breaker's hook ran on the fetch's
	// goroutine before the request it answered could go on, so the state
	// shows at once.
	is.set("fail")
	token := sign(t, "RS256", "k2", claimsAt(s.clock.Now()), rsa2)
	if r := s.Get(t, "/me", bearer(token)...); r.Status != http.StatusServiceUnavailable || decodeProblem(t, r).Dependency != "jwks" {
		t.Fatalf("unknown kid with the issuer failing: %d %s", r.Status, r.Body)
	}
	if got, opened := breaker(), transitions("closed", "open"); got != 1 || opened != 1 {
		t.Fatalf("after the failed fetch: state %v, transitions closed→open %v; want 1 and 1", got, opened)
	}

	// After the cool-down (test clock) the next fetch is the probe; the
	// issuer answers with the new key, and the breaker closes.
	is.publish(t, map[string]crypto.PublicKey{"k1": &rsa1.PublicKey, "k2": &rsa2.PublicKey})
	is.set("answer")
	s.clock.Advance(auth.DefaultJWKSCoolDown)
	if r := s.Get(t, "/me", bearer(token)...); r.Status != 200 {
		t.Fatalf("new kid after the cool-down: %d %s", r.Status, r.Body)
	}
	if got := breaker(); got != 0 || transitions("open", "half_open") != 1 || transitions("half_open", "closed") != 1 {
		t.Fatalf("after the probe: state %v, open→half_open %v, half_open→closed %v; want 0, 1, 1",
			got, transitions("open", "half_open"), transitions("half_open", "closed"))
	}
}

// TestJWKSIssuerDownAtBoot: the boot does not wait for or fail on the issuer;
// tokens get 503 jwks until it answers, then verify.
func TestJWKSIssuerDownAtBoot(t *testing.T) {
	t.Parallel()
	testKeys(t)
	is := newIssuer(t)
	is.set("fail")
	s := startService(t, jwksTOML(is, "2s"))
	token := sign(t, "RS256", "k1", claimsAt(s.clock.Now()), rsa1)
	waitFor(t, "the first fetch to fail", func() bool {
		_, c := readyCheck(t, s.Service)
		return c["meta"].(map[string]any)["last_error"] != nil
	})
	r := s.Get(t, "/me", bearer(token)...)
	if p := decodeProblem(t, r); r.Status != 503 || p.Dependency != "jwks" {
		t.Fatalf("issuer down at boot: %d %+v", r.Status, p)
	}
	status, c := readyCheck(t, s.Service)
	if status != 200 || c["overall"] != "degraded" || c["critical"] != false {
		t.Fatalf("/ready with the issuer down at boot: %d %v", status, c)
	}
	is.publish(t, map[string]crypto.PublicKey{"k1": &rsa1.PublicKey})
	is.set("answer")
	s.clock.Advance(auth.DefaultJWKSCoolDown)
	if r := s.Get(t, "/me", bearer(token)...); r.Status != 200 {
		t.Fatalf("after the issuer came back: %d %s", r.Status, r.Body)
	}
}

// TestJWKSStopWhileFetching: Stop ends a fetch that hangs and the refresh loop
// at once (goleak in TestMain checks nothing is left).
func TestJWKSStopWhileFetching(t *testing.T) {
	t.Parallel()
	is := newIssuer(t)
	is.set("hang")
	s := startService(t, jwksTOML(is, "1m"))
	waitFor(t, "the hanging first fetch", func() bool { return is.hanging.Load() == 1 })
	start := time.Now()
	if err := s.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	if el := time.Since(start); el > 2*time.Second {
		t.Fatalf("Stop took %s with a fetch hanging", el)
	}
	waitFor(t, "the issuer to see the fetch end", func() bool { return is.hanging.Load() == 0 })
}
