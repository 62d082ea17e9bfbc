package idempotency

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/problem"
)

// Header names.
const (
	// HeaderKey is the request header carrying the client's key.
	HeaderKey = "Idempotency-Key"
	// HeaderReplayed is set to "true" on a response sent from the store.
	HeaderReplayed = "Idempotent-Replayed"
)

// MaxKeyLength is the longest Idempotency-Key accepted, in bytes.
const MaxKeyLength = 255

// Opts configures the middleware of one route (or group of routes).
type Opts struct {
	// RequireKey answers 400 to a request without an Idempotency-Key. Without
	// it such a request runs unguarded, as if the middleware were not there.
	// Defaults to false.
	RequireKey bool

	// Subject returns who is calling. With scope "caller" it chooses the key
	// space: one caller can neither replay nor occupy another's key, and a
	// keyed request for which it returns "" is refused with a 500 problem
	// without running (the service cannot tell its callers apart, so it fails
	// closed). It also goes into the fingerprint. Defaults to BearerSubject:
	// the SHA-256 of the caller's bearer token as the auth plugin recorded it
	// (framework.BearerToken). Set it to read a stable claim (the token's
	// "sub") when tokens are refreshed between retries, or to identify
	// callers that carry no bearer token (an API key's hash, a session's
	// user, an mTLS certificate's subject).
	Subject func(r *http.Request) string

	// Scope is whose key an Idempotency-Key is on these routes: ScopeCaller
	// (each subject its own keys) or ScopeGlobal (one key space for every
	// caller, identified or not). Defaults to the plugin's scope key, itself
	// "caller" by default.
	Scope string
}

// BearerSubject is the default Opts.Subject: the hex SHA-256 of the caller's
// bearer token recorded in the request's context (framework.BearerToken), or
// "" when there is none. The token itself is never stored.
func BearerSubject(r *http.Request) string {
	tok := framework.BearerToken(r.Context())
	if tok == "" {
		return ""
	}
	sum := sha256.Sum256([]byte(tok))
	return hex.EncodeToString(sum[:])
}

// Middleware returns the middleware that makes the routes it wraps idempotent
// for requests carrying an Idempotency-Key. Apply it per route, so the route
// template is known when it runs:
//
//	r.With(idem.Middleware(idempotency.Opts{RequireKey: true})).
//		Post("/payments", framework.Handler(charge))
//
// The first request with a key runs and its response is stored; a repeat with
// the same key and the same request gets the stored response with
// Idempotent-Replayed: true; the same key with another request gets 422; a
// repeat while the first still runs gets 409 with Retry-After. When the store
// does not answer, the route answers 503 without running the handler.
//
// Middleware takes no part in framework.Middlewarer: it is never applied to
// every route.
func (p *Plugin) Middleware(opts Opts) func(http.Handler) http.Handler {
	switch opts.Scope {
	case "":
		opts.Scope = p.cfg.Scope
	case ScopeCaller, ScopeGlobal:
	default:
		panic(fmt.Sprintf("idempotency: Opts.Scope must be %q or %q, got %q", ScopeCaller, ScopeGlobal, opts.Scope))
	}
	if opts.Subject == nil {
		opts.Subject = BearerSubject
		if opts.Scope == ScopeCaller && p.app != nil && p.app.Plugin("auth") == nil {
			// Only a warning: a service may record bearer tokens with its own
			// middleware (framework.ContextWithBearerToken).
			p.log.Warn(`idempotency: a route keeps keys per caller, identified by the bearer token (the default Opts.Subject), and the auth plugin is not enabled: unless the service records bearer tokens itself, every keyed request will be refused with 500. Set Opts.Subject to identify callers, or Opts.Scope = "global" for anonymous routes`)
		}
	}
	return func(next http.Handler) http.Handler {
		return &guard{p: p, opts: opts, next: next}
	}
}

type guard struct {
	p    *Plugin
	opts Opts
	next http.Handler
	// loggedNoSubject makes the first refusal for want of a subject an ERROR
	// naming the fix, and the rest only a count.
	loggedNoSubject atomic.Bool
}

// validKey reports whether k is 1 to 255 printable ASCII characters.
func validKey(k string) bool {
	if len(k) == 0 || len(k) > MaxKeyLength {
		return false
	}
	for i := 0; i < len(k); i++ {
		if k[i] < 0x20 || k[i] > 0x7e {
			return false
		}
	}
	return true
}

