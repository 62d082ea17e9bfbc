package service

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/jfastframework/jfast/examples/internal/exampletest"
	"github.com/jfastframework/jfast/jfasttest"
)

// hmacAuth is the [plugin.auth] mode and key lines of the examples' files.
const hmacAuth = "mode = \"hmac\"\nsecret = \"jfast-examples-development-secret-0123456789\""

// orders signs order tokens, so in every mode docs/auth.md offers it either
// works or refuses to boot naming plugin.auth.issue: jwks mode (the issuer's
// keys verify, nothing here can sign), and public_key mode without a private
// key or with issue = false, are refused; hmac works (every other test of
// this package runs in it).
func TestAuthModesRefused(t *testing.T) {
	t.Parallel()
	pub := publicPEM(t, newKey(t))
	for name, auth := range map[string]string{
		"jwks":                       "mode = \"jwks\"\njwks_url = \"https://idp.example/.well-known/jwks.json\"",
		"public_key without private": "mode = \"public_key\"\npublic_key = '''\n" + pub + "'''",
	} {
		for _, issue := range []string{"issue = true ", "issue = false "} {
			_, err := jfasttest.New(t, jfasttest.Options{
				TOML:    exampletest.Config(t, "../jfast.toml", hmacAuth, auth, "issue = true ", issue),
				Plugins: Options().Plugins,
			})
			if err == nil || !strings.Contains(err.Error(), "plugin.auth.issue:") {
				t.Errorf("%s, %s: boot = %v, want it refused naming plugin.auth.issue", name, issue, err)
			}
		}
	}
	_, err := jfasttest.New(t, jfasttest.Options{
		TOML:    exampletest.Config(t, "../jfast.toml", "issue = true ", "issue = false "),
		Plugins: Options().Plugins,
	})
	if err == nil || !strings.Contains(err.Error(), "plugin.auth.issue: is false, and this service signs tokens of its own (order tokens billing verifies)") {
		t.Errorf("hmac with issue = false: boot = %v", err)
	}
}

// In public_key mode, orders signs with its private key and billing verifies
// callers' tokens and order tokens with the public key: an order is placed
// and paid.
func TestAuthModePublicKeyPays(t *testing.T) {
	t.Parallel()
	key := newKey(t)
	pub := publicPEM(t, key)
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	priv := string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}))
	bill := startBilling(t, hmacAuth, "mode = \"public_key\"\npublic_key = '''\n"+pub+"'''")
	b := setup(t, setupOpts{billingURL: bill.URL, replace: []string{hmacAuth, "mode = \"public_key\"\nprivate_key = '''\n" + priv + "'''"}})
	token, err := jwt.NewWithClaims(jwt.SigningMethodEdDSA, jwt.RegisteredClaims{
		Subject: "ada", Issuer: "jfast-examples", Audience: jwt.ClaimStrings{"shop"},
		ExpiresAt: jwt.NewNumericDate(time.Now().Add(time.Hour)),
	}).SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	sku := b.newSKU(t, 5, 999)
	r := b.svc.Do(t, http.MethodPost, "/orders", orderBody(sku, 1), exampletest.JSON("Authorization", "Bearer "+token)...)
	if r.Status != http.StatusCreated {
		t.Fatalf("POST /orders in public_key mode = %d %s", r.Status, r.Body)
	}
	if o := decodeOrder(t, r.Body); o.Status != "paid" {
		t.Fatalf("the order is %q, want paid", o.Status)
	}
}

func newKey(t *testing.T) ed25519.PrivateKey {
	t.Helper()
	_, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return key
}

func publicPEM(t *testing.T, key ed25519.PrivateKey) string {
	t.Helper()
	der, err := x509.MarshalPKIXPublicKey(key.Public())
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}))
}
