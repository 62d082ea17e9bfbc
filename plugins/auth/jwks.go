package auth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"slices"
	"sync"
	"time"

	"github.com/MicahParks/jwkset"
	"github.com/MicahParks/keyfunc/v3"
	"github.com/golang-jwt/jwt/v5"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"

	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/framework/resilience"
	"github.com/jfastframework/jfast/problem"
)

// jwksDependency names the issuer's key set in 503 bodies, /ready, metrics and
// the breaker.
const jwksDependency = "jwks"

// maxJWKSBody bounds a JWK Set response: real sets are a few kilobytes.
const maxJWKSBody = 1 << 20

// jwksCache holds the issuer's keys in memory and refreshes them. Known kids are
// read from memory only (no I/O, no wait). Fetches go through one breaker and
// never overlap: a token with an unknown kid joins the fetch in flight, or starts
// one if the rate limit allows, or is answered from the last fetch's outcome.
//
// keyfunc's own HTTP storage (jwkset.NewStorageFromHTTP) is not used for the
// fetching: it refreshes on a real ticker (not the App's clock), its unknown-kid
// refresh waits on its rate limiter and swallows fetch errors, so "the issuer
// does not know this kid" (401) could not be told from "the issuer is down" (503),
// and its first fetch blocks the boot. keyfunc still turns a token into its key
// (kid lookup, the JWK's alg and use checks) over this cache, and jwkset parses
// and stores the keys.
type jwksCache struct {
	url      string
	timeout  time.Duration
	coolDown time.Duration
	interval time.Duration
	// algorithms is the allow-list: a key no algorithm of it fits verifies
	// nothing, and is not counted usable (verifiable).
	algorithms []string
	clock      resilience.Clock
	log        *slog.Logger

	client    *http.Client
	transport *http.Transport
	breaker   *resilience.Breaker
	limiter   *rate.Limiter // unknown-kid refreshes, driven by clock
	store     *jwkset.MemoryJWKSet
	keyfunc   keyfunc.Keyfunc
	fetches   *prometheus.CounterVec
	duration  prometheus.Histogram // of the fetches that made a request
	keyCount  prometheus.Gauge

	ctx    context.Context // ends at Stop; every fetch derives from it
	failed chan struct{}   // a fetch failed: the loop reschedules after the cool-down
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu          sync.Mutex
	inflight    *fetch
	lastSuccess time.Time
	lastErr     error // of the last fetch that ran; nil after a success
	keys        int   // of the cached set, those that can verify a token
}

// fetch is one download of the key set; waiters read err after done is closed.
type fetch struct {
	done chan struct{}
	err  error
}

type jwksOpts struct {
	url                    string
	timeout, interval, min time.Duration
	algorithms             []string
	breaker                resilience.BreakerConfig
	clock                  resilience.Clock
	log                    *slog.Logger
	registry               prometheus.Registerer
}

func newJWKSCache(o jwksOpts) (*jwksCache, error) {
	c := &jwksCache{
		url: o.url, timeout: o.timeout, coolDown: o.breaker.BreakerCoolDown, interval: o.interval,
		algorithms: o.algorithms, clock: o.clock, log: o.log,
		limiter: rate.NewLimiter(rate.Every(o.min), 1),
		store:   jwkset.NewMemoryStorage(),
		failed:  make(chan struct{}, 1),
	}
	c.transport = &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: o.timeout, KeepAlive: 30 * time.Second}).DialContext,
		TLSHandshakeTimeout:   o.timeout,
		ResponseHeaderTimeout: o.timeout,
		MaxIdleConns:          2,
		IdleConnTimeout:       90 * time.Second,
		ForceAttemptHTTP2:     true,
	}
	c.client = &http.Client{
		Transport: c.transport,
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) > 3 {
				return errors.New("more than 3 redirects")
			}
			if via[0].URL.Scheme == "https" && req.URL.Scheme != "https" {
				return errors.New("redirect from https to plain http refused")
			}
			return nil
		},
	}
	// The breaker is in the outbound-policy families every plugin that calls
	// out shares, as dependency "jwks". Its series is made here, so the state
	// reads 0 (closed) before the breaker first changes.
	clientMetrics := framework.NewClientMetrics()
	if err := clientMetrics.Register(o.registry); err != nil {
		return nil, fmt.Errorf("auth: register jwks breaker metrics: %w", err)
	}
	dep := clientMetrics.BreakerFor(name, jwksDependency)
	c.breaker = resilience.NewBreaker(o.breaker.Opts(jwksDependency, o.clock,
		resilience.LogStateChanges(c.log, name, o.breaker.BreakerCoolDown, dep.Transition)))
	dep.Follow(c.breaker)
	c.fetches = framework.NewCounterVec("jfast_auth_jwks_fetches_total", "JWK Set fetches by result: ok, error, or circuit_open (refused without I/O).", "result")
	c.duration = framework.NewHistogram("jfast_auth_jwks_fetch_duration_seconds", "Time of a JWK Set fetch that made a request, to the key set parsed or the error (jwks_timeout bounds it).", []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10})
	c.keyCount = framework.NewGauge("jfast_auth_jwks_keys", "Keys of the issuer's JWK Set cached in memory that can verify a token (use sig or unset, an allowed algorithm).")
	if err := framework.RegisterAll(o.registry, c.fetches, c.duration, c.keyCount); err != nil {
		return nil, fmt.Errorf("auth: register jwks metrics: %w", err)
	}
	kf, err := keyfunc.New(keyfunc.Options{
		Storage:      cacheStorage{c.store, c},
		UseWhitelist: signatureUses,
	})
	if err != nil {
		return nil, fmt.Errorf("auth: jwks keyfunc: %w", err)
	}
	c.keyfunc = kf
	return c, nil
}

