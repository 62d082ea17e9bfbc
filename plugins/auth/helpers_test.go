package auth_test

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/MicahParks/jwkset"
	"github.com/go-chi/chi/v5"
	"github.com/golang-jwt/jwt/v5"

	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/framework/resilience"
	"github.com/jfastframework/jfast/jfasttest"
	"github.com/jfastframework/jfast/plugins/auth"
)

// Keys are made once: RSA generation is slow under -race.
var (
	keysOnce sync.Once
	rsa1     *rsa.PrivateKey
	rsa2     *rsa.PrivateKey
	rsa3     *rsa.PrivateKey
	ec256    *ecdsa.PrivateKey
	ec384    *ecdsa.PrivateKey
	ed       ed25519.PrivateKey
)

func testKeys(t testing.TB) {
	t.Helper()
	keysOnce.Do(func() {
		var err error
		for _, k := range []**rsa.PrivateKey{&rsa1, &rsa2, &rsa3} {
			if *k, err = rsa.GenerateKey(rand.Reader, 2048); err != nil {
				panic(err)
			}
		}
		if ec256, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader); err != nil {
			panic(err)
		}
		if ec384, err = ecdsa.GenerateKey(elliptic.P384(), rand.Reader); err != nil {
			panic(err)
		}
		if _, ed, err = ed25519.GenerateKey(rand.Reader); err != nil {
			panic(err)
		}
	})
}

func publicPEM(t testing.TB, k crypto.PublicKey) string {
	t.Helper()
	der, err := x509.MarshalPKIXPublicKey(k)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}))
}

func privatePEM(t testing.TB, k crypto.PrivateKey) string {
	t.Helper()
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}))
}

// tomlString quotes s as a TOML multi-line literal string (PEM has newlines).
func tomlString(s string) string { return "'''\n" + s + "'''" }

const (
	testSecret   = "0123456789abcdef0123456789abcdef-test-secret"
	testIssuer   = "https://issuer.test/"
	testAudience = "orders"
)

// claimsAt returns valid claims for a clock at now.
func claimsAt(now time.Time) jwt.MapClaims {
	return jwt.MapClaims{
		"iss":    testIssuer,
		"aud":    testAudience,
		"sub":    "user-1",
		"iat":    now.Unix(),
		"exp":    now.Add(time.Hour).Unix(),
		"jti":    "jti-" + now.Format("150405.000000000"),
		"scope":  "orders:read profile",
		"roles":  []string{"clerk"},
		"tenant": "acme",
	}
}

// sign signs claims with alg and key, with kid in the header when not empty.
func sign(t testing.TB, alg, kid string, claims jwt.MapClaims, key any) string {
	t.Helper()
	tok := jwt.NewWithClaims(jwt.GetSigningMethod(alg), claims)
	if kid != "" {
		tok.Header["kid"] = kid
	}
	s, err := tok.SignedString(key)
	if err != nil {
		t.Fatalf("sign %s: %v", alg, err)
	}
	return s
}

// routes mounts the routes the tests call: /me echoes what RequireAuth put in the
// context; /orders needs scope orders:write; /admin needs role admin or owner.
func routes(app *framework.App, r chi.Router) error {
	a, err := auth.From(app)
	if err != nil {
		return err
	}
	echo := framework.Handler(func(w http.ResponseWriter, r *http.Request) error {
		c, ok := auth.ClaimsFrom(r.Context())
		if !ok {
			return framework.JSON(w, 500, map[string]string{"error": "no claims in context"})
		}
		return framework.JSON(w, 200, map[string]any{
			"sub": c.Subject, "scopes": c.Scopes, "roles": c.Roles, "custom": c.Custom,
			"jti": c.ID, "bearer": framework.BearerToken(r.Context()),
		})
	})
	r.With(a.RequireAuth()).Method(http.MethodGet, "/me", echo)
	r.With(a.RequireAuth(auth.Scopes("orders:write"))).Method(http.MethodGet, "/orders", echo)
	r.With(a.RequireAuth(auth.Roles("admin", "owner"))).Method(http.MethodGet, "/admin", echo)
	r.Method(http.MethodGet, "/public", echo) // no RequireAuth: no claims
	return nil
}

// service is a started App with the auth plugin, on a test clock.
type service struct {
	*jfasttest.Service
	clock *resilience.TestClock
	auth  *auth.Plugin
}

// startService starts an App with the auth plugin (and extra plugins) on a test
// clock; it stops when the test ends.
func startService(t testing.TB, toml string, extra ...framework.Plugin) service {
	t.Helper()
	clk := jfasttest.NewClock()
	a := auth.New()
	svc := jfasttest.Start(t, jfasttest.Options{
		TOML:    toml,
		Plugins: append([]framework.Plugin{a}, extra...),
		Routes:  routes,
		Clock:   clk,
	})
	return service{Service: svc, clock: clk, auth: a}
}

// problemBody is the part of a problem+json body the tests read.
type problemBody struct {
	Status     int     `json:"status"`
	Detail     string  `json:"detail"`
	Reason     string  `json:"reason"`
	Dependency string  `json:"dependency"`
	RetryAfter float64 `json:"retry_after"`
}

func decodeProblem(t testing.TB, r jfasttest.Response) problemBody {
	t.Helper()
	if ct := r.Header.Get("Content-Type"); ct != "application/problem+json" {
		t.Fatalf("Content-Type = %q, want application/problem+json; body %s", ct, r.Body)
	}
	var p problemBody
	if err := json.Unmarshal(r.Body, &p); err != nil {
		t.Fatalf("decode problem %s: %v", r.Body, err)
	}
	return p
}

