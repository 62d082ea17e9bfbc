package idempotency

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/redis/go-redis/v9"

	"github.com/jfastframework/jfast/drills"
	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/framework/resilience"
	"github.com/jfastframework/jfast/jfasttest"
	"github.com/jfastframework/jfast/plugins/cache"
	"github.com/jfastframework/jfast/plugins/db"
	"github.com/jfastframework/jfast/problem"
)

// sharedRedis is the machine's Redis. Tests only touch keys under their own
// prefix and never flush it.
const sharedRedis = "127.0.0.1:6379"

// stores are the two stores every behaviour test runs against.
var stores = []string{StorePostgres, StoreRedis}

func suffix() string {
	b := make([]byte, 5)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// bundle is what a test of a running service needs.
type bundle struct {
	svc     *jfasttest.Service
	idem    *Plugin
	clock   *resilience.TestClock
	proxy   *drills.Proxy
	store   string
	table   string       // postgres
	prefix  string       // redis
	effects atomic.Int64 // side effects of the guarded handlers

	// gate, when set, makes /payments block after acting until it is closed
	// (only for the call that finds it set; the field is cleared then).
	mu      sync.Mutex
	gate    chan struct{}
	entered chan struct{}
	// failFirst makes /flaky answer 503 (before acting) on its first call.
	failFirst atomic.Bool
}

type setupOpts struct {
	store string
	toml  string // extra lines of [plugin.idempotency]
	// cacheTOML holds extra lines of [plugin.cache] (redis store only).
	cacheTOML string
	// dbTOML holds extra lines of [plugin.db] (postgres store only).
	dbTOML string
	proxy  bool // reach the store through a drills.Proxy
	// blackholed starts the App with the proxy already blackholed.
	blackholed bool
	opts       Opts
	// wrap, when set, wraps the guarded /payments route outside the middleware.
	wrap func(http.Handler) http.Handler
	// redis, when set, is the Redis of the redis store instead of the
	// machine's: a private server (drills.StartRedis) the test may pause.
	redis *drills.Redis
	// guarded, when set, adds the test's own routes behind the middleware.
	guarded func(g chi.Router)
}

// setup starts a service with the db or cache plugin and the idempotency
// plugin on a private table or key prefix, with a test clock and the routes:
//
//	POST /payments        guarded: one side effect, 201 {"payment_id": n} with Location
//	POST /orders/{id}     guarded: one side effect, 200
//	POST /flaky           guarded: 503 before acting when failFirst is set, else like /payments
//	POST /big             guarded: a 64-byte body
//	POST /too-many        guarded: 429
//	POST /panics          guarded: panics
//	POST /bad             guarded: 400 after counting
//
// and the routes setupOpts.guarded adds.
func setup(t testing.TB, o setupOpts) *bundle {
	t.Helper()
	b := &bundle{clock: jfasttest.NewClock(), store: o.store}
	target := sharedRedis
	switch {
	case o.store == StorePostgres:
		target = "127.0.0.1:5432"
	case o.redis != nil:
		target = o.redis.Addr()
	}
	addr := target
	if o.proxy {
		p, err := drills.StartProxy(target)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = p.Close() })
		b.proxy = p
		addr = p.Addr()
		if o.blackholed {
			if err := p.Blackhole(); err != nil {
				t.Fatal(err)
			}
		}
	}
	var toml strings.Builder
	toml.WriteString("[app]\nname = \"idemtest\"\n")
	env := map[string]string{}
	var plugins []framework.Plugin
	switch o.store {
	case StorePostgres:
		b.table = "idem_" + suffix()
		toml.WriteString("[plugins]\nenabled = [\"db\", \"idempotency\"]\n")
		if o.dbTOML != "" {
			fmt.Fprintf(&toml, "[plugin.db]\n%s\n", o.dbTOML)
		}
		fmt.Fprintf(&toml, "[plugin.idempotency]\nstore = \"postgres\"\ntable = %q\n", b.table)
		env["JFAST_DB_URL"] = testURL(addr)
		plugins = []framework.Plugin{db.New(), New()}
	case StoreRedis:
		b.prefix = fmt.Sprintf("jfasttest:idempotency:%s:%s:", strings.NewReplacer("/", "_", " ", "_").Replace(t.Name()), suffix())
		if o.redis == nil {
			t.Cleanup(func() { deletePrefix(t, b.prefix) })
		}
		toml.WriteString("[plugins]\nenabled = [\"cache\", \"idempotency\"]\n")
		if o.cacheTOML != "" {
			fmt.Fprintf(&toml, "[plugin.cache]\n%s\n", o.cacheTOML)
		}
		fmt.Fprintf(&toml, "[plugin.idempotency]\nstore = \"redis\"\nkey_prefix = %q\n", b.prefix)
		env["JFAST_CACHE_URL"] = "redis://" + addr + "/0"
		plugins = []framework.Plugin{cache.New(), New()}
	default:
		t.Fatalf("unknown store %q", o.store)
	}
	toml.WriteString(o.toml + "\n")
	b.svc = jfasttest.Start(t, jfasttest.Options{
		TOML:    toml.String(),
		Plugins: plugins,
		Env:     env,
		Clock:   b.clock,
		Routes:  b.routes(o),
	})
	if b.proxy != nil {
		// Let a blackholed proxy forward again before the App stops, so
		// closing the pools does not wait on it.
		t.Cleanup(func() { _ = b.proxy.Pass() })
	}
	return b
}