// target is what the request acts on: its path and query as sent. A key reused
// on another resource (POST /orders/2 with the key of POST /orders/1) is
// another request and gets 422, never the first resource's stored answer.
func target(r *http.Request) string {
	return r.URL.RequestURI()
}

// storeKey is the key a claim takes in the store: the client's key within its
// caller's key space (named by the SHA-256 of the subject, so the store holds
// no subject), or within the one space every caller shares.
func storeKey(scope, subject, key string) string {
	if scope == ScopeGlobal {
		return "global:" + key
	}
	sum := sha256.Sum256([]byte(subject))
	return "caller:" + hex.EncodeToString(sum[:]) + ":" + key
}

// fingerprint identifies a request: method, target, subject and body. Each
// field is written after its length, so no byte of one field (a NUL included)
// can be read as part of its neighbour.
func fingerprint(method, target, subject string, body []byte) string {
	b := sha256.Sum256(body)
	h := sha256.New()
	var n [8]byte
	for _, s := range [][]byte{[]byte(method), []byte(target), []byte(subject), b[:]} {
		binary.BigEndian.PutUint64(n[:], uint64(len(s)))
		h.Write(n[:])
		h.Write(s)
	}
	return hex.EncodeToString(h.Sum(nil))
}

func newToken() string {
	b := make([]byte, tokenLen/2)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func (g *guard) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p := g.p
	vals := r.Header.Values(HeaderKey)
	if len(vals) == 0 {
		if g.opts.RequireKey {
			g.count(outcomeInvalidKey)
			problem.Write(w, r, problem.BadRequest("this route needs an Idempotency-Key header: 1 to 255 printable characters, unique per operation (a UUID)"))
			return
		}
		g.count(outcomeNoKey)
		g.next.ServeHTTP(w, r)
		return
	}
	key := vals[0]
	if len(vals) > 1 || !validKey(key) {
		g.count(outcomeInvalidKey)
		problem.Write(w, r, problem.BadRequest("Idempotency-Key must be one header of 1 to 255 printable ASCII characters"))
		return
	}

	subject := g.opts.Subject(r)
	if subject == "" && g.opts.Scope == ScopeCaller {
		g.refuseNoSubject(w, r)
		return
	}

	body, err := io.ReadAll(io.LimitReader(r.Body, int64(p.cfg.MaxRequestBody)+1))
	var overLimit *http.MaxBytesError
	switch {
	case errors.As(err, &overLimit):
		// The route's own limit (app.max_body_bytes, framework.MaxBodyBytes)
		// stopped the read first: over either limit is a 413.
		g.refuseTooLarge(w, r, min(overLimit.Limit, int64(p.cfg.MaxRequestBody)))
		return
	case err != nil:
		g.refuseUnreadable(w, r, err)
		return
	case len(body) > p.cfg.MaxRequestBody:
		g.refuseTooLarge(w, r, int64(p.cfg.MaxRequestBody))
		return
	}
	_ = r.Body.Close()
	r.Body = io.NopCloser(bytes.NewReader(body))

	now := p.clock.Now()
	c := claim{
		Key:         storeKey(g.opts.Scope, subject, key),
		Fingerprint: fingerprint(r.Method, target(r), subject, body),
		Token:       newToken(),
		Now:         now,
		LeaseUntil:  now.Add(p.cfg.Lease),
		ExpiresAt:   now.Add(p.cfg.TTL),
	}
	acquired, rec, ok := g.take(w, r, c)
	if !ok {
		return
	}
	p.maybeSweep(now)
	if !acquired {
		g.answerHeld(w, r, c, rec)
		return
	}
	g.run(w, r, c)
}

// take acquires c's key. When the first request with it has answered, in
// this process, and is still writing its response to the store, take waits
// for that write (bounded by store_timeout, as the write is) and asks again:
// the repeat gets the stored response, or runs after a release, instead of a
// 409 for a request whose client already has its answer. When the store
// does not answer, take answers 503 and reports !ok.
func (g *guard) take(w http.ResponseWriter, r *http.Request, c claim) (acquired bool, rec *record, ok bool) {
	p := g.p
	settled := p.settling.of(c.Key)
	for {
		ctx, cancel := context.WithTimeout(r.Context(), p.cfg.StoreTimeout)
		acquired, rec, err := p.store.acquire(ctx, c)
		cancel()
		if err != nil {
			g.count(outcomeUnavailable)
			p.log.LogAttrs(r.Context(), slog.LevelWarn, "idempotency: the store did not answer; the request is refused with 503 and not run",
				slog.String("store", p.store.name()), slog.String("error", scrub(err)))
			framework.WriteError(w, r, p.unavailable(err))
			p.releaseLater(c)
			return false, nil, false
		}
		if acquired || settled == nil || rec.State != stateRunning || rec.Fingerprint != c.Fingerprint {
			return acquired, rec, true
		}
		select {
		case <-settled:
		case <-r.Context().Done():
			return false, rec, true
		}
		settled = nil // once: a key still running after the write is held
	}
}