// expect401 asserts a 401 invalid_token problem with reason.
func expect401(t testing.TB, r jfasttest.Response, reason auth.Reason) {
	t.Helper()
	if r.Status != http.StatusUnauthorized {
		t.Fatalf("status = %d, want 401; body %s", r.Status, r.Body)
	}
	if h := r.Header.Get("WWW-Authenticate"); !strings.HasPrefix(h, `Bearer error="invalid_token"`) {
		t.Errorf("WWW-Authenticate = %q, want Bearer error=\"invalid_token\"", h)
	}
	if p := decodeProblem(t, r); p.Reason != string(reason) || p.Status != 401 {
		t.Errorf("problem = %+v, want status 401 reason %q", p, reason)
	}
}

func bearer(token string) []string { return []string{"Authorization", "Bearer " + token} }

// issuer is an in-process identity provider's JWKS endpoint that answers, hangs
// or fails on command.
type issuer struct {
	srv       *httptest.Server
	mu        sync.Mutex
	mode      string // "answer", "hang", "fail"
	body      []byte
	hits      atomic.Int32 // requests received
	hanging   atomic.Int32 // requests being held
	release   chan struct{}
	closeOnce sync.Once
}

func newIssuer(t testing.TB) *issuer {
	t.Helper()
	is := &issuer{mode: "answer", release: make(chan struct{}), body: []byte(`{"keys":[]}`)}
	is.srv = httptest.NewServer(http.HandlerFunc(is.serve))
	t.Cleanup(is.close)
	return is
}

// close releases held requests and stops the server; it may be called early.
func (is *issuer) close() {
	is.closeOnce.Do(func() {
		close(is.release)
		is.srv.Close()
	})
}

func (is *issuer) serve(w http.ResponseWriter, r *http.Request) {
	is.hits.Add(1)
	is.mu.Lock()
	mode, body := is.mode, is.body
	is.mu.Unlock()
	switch mode {
	case "hang":
		is.hanging.Add(1)
		defer is.hanging.Add(-1)
		select {
		case <-r.Context().Done():
		case <-is.release:
		}
	case "fail":
		http.Error(w, "issuer down", http.StatusInternalServerError)
	default:
		w.Header().Set("Content-Type", "application/jwk-set+json")
		_, _ = w.Write(body)
	}
}

func (is *issuer) set(mode string) {
	is.mu.Lock()
	is.mode = mode
	is.mu.Unlock()
}

// publish replaces the key set: kid → public key.
func (is *issuer) publish(t testing.TB, keys map[string]crypto.PublicKey) {
	t.Helper()
	var set jwkset.JWKSMarshal
	for kid, k := range keys {
		j, err := jwkset.NewJWKFromKey(k, jwkset.JWKOptions{Metadata: jwkset.JWKMetadataOptions{KID: kid, USE: jwkset.UseSig}})
		if err != nil {
			t.Fatal(err)
		}
		set.Keys = append(set.Keys, j.Marshal())
	}
	b, err := json.Marshal(set)
	if err != nil {
		t.Fatal(err)
	}
	is.publishRaw(b)
}

func (is *issuer) publishRaw(b []byte) {
	is.mu.Lock()
	is.body = b
	is.mu.Unlock()
}

func (is *issuer) url() string { return is.srv.URL + "/.well-known/jwks.json" }

// waitFor polls cond every 5 ms for up to 10 s of real time.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// readyCheck returns /ready's entry for auth.
func readyCheck(t testing.TB, s *jfasttest.Service) (int, map[string]any) {
	t.Helper()
	r := s.Get(t, "/ready")
	var body struct {
		Status string                    `json:"status"`
		Checks map[string]map[string]any `json:"checks"`
	}
	if err := json.Unmarshal(r.Body, &body); err != nil {
		t.Fatalf("decode /ready %s: %v", r.Body, err)
	}
	c := body.Checks["auth"]
	if c == nil {
		t.Fatalf("/ready has no auth check: %s", r.Body)
	}
	c["overall"] = body.Status
	return r.Status, c
}

func mustEC(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func mustEd(t testing.TB) ed25519.PrivateKey {
	t.Helper()
	_, k, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func b64(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

// jwkJSON is one public JWK as JSON.
func jwkJSON(t testing.TB, kid string, k crypto.PublicKey) string {
	t.Helper()
	j, err := jwkset.NewJWKFromKey(k, jwkset.JWKOptions{Metadata: jwkset.JWKMetadataOptions{KID: kid}})
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(j.Marshal())
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// counter reads a counter with a single "result" label from the App's registry.
func counter(t testing.TB, s service, name, result string) float64 {
	t.Helper()
	mfs, err := s.Metrics().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "result" && l.GetValue() == result {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

// histogramCount returns how many observations the histogram name holds.
func histogramCount(t testing.TB, s service, name string) int64 {
	t.Helper()
	mfs, err := s.Metrics().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			return int64(mf.GetMetric()[0].GetHistogram().GetSampleCount())
		}
	}
	return 0
}

// jwkWith is one public JWK as JSON with the given metadata.
func jwkWith(t testing.TB, kid string, k crypto.PublicKey, md jwkset.JWKMetadataOptions) string {
	t.Helper()
	md.KID = kid
	j, err := jwkset.NewJWKFromKey(k, jwkset.JWKOptions{Metadata: md})
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(j.Marshal())
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