// routes adds setup's routes (see setup) to the service.
func (b *bundle) routes(o setupOpts) func(app *framework.App, r chi.Router) error {
	return func(app *framework.App, r chi.Router) error {
		idem, err := From(app)
		if err != nil {
			return err
		}
		b.idem = idem
		r = r.With(bearerFromHeader)
		g := r.With(idem.Middleware(o.opts))
		var payments http.Handler = framework.Handler(b.pay)
		if o.wrap != nil {
			payments = o.wrap(idem.Middleware(o.opts)(payments))
			r.Method(http.MethodPost, "/payments", payments)
		} else {
			g.Method(http.MethodPost, "/payments", payments)
		}
		g.Method(http.MethodPost, "/orders/{id}", framework.Handler(func(w http.ResponseWriter, r *http.Request) error {
			n := b.effects.Add(1)
			return framework.JSON(w, http.StatusOK, map[string]any{"order": chi.URLParam(r, "id"), "n": n})
		}))
		g.Method(http.MethodPost, "/flaky", framework.Handler(func(w http.ResponseWriter, r *http.Request) error {
			if b.failFirst.CompareAndSwap(true, false) {
				return &problem.DependencyError{Dependency: "ledger", Err: errors.New("ledger refused the connection")}
			}
			return b.pay(w, r)
		}))
		g.Method(http.MethodPost, "/big", framework.Handler(func(w http.ResponseWriter, r *http.Request) error {
			b.effects.Add(1)
			w.Header().Set("Content-Type", "text/plain")
			_, err := w.Write([]byte(strings.Repeat("x", 64)))
			return err
		}))
		g.Method(http.MethodPost, "/too-many", framework.Handler(func(w http.ResponseWriter, r *http.Request) error {
			b.effects.Add(1)
			w.WriteHeader(http.StatusTooManyRequests)
			return nil
		}))
		g.Method(http.MethodPost, "/panics", framework.Handler(func(w http.ResponseWriter, r *http.Request) error {
			b.effects.Add(1)
			panic("handler bug")
		}))
		g.Method(http.MethodPost, "/bad", framework.Handler(func(w http.ResponseWriter, r *http.Request) error {
			b.effects.Add(1)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			_, err := w.Write([]byte(`{"error":"amount must be positive"}`))
			return err
		}))
		if o.guarded != nil {
			o.guarded(g)
		}
		return nil
	}
}