// refuseTooLarge answers a keyed request whose body is over limit bytes, the
// lower of max_request_body and the route's body limit.
func (g *guard) refuseTooLarge(w http.ResponseWriter, r *http.Request, limit int64) {
	g.count(outcomeTooLarge)
	problem.Write(w, r, problem.ContentTooLarge(
		fmt.Sprintf("a request with an Idempotency-Key may carry at most %d bytes of body on this route", limit)))
}

// refuseUnreadable answers a keyed request whose body could not be read to
// its end as the framework answers it: 400 when the client broke off or sent
// a malformed body, 408 when the request's deadline passed while it was still
// sending. Nothing ran and nothing is stored.
func (g *guard) refuseUnreadable(w http.ResponseWriter, r *http.Request, err error) {
	g.count(outcomeUnreadable)
	var bre *framework.BodyReadError
	if errors.As(err, &bre) {
		framework.WriteError(w, r, err)
		return
	}
	// A body the framework does not serve (a test driving the router).
	problem.Write(w, r, problem.BadRequest("the request body could not be read to its end"))
}

// refuseNoSubject answers a keyed request whose caller the route cannot tell
// apart from others: keeping its key would let another caller replay its
// response or occupy its key, so nothing runs and nothing is stored. It is the
// service's configuration that is wrong, hence a 500.
func (g *guard) refuseNoSubject(w http.ResponseWriter, r *http.Request) {
	g.count(outcomeNoSubject)
	if g.loggedNoSubject.CompareAndSwap(false, true) {
		g.p.log.LogAttrs(r.Context(), slog.LevelError, `idempotency: a keyed request came with no caller subject on a route that keeps keys per caller; it was refused with 500 and not run. Identify callers (enable the auth plugin and verify tokens on the route, or set Opts.Subject), or set Opts.Scope = "global" if the route is for anonymous callers with unguessable keys (logged once per route)`,
			slog.String("method", r.Method), slog.String("path", r.URL.Path))
	}
	problem.Write(w, r, problem.New(http.StatusInternalServerError,
		"this route keeps Idempotency-Keys per caller and could not tell who is calling, so the request was not run; this is the service's configuration, not the request"))
}

// answerHeld answers a request whose key another request holds or completed.
func (g *guard) answerHeld(w http.ResponseWriter, r *http.Request, c claim, rec *record) {
	p := g.p
	switch {
	case rec.Fingerprint != c.Fingerprint:
		g.count(outcomeMismatch)
		problem.Write(w, r, problem.Unprocessable("this Idempotency-Key was already used for a different request (method, route, body or caller); use a new key for a new operation"))
	case rec.State == stateRunning:
		g.count(outcomeInProgress)
		pr := problem.Conflict("a request with this Idempotency-Key is still being processed; retry after it finishes to get its response")
		pr.RetryAfter = p.cfg.RetryAfter
		problem.Write(w, r, pr)
	case rec.State == stateTooLarge:
		g.count(outcomeNotKept)
		problem.Write(w, r, problem.Conflict("the request with this Idempotency-Key was already processed, but its response was too large to keep; it is not run again"))
	case rec.State == stateNotKept:
		g.count(outcomeNotKept)
		problem.Write(w, r, problem.Conflict("the request with this Idempotency-Key was already processed, but its handler took the connection over, so there is no response to replay; it is not run again"))
	default:
		g.count(outcomeReplayed)
		h := w.Header()
		for k, vs := range rec.Header {
			h[k] = append([]string(nil), vs...)
		}
		h.Set(HeaderReplayed, "true")
		h.Set("Content-Length", strconv.Itoa(len(rec.Body)))
		w.WriteHeader(rec.Status)
		if r.Method != http.MethodHead {
			_, _ = w.Write(rec.Body)
		}
	}
}

// stored reports whether a first response with this status is kept for
// replay. A 5xx says the service failed, a 429 says "not now", and a 499
// (framework.StatusClientClosedRequest) that the handler stopped because its
// client went away, so nobody got an answer: a retry should run the handler,
// so the key is released.
func stored(status int) bool {
	return status < 500 && status != http.StatusTooManyRequests && status != framework.StatusClientClosedRequest
}