// start launches the refresh loop; its first fetch runs at once, in the
// background: a boot never waits on, nor fails because of, the issuer.
func (c *jwksCache) start() {
	c.ctx, c.cancel = context.WithCancel(context.Background())
	c.wg.Add(1)
	go c.loop()
}

// stop ends the refresh loop and any fetch in flight, and waits for them.
func (c *jwksCache) stop(ctx context.Context) error {
	if c.cancel == nil {
		return nil
	}
	c.cancel()
	defer c.transport.CloseIdleConnections()
	if err := framework.Wait(ctx, &c.wg); err != nil {
		return fmt.Errorf("auth: stop jwks refresh: %w", err)
	}
	return nil
}

// loop refreshes the keys every interval. After a failed fetch, whoever
// started it, the next one is tried once the breaker's cool-down has passed, so
// the cache and /ready recover on their own even when no request asks.
func (c *jwksCache) loop() {
	defer c.wg.Done()
	var wait time.Duration
	for {
		if wait > 0 {
			t := c.clock.NewTimer(wait)
			select {
			case <-c.ctx.Done():
				t.Stop()
				return
			case <-c.failed:
				t.Stop()
				wait = c.retryWait(nil)
				continue
			case <-t.C():
			}
		}
		f := c.refresh()
		select {
		case <-c.ctx.Done():
			return
		case <-f.done:
		}
		wait = c.interval
		if f.err != nil {
			select {
			case <-c.failed: // this fetch's own signal
			default:
			}
			wait = c.retryWait(f.err)
		}
	}
}

// retryWait is how long the loop waits after a failure: what is left of the
// breaker's cool-down, or a full cool-down.
func (c *jwksCache) retryWait(err error) time.Duration {
	var open *resilience.OpenError
	if errors.As(err, &open) && open.RetryAfter() > 0 {
		return open.RetryAfter()
	}
	if s := c.breaker.Snapshot(); s.RetryAfter > 0 {
		return s.RetryAfter
	}
	return c.coolDown
}

// refresh joins the fetch in flight or starts one through the breaker. An open
// breaker answers at once with its *resilience.OpenError.
func (c *jwksCache) refresh() *fetch {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.inflight != nil {
		return c.inflight
	}
	ticket, err := c.breaker.Allow()
	if err != nil {
		c.fetches.WithLabelValues("circuit_open").Inc()
		return doneFetch(err)
	}
	return c.startLocked(ticket)
}

func doneFetch(err error) *fetch {
	f := &fetch{done: make(chan struct{}), err: err}
	close(f.done)
	return f
}

func (c *jwksCache) startLocked(ticket resilience.Ticket) *fetch {
	f := &fetch{done: make(chan struct{})}
	c.inflight = f
	c.wg.Add(1)
	go c.run(f, ticket)
	return f
}