// pay acts once (a side effect), then answers 201 with the payment's number.
func (b *bundle) pay(w http.ResponseWriter, r *http.Request) error {
	n := b.effects.Add(1)
	b.mu.Lock()
	gate, entered := b.gate, b.entered
	b.gate, b.entered = nil, nil
	b.mu.Unlock()
	if gate != nil {
		close(entered)
		select {
		case <-gate:
		case <-time.After(30 * time.Second):
		}
	}
	body, _ := io.ReadAll(r.Body)
	w.Header().Set("Location", fmt.Sprintf("/payments/%d", n))
	w.Header().Set("X-Not-Replayed", "secret-ish")
	return framework.JSON(w, http.StatusCreated, map[string]any{"payment_id": n, "echo": string(body)})
}

// hold makes the next /payments call block after acting until the returned
// release is called; entered is closed when it has acted.
func (b *bundle) hold() (entered <-chan struct{}, release func()) {
	gate, in := make(chan struct{}), make(chan struct{})
	b.mu.Lock()
	b.gate, b.entered = gate, in
	b.mu.Unlock()
	var once sync.Once
	return in, func() { once.Do(func() { close(gate) }) }
}

// settled waits until the first request with key, sent by post as
// testCaller, has written its response to the store or failed to: its
// client has the response before that.
func (b *bundle) settled(key string) {
	if done := b.idem.settling.of(callerKey(key)); done != nil {
		<-done
	}
}

// callerKey is the store key of key sent by post as testCaller.
func callerKey(key string) string {
	r := httptest.NewRequest(http.MethodPost, "/", nil)
	r = r.WithContext(framework.ContextWithBearerToken(r.Context(), testCaller))
	return storeKey(ScopeCaller, BearerSubject(r), key)
}

// bearerFromHeader records an Authorization: Bearer token in the context, as
// the auth plugin does after verifying it.
func bearerFromHeader(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
			r = r.WithContext(framework.ContextWithBearerToken(r.Context(), tok))
		}
		next.ServeHTTP(w, r)
	})
}

// testCaller is the bearer token post sends unless told otherwise.
const testCaller = "tester"

// post sends a POST with an Idempotency-Key (none when key is "-") as the
// caller testCaller (Authorization: Bearer tester), unless headers carry
// their own Authorization; an empty one sends none (an anonymous caller).
func (b *bundle) post(t testing.TB, path, key, body string, headers ...string) jfasttest.Response {
	t.Helper()
	auth := -1
	for i := 0; i+1 < len(headers); i += 2 {
		if http.CanonicalHeaderKey(headers[i]) == "Authorization" {
			auth = i
		}
	}
	switch {
	case auth < 0:
		headers = append([]string{"Authorization", "Bearer " + testCaller}, headers...)
	case headers[auth+1] == "":
		headers = append(headers[:auth:auth], headers[auth+2:]...)
	}
	if key != "-" {
		headers = append([]string{HeaderKey, key}, headers...)
	}
	return b.svc.Do(t, http.MethodPost, path, body, headers...)
}

func deletePrefix(t testing.TB, prefix string) {
	c := redis.NewClient(&redis.Options{Addr: sharedRedis})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	iter := c.Scan(ctx, 0, prefix+"*", 100).Iterator()
	var keys []string
	for iter.Next(ctx) {
		keys = append(keys, iter.Val())
	}
	if err := iter.Err(); err != nil {
		t.Logf("scan %s*: %v", prefix, err)
	}
	if len(keys) > 0 {
		if err := c.Del(ctx, keys...).Err(); err != nil {
			t.Logf("delete %s*: %v", prefix, err)
		}
	}
}

func forStores(t *testing.T, f func(t *testing.T, store string)) {
	for _, s := range stores {
		t.Run(s, func(t *testing.T) {
			t.Parallel()
			f(t, s)
		})
	}
}