// run executes the handler under the key c took, then stores or releases it.
func (g *guard) run(w http.ResponseWriter, r *http.Request, c claim) {
	p := g.p
	cw := &captureWriter{ResponseWriter: w, allowed: p.allowed, limit: p.cfg.MaxResponseBody}
	finished := false
	defer func() {
		if finished {
			return
		}
		// The handler panicked (or called runtime.Goexit): what it wrote
		// goes on as it would have without the middleware, the key is
		// released so a retry can run, and the panic goes on to the
		// recovery middleware.
		cw.pass()
		g.release(r, c)
		g.count(outcomeReleased)
	}()
	g.next.ServeHTTP(cw, r)
	finished = true

	status := cw.status
	if status == 0 {
		// Nothing written: net/http sends 200 with the headers the
		// handler set, and a replay sends the same.
		status = http.StatusOK
		cw.snapshot()
	}
	// The client has its answer before the store is written: a slow or
	// failing store delays only the record.
	defer p.settling.begin(c.Key)()
	cw.send(r.Method == http.MethodHead)
	if !stored(status) && !cw.hijacked {
		g.release(r, c)
		g.count(outcomeReleased)
		return
	}
	now := p.clock.Now()
	rec := &record{Fingerprint: c.Fingerprint, State: stateDone, LeaseUntil: now, ExpiresAt: now.Add(p.cfg.TTL),
		Status: status, Header: cw.header, Body: cw.body.Bytes()}
	outcome := outcomeExecuted
	switch {
	case cw.hijacked:
		// What went over the connection is the handler's own: replaying
		// the status written before, with no body, would be a lie.
		rec.State, rec.Header, rec.Body = stateNotKept, nil, nil
		outcome = outcomeNotKept
	case cw.overflow:
		rec.State, rec.Header, rec.Body = stateTooLarge, nil, nil
		outcome = outcomeNotKept
	}
	// The client may have gone: the response must be stored anyway.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), p.cfg.StoreTimeout)
	defer cancel()
	ok, err := p.store.complete(ctx, c.Key, c.Token, rec)
	switch {
	case err != nil:
		outcome = outcomeLost
		p.log.LogAttrs(r.Context(), slog.LevelError, "idempotency: the response could not be stored (its client gets it all the same); if the write reached the store after all (a timeout), repeats get it replayed; if not, the key stays held until its lease ends, then a retry runs the handler again",
			slog.String("store", p.store.name()), slog.Duration("lease", p.cfg.Lease), slog.String("error", scrub(err)))
	case !ok:
		outcome = outcomeLost
		p.log.LogAttrs(r.Context(), slog.LevelError, "idempotency: the key's lease ran out while the handler ran and another request took it; this response was not stored",
			slog.String("store", p.store.name()), slog.Duration("lease", p.cfg.Lease))
	}
	g.count(outcome)
}

func (g *guard) release(r *http.Request, c claim) {
	p := g.p
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), p.cfg.StoreTimeout)
	defer cancel()
	if err := p.store.release(ctx, c.Key, c.Token); err != nil {
		p.log.LogAttrs(r.Context(), slog.LevelWarn, "idempotency: the key could not be released; unless the release reached the store after all (a timeout), repeats get 409 until its lease ends",
			slog.String("store", p.store.name()), slog.Duration("lease", p.cfg.Lease), slog.String("error", scrub(err)))
	}
}

func (g *guard) count(outcome string) {
	g.p.metrics.requests.WithLabelValues(g.p.store.name(), outcome).Inc()
}

// unavailable is the 503 a guarded route answers when its store fails: the
// handler did not run, so the client may retry.
func (p *Plugin) unavailable(err error) error {
	// The store's plugin knows when to try again (its breaker's cool-down).
	var ra time.Duration
	var rt interface{ RetryAfter() time.Duration }
	if errors.As(err, &rt) {
		ra = rt.RetryAfter()
	} else if pr, ok := problem.As(err); ok {
		ra = pr.RetryAfter
	}
	return &problem.DependencyError{
		Dependency: p.dep,
		Err:        fmt.Errorf("idempotency store %s: %w", p.store.name(), err),
		RetryAfter: ra,
		Detail:     fmt.Sprintf("the idempotency store (%s, plugin %s) did not answer, so the request was not run; retry later", p.store.name(), p.dep),
	}
}

// scrub is err's text with any password masked.
func scrub(err error) string { return framework.MaskSecrets(err.Error()) }