func (c *jwksCache) run(f *fetch, ticket resilience.Ticket) {
	defer c.wg.Done()
	ctx, cancel := context.WithTimeout(c.ctx, c.timeout)
	start := time.Now()
	keys, usable, err := c.download(ctx)
	c.duration.Observe(time.Since(start).Seconds())
	cancel()
	switch {
	case c.ctx.Err() != nil:
		ticket.Done(resilience.Ignore) // stopping: no evidence about the issuer
		err = errors.New("auth: jwks fetch stopped: the App is shutting down")
	case err != nil && resilience.IsTimeout(err):
		ticket.Done(resilience.Hang) // no answer within jwks_timeout
	case err != nil:
		ticket.Done(resilience.Failure)
	default:
		ticket.Done(resilience.Success)
	}
	if err == nil {
		_ = c.store.KeyReplaceAll(context.Background(), keys) // memory storage: never fails
		c.keyCount.Set(float64(usable))
		c.fetches.WithLabelValues("ok").Inc()
	} else {
		c.fetches.WithLabelValues("error").Inc()
		select {
		case c.failed <- struct{}{}:
		default:
		}
		if c.ctx.Err() == nil {
			c.log.Warn("auth: jwks fetch failed; cached keys keep verifying",
				slog.String("dependency", jwksDependency), slog.String("error", err.Error()))
		}
	}
	c.mu.Lock()
	if err == nil {
		c.lastSuccess = c.clock.Now()
		c.keys = usable
	}
	c.lastErr = err
	c.inflight = nil
	f.err = err
	c.mu.Unlock()
	close(f.done)
}

// download fetches and parses the key set, and counts the keys that can
// verify a token (verifiable). Errors never carry the URL (it is a deploy key
// and may hold credentials).
func (c *jwksCache) download(ctx context.Context) (keys []jwkset.JWK, usable int, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.url, nil)
	if err != nil {
		return nil, 0, fmt.Errorf("auth: jwks request: %w", err)
	}
	req.Header.Set("Accept", "application/jwk-set+json, application/json")
	resp, err := c.client.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		if errors.Is(err, context.DeadlineExceeded) {
			return nil, 0, fmt.Errorf("auth: jwks fetch: no answer within jwks_timeout (%s)", c.timeout)
		}
		return nil, 0, fmt.Errorf("auth: jwks fetch: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
		return nil, 0, fmt.Errorf("auth: jwks fetch: the issuer answered %d", resp.StatusCode)
	}
	var set jwkset.JWKSMarshal
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxJWKSBody)).Decode(&set); err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return nil, 0, fmt.Errorf("auth: jwks fetch: body not read within jwks_timeout (%s)", c.timeout)
		}
		return nil, 0, fmt.Errorf("auth: jwks fetch: the key set is not valid JSON: %w", err)
	}
	keys = make([]jwkset.JWK, 0, len(set.Keys))
	skipped := 0
	kids := make(map[string]bool, len(set.Keys))
	for _, m := range set.Keys {
		// Public material only: a symmetric ("oct") key in a published set is
		// refused here, so it can never be used as an HMAC secret.
		k, err := jwkset.NewJWKFromMarshal(m, jwkset.JWKMarshalOptions{}, jwkset.JWKValidateOptions{})
		if err != nil || m.KID == "" {
			skipped++
			continue
		}
		keys = append(keys, k)
		// A token's kid finds the first key that has it: a later key with
		// the same kid is never used, so it is no usable key.
		first := !kids[m.KID]
		kids[m.KID] = true
		if first && verifiable(k, c.algorithms) {
			usable++
		}
	}
	if usable == 0 {
		// Keep the cached keys: a set with nothing to verify a token with
		// (empty, or only encryption keys or keys of algorithms not allowed)
		// is far more likely a broken issuer than the withdrawal of every key.
		return nil, 0, fmt.Errorf("auth: jwks fetch: the key set has no usable keys: none of its %d keys can verify a token (use sig or unset, an allowed algorithm), %d skipped", len(keys), skipped)
	}
	if skipped > 0 {
		c.log.Warn("auth: jwks keys skipped (unsupported type, no kid, or invalid)",
			slog.Int("skipped", skipped), slog.Int("kept", len(keys)))
	}
	return keys, usable, nil
}

// signatureUses are the JWK "use" values a key may have to verify a token:
// "sig", or none given.
var signatureUses = []jwkset.USE{jwkset.UseSig, ""}

// verifiable reports whether a token could verify with k: its "use" is one of
// signatureUses (keyfunc's check), and some algorithm of the allow-list fits
// both its "alg", when it has one (keyfunc's check), and its key type
// (keyFits, Plugin.key's check).
func verifiable(k jwkset.JWK, algorithms []string) bool {
	m := k.Marshal()
	if !slices.Contains(signatureUses, m.USE) {
		return false
	}
	key := k.Key()
	if pk, ok := key.(signer); ok {
		key = pk.Public()
	}
	for _, alg := range algorithms {
		if (m.ALG == "" || m.ALG.String() == alg) && keyFits(key, alg) {
			return true
		}
	}
	return false
}

