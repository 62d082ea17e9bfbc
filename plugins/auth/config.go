package auth

import (
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/framework/resilience"
)

// The three ways of knowing the key that verifies a token.
const (
	// ModeHMAC verifies HS256/HS384/HS512 tokens with a shared secret.
	ModeHMAC = "hmac"
	// ModePublicKey verifies RS/PS/ES/EdDSA tokens with one public key.
	ModePublicKey = "public_key"
	// ModeJWKS verifies RS/PS/ES/EdDSA tokens with the issuer's JWK Set,
	// fetched from jwks_url and cached.
	ModeJWKS = "jwks"
)

// Defaults, with the reasons in docs/auth.md.
const (
	// DefaultLeeway absorbs clock skew between the issuer and this process.
	DefaultLeeway = 30 * time.Second
	// DefaultJWKSTimeout bounds one JWKS fetch (docs/design.md, "Per-dependency defaults").
	DefaultJWKSTimeout = 5 * time.Second
	// DefaultJWKSCoolDown is how long the JWKS breaker stays open (breaker_cool_down):
	// cached keys keep verifying meanwhile.
	DefaultJWKSCoolDown = 30 * time.Second
	// DefaultJWKSRefreshInterval is how often the key set is fetched while the
	// issuer answers: it bounds how long a key the issuer withdrew keeps verifying.
	// New keys do not wait for it (an unknown kid refreshes at once).
	DefaultJWKSRefreshInterval = 15 * time.Minute
	// DefaultJWKSMinRefreshInterval is the least time between two refreshes asked
	// for by tokens with an unknown kid.
	DefaultJWKSMinRefreshInterval = 10 * time.Second
	// DefaultAccessTTL is the lifetime of an issued token.
	DefaultAccessTTL = 15 * time.Minute
	// minProductionSecret is the least HMAC secret length in production: 32 bytes
	// is HS256's output size (RFC 7518 §3.2 requires a key at least that long).
	minProductionSecret = 32
)

// Config is the [plugin.auth] table.
type Config struct {
	// Mode is how tokens are verified: "hmac" (a shared secret), "public_key"
	// (one PEM public key) or "jwks" (the issuer's JWK Set at jwks_url).
	// Defaults to "" (required).
	Mode string `koanf:"mode"`

	// Secret is the HMAC key in hmac mode. A deploy key (JFAST_AUTH_SECRET); it
	// is never logged. In production it must be at least 32 bytes.
	// Defaults to "".
	Secret string `koanf:"secret"`

	// PublicKey is the PEM public key (PKIX, PKCS #1 or a certificate) that
	// verifies tokens in public_key mode, inline or as a file path. A deploy key.
	// Defaults to "" (derived from private_key when that is set).
	PublicKey string `koanf:"public_key"`

	// PrivateKey is the PEM private key (PKCS #8, PKCS #1 or SEC 1), inline or as
	// a file path, that signs issued tokens in public_key mode (RS, PS, ES or
	// EdDSA). A deploy key; it is never logged. Defaults to "".
	PrivateKey string `koanf:"private_key"`

	// JWKSURL is the issuer's JWK Set in jwks mode. A deploy key
	// (JFAST_AUTH_JWKS_URL); https in production. Defaults to "".
	JWKSURL string `koanf:"jwks_url"`

	// Algorithms is the allow-list of "alg" values. Every entry must be an
	// algorithm the JWT library knows, of the family the key decides; "none" is
	// never accepted. Issued tokens use the first. Defaults to the key's family:
	// HS256, HS384, HS512 in hmac mode; the key type's algorithms in public_key
	// mode; RS*, PS*, ES* and EdDSA in jwks mode.
	Algorithms []string `koanf:"algorithms"`

	// Issuer, when set, must equal the token's "iss", and is the "iss" of issued
	// tokens. Defaults to "" (not checked).
	Issuer string `koanf:"issuer"`

	// Audience, when set, must be in the token's "aud", and is the "aud" of issued
	// tokens. Defaults to "" (not checked).
	Audience string `koanf:"audience"`

	// Leeway is the clock skew allowed on exp, nbf and iat. Defaults to 30s.
	Leeway time.Duration `koanf:"leeway"`

	// JWKSTimeout bounds one JWKS fetch: connect, TLS, headers and body.
	// Defaults to 5s.
	JWKSTimeout time.Duration `koanf:"jwks_timeout"`

	// BreakerConfig is the breaker_* keys of the JWKS breaker (jwks mode),
	// with two defaults of its own: breaker_failures 1, because fetches are
	// rare and each failed one may have cost a request jwks_timeout, and
	// breaker_cool_down 30s, because cached keys keep verifying meanwhile and
	// no request waits on the issuer.
	resilience.BreakerConfig `koanf:",squash"`

	// JWKSRefreshInterval is how often the key set is fetched while the issuer
	// answers (after a failure the next fetch is tried after breaker_cool_down).
	// Defaults to 15m.
	JWKSRefreshInterval time.Duration `koanf:"jwks_refresh_interval"`

	// JWKSMinRefreshInterval is the least time between two refreshes triggered by
	// tokens with an unknown kid, so made-up kids cannot flood the issuer.
	// Defaults to 10s.
	JWKSMinRefreshInterval time.Duration `koanf:"jwks_min_refresh_interval"`

	// Issue enables Plugin.Issue: hmac mode, or public_key mode with private_key.
	// Defaults to false.
	Issue bool `koanf:"issue"`

	// AccessTTL is the lifetime of issued tokens when the claims set no "exp".
	// Defaults to 15m.
	AccessTTL time.Duration `koanf:"access_ttl"`

	// CheckRevocation makes every verification ask the revocation store of an
	// enabled plugin that provides one (the cache plugin) whether the token's
	// "jti" was revoked; tokens without a jti are refused. Fails closed: a store
	// that cannot answer is a 503. Defaults to false.
	CheckRevocation bool `koanf:"check_revocation"`
}

