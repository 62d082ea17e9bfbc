package auth

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/framework/resilience"
	"github.com/jfastframework/jfast/readiness"
)

// name is the plugin's name in [plugins] enabled and [plugin.auth].
const name = "auth"

// revocationPlugin is the plugin whose revocation store check_revocation uses.
const revocationPlugin = "cache"

// Plugin verifies and issues JWTs. Build it with New; handlers get it with From.
type Plugin struct {
	cfg  Config
	keys keys

	clock         resilience.Clock
	parser        *jwt.Parser
	jwks          *jwksCache
	revocation    framework.RevocationStore
	revocationBy  string
	verifications *prometheus.CounterVec
	// needsIssue, when set, is why the service signs tokens (NeedsIssue):
	// issue = false then refuses the boot.
	needsIssue string
}

// Option configures the plugin in code, for what the service's code decides
// rather than its deployment.
type Option func(*Plugin)

// NeedsIssue declares that the service signs tokens itself (why says what
// for, such as "order tokens billing verifies"): a configuration that cannot
// issue (issue = false, so also jwks mode) refuses to boot naming
// plugin.auth.issue, rather than booting into an Issue that fails at run
// time.
func NeedsIssue(why string) Option { return func(p *Plugin) { p.needsIssue = why } }

// New returns the auth plugin with its defaults.
func New(opts ...Option) *Plugin {
	p := &Plugin{cfg: defaultConfig()}
	for _, o := range opts {
		o(p)
	}
	return p
}

// From returns the enabled auth plugin of app; call it in Routes, at boot.
func From(app *framework.App) (*Plugin, error) {
	return framework.Get[*Plugin](app, name)
}

// Name implements framework.Plugin.
func (p *Plugin) Name() string { return name }

// Config implements framework.Configurable.
func (p *Plugin) Config() any { return &p.cfg }

// DeployKeys implements framework.DeployKeyer: the environment wins for the key
// material and the issuer's address.
func (p *Plugin) DeployKeys() []string {
	return []string{"secret", "public_key", "private_key", "jwks_url"}
}

// SecretKeys implements framework.SecretKeyer: the HMAC secret and the
// private key are never printed (jwks_url loses only its URL password).
func (p *Plugin) SecretKeys() []string { return []string{"secret", "private_key"} }

// Dependencies implements framework.Dependent: the cache plugin, when enabled,
// starts first, so its revocation store is there when check_revocation needs it.
func (p *Plugin) Dependencies() []framework.Dependency {
	return []framework.Dependency{{Name: revocationPlugin, Optional: true}}
}

// Start implements framework.Starter. In jwks mode it starts the key refresh in
// the background; it never waits on the issuer.
func (p *Plugin) Start(_ context.Context, app *framework.App) error {
	p.clock = app.Clock()
	opts := []jwt.ParserOption{
		jwt.WithLeeway(p.cfg.Leeway),
		jwt.WithTimeFunc(p.clock.Now),
		jwt.WithExpirationRequired(),
		jwt.WithIssuedAt(),
	}
	if p.cfg.Issuer != "" {
		opts = append(opts, jwt.WithIssuer(p.cfg.Issuer))
	}
	if p.cfg.Audience != "" {
		opts = append(opts, jwt.WithAudience(p.cfg.Audience))
	}
	p.parser = jwt.NewParser(opts...)
	if p.cfg.Mode != ModeHMAC && p.cfg.Audience == "" {
		// Not a boot error (a service may be the issuer's only audience), but an
		// issuer usually signs tokens for many services: without an audience, a
		// token meant for any of them is accepted here.
		app.Logger().Warn("auth: plugin.auth.audience is not set: tokens for any audience of the issuer are accepted; set audience to this service's identifier")
	}

	if p.cfg.CheckRevocation {
		rp, err := framework.Get[framework.RevocationProvider](app, revocationPlugin)
		if err != nil {
			return fmt.Errorf("auth: plugin.auth.check_revocation is true but no enabled plugin keeps revoked token IDs; "+
				"add %q to [plugins] enabled, or set check_revocation = false: %w", revocationPlugin, err)
		}
		p.revocation = rp.RevocationStore()
		p.revocationBy = rp.Name()
		if p.revocation == nil {
			return fmt.Errorf("auth: plugin %q offers no revocation store", rp.Name())
		}
	}

	p.verifications = framework.NewCounterVec("jfast_auth_verifications_total", "Bearer token verifications by result: ok, a 401 reason, forbidden, or unavailable (503).", "result")
	if err := app.Metrics().Register(p.verifications); err != nil {
		return fmt.Errorf("auth: register metrics: %w", err)
	}

	if p.cfg.Mode == ModeJWKS {
		c, err := newJWKSCache(jwksOpts{
			url: p.cfg.JWKSURL, timeout: p.cfg.JWKSTimeout, breaker: p.cfg.BreakerConfig,
			interval: p.cfg.JWKSRefreshInterval, min: p.cfg.JWKSMinRefreshInterval,
			algorithms: p.keys.algorithms, clock: p.clock, log: app.Logger(), registry: app.Metrics(),
		})
		if err != nil {
			return err
		}
		p.jwks = c
		c.start()
	}
	return nil
}