// unknownKID is asked when kid is not cached. It returns nil when a refresh now
// holds the kid, a *TokenError when the issuer answered without it, and a
// *problem.DependencyError naming jwks when the issuer could not be asked: a
// request never waits longer than one fetch (jwks_timeout), and not at all while
// the breaker is open.
func (c *jwksCache) unknownKID(ctx context.Context, kid string) error {
	c.mu.Lock()
	f := c.inflight
	if f == nil {
		ticket, err := c.breaker.Allow()
		if err != nil {
			c.mu.Unlock()
			c.fetches.WithLabelValues("circuit_open").Inc()
			return unavailable(err)
		}
		if !c.limiter.AllowN(c.clock.Now(), 1) {
			ticket.Done(resilience.Ignore)
			lastErr := c.lastErr
			c.mu.Unlock()
			if lastErr != nil {
				return c.unavailable(lastErr)
			}
			return &TokenError{Reason: ReasonKID, Err: fmt.Errorf("kid %q is not in the issuer's key set (refreshed less than jwks_min_refresh_interval ago)", kid)}
		}
		f = c.startLocked(ticket)
	}
	c.mu.Unlock()
	select {
	case <-f.done:
	case <-ctx.Done():
		return unavailable(ctx.Err())
	}
	if f.err != nil {
		return c.unavailable(f.err)
	}
	if _, err := c.store.KeyRead(ctx, kid); err != nil {
		return &TokenError{Reason: ReasonKID, Err: fmt.Errorf("kid %q is not in the issuer's key set", kid)}
	}
	return nil
}

// unavailable is the package's unavailable with the breaker's cool-down
// left when err itself carries none: the fetch that failed has opened the
// breaker (it opens at the first failure), and the callers that waited for
// that fetch are told the wait the next callers get.
func (c *jwksCache) unavailable(err error) *problem.DependencyError {
	e := unavailable(err)
	if e.RetryAfter == 0 {
		e.RetryAfter = c.breaker.Snapshot().RetryAfter
	}
	return e
}

func unavailable(err error) *problem.DependencyError {
	e := &problem.DependencyError{
		Dependency: jwksDependency,
		Err:        err,
		Detail:     "the token's signing key is not cached and the issuer's key set (jwks) cannot be fetched right now",
	}
	var ra resilience.RetryAfterError
	if errors.As(err, &ra) {
		e.RetryAfter = ra.RetryAfter()
	}
	return e
}

// key returns the verification key of a token: kid required, the JWK's alg and
// use checked by keyfunc.
func (c *jwksCache) key(ctx context.Context, t *jwt.Token) (any, error) {
	kid, _ := t.Header["kid"].(string)
	if kid == "" {
		return nil, &TokenError{Reason: ReasonKID, Err: errors.New("jwks mode needs a kid in the token header")}
	}
	key, err := c.keyfunc.KeyfuncCtx(ctx)(t)
	if err != nil {
		var te *TokenError
		var de *problem.DependencyError
		if errors.As(err, &te) || errors.As(err, &de) {
			return nil, err
		}
		// keyfunc's own refusals: the JWK's "alg" differs from the token's, or
		// its "use" is not "sig".
		return nil, &TokenError{Reason: ReasonAlgorithm, Err: err}
	}
	return key, nil
}

// jwksStatus is the cache's state for /ready.
type jwksStatus struct {
	keys        int
	lastSuccess time.Time
	lastErr     error
	inflight    bool
	breaker     resilience.BreakerSnapshot
}

func (c *jwksCache) status() jwksStatus {
	c.mu.Lock()
	s := jwksStatus{keys: c.keys, lastSuccess: c.lastSuccess, lastErr: c.lastErr, inflight: c.inflight != nil}
	c.mu.Unlock()
	s.breaker = c.breaker.Snapshot()
	return s
}

// cacheStorage is the jwkset.Storage keyfunc reads: the memory storage, with a
// refresh when the kid is unknown.
type cacheStorage struct {
	*jwkset.MemoryJWKSet
	c *jwksCache
}

func (s cacheStorage) KeyRead(ctx context.Context, kid string) (jwkset.JWK, error) {
	if k, err := s.MemoryJWKSet.KeyRead(ctx, kid); err == nil {
		return k, nil
	}
	if err := s.c.unknownKID(ctx, kid); err != nil {
		return jwkset.JWK{}, err
	}
	return s.MemoryJWKSet.KeyRead(ctx, kid)
}