func defaultConfig() Config {
	return Config{
		Leeway:                 DefaultLeeway,
		JWKSTimeout:            DefaultJWKSTimeout,
		BreakerConfig:          jwksBreakerDefaults(),
		JWKSRefreshInterval:    DefaultJWKSRefreshInterval,
		JWKSMinRefreshInterval: DefaultJWKSMinRefreshInterval,
		AccessTTL:              DefaultAccessTTL,
	}
}

// jwksBreakerDefaults are the JWKS breaker's defaults: one failed fetch opens
// it for DefaultJWKSCoolDown.
func jwksBreakerDefaults() resilience.BreakerConfig {
	b := resilience.DefaultBreakerConfig()
	b.BreakerFailures = 1
	b.BreakerCoolDown = DefaultJWKSCoolDown
	return b
}

// family is the kind of key an algorithm needs; the key decides the family, so a
// token cannot choose how its signature is checked.
type family string

const (
	familyHMAC    family = "hmac"
	familyRSA     family = "rsa"
	familyECDSA   family = "ecdsa"
	familyEd25519 family = "ed25519"
)

// algorithmFamily maps every algorithm jwt/v5 implements to its key family.
var algorithmFamily = map[string]family{
	"HS256": familyHMAC, "HS384": familyHMAC, "HS512": familyHMAC,
	"RS256": familyRSA, "RS384": familyRSA, "RS512": familyRSA,
	"PS256": familyRSA, "PS384": familyRSA, "PS512": familyRSA,
	"ES256": familyECDSA, "ES384": familyECDSA, "ES512": familyECDSA,
	"EdDSA": familyEd25519,
}

var (
	hmacAlgorithms       = []string{"HS256", "HS384", "HS512"}
	asymmetricAlgorithms = []string{"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"}
)