// Stop implements framework.Stopper: it stops the JWKS refresh and waits for it.
func (p *Plugin) Stop(ctx context.Context) error {
	if p.jwks == nil {
		return nil
	}
	return p.jwks.stop(ctx)
}

// Check implements framework.Checker. In jwks mode it reports the cached key
// count, the last successful refresh and the breaker; it does no I/O, and a
// failure is never critical (cached keys keep verifying).
func (p *Plugin) Check(_ context.Context) readiness.Report {
	if p.jwks == nil {
		return readiness.Passed(fmt.Sprintf("%s mode: key loaded", p.cfg.Mode), map[string]any{"mode": p.cfg.Mode})
	}
	s := p.jwks.status()
	meta := map[string]any{
		"mode":         ModeJWKS,
		"keys":         s.keys,
		"last_refresh": nil,
		"breaker":      s.breaker.Meta(),
	}
	if !s.lastSuccess.IsZero() {
		meta["last_refresh"] = s.lastSuccess.UTC().Format(time.RFC3339)
	}
	switch {
	case s.lastErr == nil && s.keys > 0 && s.breaker.State == resilience.StateClosed:
		return readiness.Passed(fmt.Sprintf("jwks: %d keys cached", s.keys), meta)
	case s.lastErr == nil && s.keys == 0:
		return readiness.Impaired("jwks: the first fetch of the issuer's key set has not finished", meta)
	}
	detail := fmt.Sprintf("jwks unreachable; verifying with %d cached keys", s.keys)
	if s.lastErr != nil {
		meta["last_error"] = s.lastErr.Error()
		detail += ": " + s.lastErr.Error()
	}
	switch s.breaker.State {
	case resilience.StateOpen:
		detail += fmt.Sprintf("; calls to 'jwks' are suspended for %.1fs", s.breaker.RetryAfter.Seconds())
	case resilience.StateHalfOpen:
		detail += "; the next fetch probes the issuer"
	}
	return readiness.Impaired(detail, meta)
}

// errNotStarted is returned by Verify and Issue before Start.
var errNotStarted = errors.New("auth: the plugin has not started")

// UsesDependency reports whether the configuration reaches an issuer over the
// network: only jwks mode does (hmac and public_key verify with keys at hand).
// The drill command asks it (drills.DependencyUser), so a service in hmac mode
// runs no JWKS drill.
func (p *Plugin) UsesDependency() bool { return p.cfg.Mode == ModeJWKS }

var (
	_ framework.ClientPlugin = (*Plugin)(nil)
	_ framework.Dependent    = (*Plugin)(nil)
	_ framework.Stopper      = (*Plugin)(nil)
)