// Validate implements framework.Validator. It also loads the keys, so a key that
// does not parse stops the boot.
func (p *Plugin) Validate(v *framework.Validation) {
	c := &p.cfg
	p.keys = keys{}
	switch c.Mode {
	case ModeHMAC:
		p.validateHMAC(v)
	case ModePublicKey:
		p.validatePublicKey(v)
	case ModeJWKS:
		p.validateJWKS(v)
	case "":
		v.Error("mode", "is required", `set mode = "hmac", "public_key" or "jwks"`)
	default:
		v.Error("mode", fmt.Sprintf("must be hmac, public_key or jwks, got %q", c.Mode), `set mode = "hmac", "public_key" or "jwks"`)
	}
	if c.CheckRevocation {
		v.RequirePlugin("check_revocation", revocationPlugin, "is true, and revoked token IDs are kept by the cache plugin", "set check_revocation = false")
	}
	if c.Issue {
		switch {
		case c.Mode == ModeJWKS:
			v.Error("issue", "jwks mode cannot issue tokens: the issuer's private keys are not here",
				`set issue = false, or use mode = "hmac", or mode = "public_key" with private_key`)
		case c.Mode == ModePublicKey && c.PrivateKey == "":
			v.Error("issue", "public_key mode cannot issue tokens without a private key",
				"set private_key (JFAST_AUTH_PRIVATE_KEY) to the PEM private key, or set issue = false")
		}
	}
	if p.needsIssue != "" && !c.Issue {
		if c.Mode == ModeJWKS {
			v.Error("issue", "is false, and this service signs tokens of its own ("+p.needsIssue+"), which jwks mode cannot: the issuer's private keys are not here",
				`use mode = "hmac" (secret) or mode = "public_key" with private_key, and issue = true`)
		} else {
			v.Error("issue", "is false, and this service signs tokens of its own ("+p.needsIssue+")",
				`set issue = true (with private_key in public_key mode)`)
		}
	}
	if c.Mode != ModeJWKS && c.JWKSURL != "" && c.Mode != "" {
		v.Error("jwks_url", "is only used in jwks mode", `remove jwks_url, or set mode = "jwks"`)
	}
	if c.Leeway < 0 {
		v.Error("leeway", fmt.Sprintf("must not be negative, got %s", c.Leeway), `set a duration such as "30s", or "0s" for none`)
	}
	v.Deadline("jwks_timeout", c.JWKSTimeout)
	c.BreakerConfig.Validate(v)
	v.Deadline("jwks_refresh_interval", c.JWKSRefreshInterval)
	v.Deadline("jwks_min_refresh_interval", c.JWKSMinRefreshInterval)
	v.Deadline("access_ttl", c.AccessTTL)
}

func (p *Plugin) validateHMAC(v *framework.Validation) {
	c := &p.cfg
	switch {
	case c.Secret == "":
		v.Error("secret", "is required in hmac mode", "set JFAST_AUTH_SECRET to a random string of at least 32 bytes")
	case v.Production() && len(c.Secret) < minProductionSecret:
		v.Error("secret", fmt.Sprintf("is %d bytes; production needs at least %d", len(c.Secret), minProductionSecret),
			"set JFAST_AUTH_SECRET to a random string of at least 32 bytes, e.g. from `openssl rand -base64 48`")
	}
	if c.PublicKey != "" || c.PrivateKey != "" {
		v.Error("mode", "hmac mode uses secret; public_key and private_key are for public_key mode",
			`remove public_key and private_key, or set mode = "public_key"`)
	}
	p.keys.family = familyHMAC
	p.keys.secret = []byte(c.Secret)
	p.keys.signing = p.keys.secret
	p.validateAlgorithms(v, hmacAlgorithms)
}

func (p *Plugin) validatePublicKey(v *framework.Validation) {
	c := &p.cfg
	if c.Secret != "" {
		v.Error("secret", "is only used in hmac mode", `remove secret, or set mode = "hmac"`)
	}
	var priv signer
	if c.PrivateKey != "" {
		k, err := loadPrivateKey(c.PrivateKey)
		if err != nil {
			v.Error("private_key", err.Error(), "give a PEM private key (PKCS #8, PKCS #1 or SEC 1), inline or as a file path")
		} else {
			priv = k
		}
	}
	switch {
	case c.PublicKey != "":
		k, err := loadPublicKey(c.PublicKey)
		if err != nil {
			v.Error("public_key", err.Error(), "give a PEM public key (PKIX, PKCS #1 or a certificate), inline or as a file path")
			return
		}
		p.keys.public = k
	case priv != nil:
		p.keys.public = priv.Public()
	case c.PrivateKey == "":
		v.Error("public_key", "is required in public_key mode", "set public_key to the issuer's PEM public key, inline or as a file path")
		return
	default:
		return // private_key's error is reported
	}
	fam, err := keyFamily(p.keys.public)
	if err != nil {
		v.Error("public_key", err.Error(), "use an RSA, ECDSA (P-256, P-384, P-521) or Ed25519 key")
		return
	}
	p.keys.family = fam
	if priv != nil {
		if !samePublicKey(priv.Public(), p.keys.public) {
			v.Error("private_key", "does not match public_key", "give the private key of public_key, or leave public_key unset to derive it")
		} else {
			p.keys.signing = priv
		}
	}
	p.validateAlgorithms(v, keyAlgorithms(p.keys.public))
}

func (p *Plugin) validateJWKS(v *framework.Validation) {
	c := &p.cfg
	if c.Secret != "" || c.PublicKey != "" || c.PrivateKey != "" {
		v.Error("mode", "jwks mode takes its keys from jwks_url; secret, public_key and private_key are not used",
			"remove secret, public_key and private_key")
	}
	switch u, err := url.Parse(c.JWKSURL); {
	case c.JWKSURL == "":
		v.Error("jwks_url", "is required in jwks mode", "set JFAST_AUTH_JWKS_URL to the issuer's JWK Set URL, e.g. https://issuer.example/.well-known/jwks.json")
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		v.Error("jwks_url", "must be an absolute http or https URL", "set JFAST_AUTH_JWKS_URL to the issuer's JWK Set URL, e.g. https://issuer.example/.well-known/jwks.json")
	case v.Production() && u.Scheme != "https":
		v.Error("jwks_url", "uses plain http in production: anyone on the path could replace the keys",
			"use the issuer's https JWK Set URL")
	}
	p.validateAlgorithms(v, asymmetricAlgorithms)
	p.keys.family = "" // each JWK decides
}

// validateAlgorithms checks the allow-list against the JWT library and the family
// allowed (the key's), and records it. An empty list takes allowed.
func (p *Plugin) validateAlgorithms(v *framework.Validation, allowed []string) {
	c := &p.cfg
	if len(c.Algorithms) == 0 {
		p.keys.algorithms = allowed
		return
	}
	ok := true
	for i, alg := range c.Algorithms {
		key := fmt.Sprintf("algorithms[%d]", i)
		switch {
		case strings.EqualFold(alg, "none"):
			v.Error(key, `"none" is never accepted: it means an unsigned token`, "remove it")
			ok = false
		case jwt.GetSigningMethod(alg) == nil || algorithmFamily[alg] == "":
			v.Error(key, fmt.Sprintf("%q is not an algorithm the JWT library knows", alg),
				"use one of "+strings.Join(append(slices.Clone(hmacAlgorithms), asymmetricAlgorithms...), ", "))
			ok = false
		case !slices.Contains(allowed, alg):
			v.Error(key, fmt.Sprintf("%q does not fit the key: %s", alg, familyRule(c.Mode, p.keys.family, allowed)),
				"use one of "+strings.Join(allowed, ", "))
			ok = false
		}
	}
	if ok {
		p.keys.algorithms = slices.Clone(c.Algorithms)
	}
}

func familyRule(mode string, f family, allowed []string) string {
	switch mode {
	case ModeHMAC:
		return "hmac mode verifies HS256, HS384 and HS512 only"
	case ModeJWKS:
		return "jwks mode verifies asymmetric algorithms only (RS, PS, ES, EdDSA)"
	}
	return fmt.Sprintf("an %s public key verifies %s only", f, strings.Join(allowed, ", "))
}
