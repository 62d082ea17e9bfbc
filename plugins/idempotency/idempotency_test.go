package idempotency

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/jfasttest"
)

func decode(t testing.TB, resp jfasttest.Response) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(resp.Body, &m); err != nil {
		t.Fatalf("decode %q: %v", resp.Body, err)
	}
	return m
}

func wantProblem(t testing.TB, resp jfasttest.Response, status int) map[string]any {
	t.Helper()
	if resp.Status != status {
		t.Fatalf("status %d, want %d: %s", resp.Status, status, resp.Body)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/problem+json" {
		t.Fatalf("Content-Type %q, want application/problem+json", ct)
	}
	return decode(t, resp)
}

func TestReplayReturnsTheStoredResponse(t *testing.T) {
	t.Parallel()
	forStores(t, func(t *testing.T, store string) {
		b := setup(t, setupOpts{store: store})
		first := b.post(t, "/payments", "charge-1", `{"amount":10}`)
		if first.Status != http.StatusCreated {
			t.Fatalf("first: %d %s", first.Status, first.Body)
		}
		if first.Header.Get(HeaderReplayed) != "" {
			t.Fatalf("first response says it was replayed")
		}
		if echo := decode(t, first)["echo"]; echo != `{"amount":10}` {
			t.Fatalf("the handler read the body %q, want it unchanged", echo)
		}
		second := b.post(t, "/payments", "charge-1", `{"amount":10}`)
		if second.Status != http.StatusCreated || string(second.Body) != string(first.Body) {
			t.Fatalf("replay: %d %q, want 201 %q", second.Status, second.Body, first.Body)
		}
		if got := second.Header.Get(HeaderReplayed); got != "true" {
			t.Fatalf("%s = %q, want true", HeaderReplayed, got)
		}
		for _, h := range []string{"Location", "Content-Type"} {
			if second.Header.Get(h) != first.Header.Get(h) || first.Header.Get(h) == "" {
				t.Errorf("%s: replay %q, first %q", h, second.Header.Get(h), first.Header.Get(h))
			}
		}
		if got := second.Header.Get("X-Not-Replayed"); got != "" {
			t.Errorf("a header outside the allow-list was replayed: %q", got)
		}
		if second.Header.Get("X-Request-ID") == first.Header.Get("X-Request-ID") {
			t.Errorf("the replay carries the first request's X-Request-ID")
		}
		if n := b.effects.Load(); n != 1 {
			t.Fatalf("%d side effects, want 1", n)
		}
		// Another key is another operation.
		if third := b.post(t, "/payments", "charge-2", `{"amount":10}`); third.Status != http.StatusCreated || third.Header.Get(HeaderReplayed) != "" {
			t.Fatalf("new key: %d replayed=%q", third.Status, third.Header.Get(HeaderReplayed))
		}
		if n := b.effects.Load(); n != 2 {
			t.Fatalf("%d side effects, want 2", n)
		}
	})
}

func TestClientErrorsAreStoredToo(t *testing.T) {
	t.Parallel()
	forStores(t, func(t *testing.T, store string) {
		b := setup(t, setupOpts{store: store})
		first := b.post(t, "/bad", "k", `{}`)
		second := b.post(t, "/bad", "k", `{}`)
		if first.Status != 400 || second.Status != 400 || second.Header.Get(HeaderReplayed) != "true" || string(second.Body) != string(first.Body) {
			t.Fatalf("first %d %s, second %d %s replayed=%q", first.Status, first.Body, second.Status, second.Body, second.Header.Get(HeaderReplayed))
		}
		if n := b.effects.Load(); n != 1 {
			t.Fatalf("%d side effects, want 1", n)
		}
	})
}

func TestDifferentFingerprintIs422(t *testing.T) {
	t.Parallel()
	forStores(t, func(t *testing.T, store string) {
		b := setup(t, setupOpts{store: store})
		if r := b.post(t, "/orders/1", "k1", `{"a":1}`, "Authorization", "Bearer alice"); r.Status != 200 {
			t.Fatalf("first: %d %s", r.Status, r.Body)
		}
		cases := []struct {
			name, path, body, token string
		}{
			{"another body", "/orders/1", `{"a":2}`, "alice"},
			{"another route", "/payments", `{"a":1}`, "alice"},
		}
		for _, c := range cases {
			p := wantProblem(t, b.post(t, c.path, "k1", c.body, "Authorization", "Bearer "+c.token), http.StatusUnprocessableEntity)
			if !strings.Contains(fmt.Sprint(p["detail"]), "different request") {
				t.Errorf("%s: detail %q", c.name, p["detail"])
			}
		}
		// The path, not just the route template: the same key and body on
		// another order is another request, never order 1's stored answer.
		r := b.post(t, "/orders/2", "k1", `{"a":1}`, "Authorization", "Bearer alice")
		if r.Status != http.StatusUnprocessableEntity || r.Header.Get(HeaderReplayed) == "true" {
			t.Fatalf("same key on another order: %d replayed=%q %s", r.Status, r.Header.Get(HeaderReplayed), r.Body)
		}
		if n := b.effects.Load(); n != 1 {
			t.Fatalf("%d side effects, want 1", n)
		}
	})
}

func TestKeyValidation(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{store: StoreRedis})
	for name, key := range map[string]string{
		"empty":       "",
		"too long":    strings.Repeat("k", MaxKeyLength+1),
		"tab":         "a\tb",
		"not ascii":   "clé",
		"delete char": "a\x7fb",
	} {
		status, body := rawPost(t, b.svc.URL, "/payments", key)
		// net/http's server refuses a DEL byte itself, before any handler.
		if status != http.StatusBadRequest || (name != "delete char" && !strings.Contains(body, "Idempotency-Key")) {
			t.Errorf("%s: %d %s", name, status, body)
		}
	}
	req, _ := http.NewRequest(http.MethodPost, b.svc.URL+"/payments", strings.NewReader(`{}`))
	req.Close = true
	req.Header.Add(HeaderKey, "a")
	req.Header.Add(HeaderKey, "b")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("two keys: %d, want 400", resp.StatusCode)
	}
	if n := b.effects.Load(); n != 0 {
		t.Fatalf("%d side effects after refused keys, want 0", n)
	}
	for _, key := range []string{strings.Repeat("k", MaxKeyLength), "a b ~!{}", "1"} {
		if r := b.post(t, "/payments", key, `{}`); r.Status != http.StatusCreated {
			t.Fatalf("key %q: %d %s", key, r.Status, r.Body)
		}
	}
	// Without a key the route runs unguarded, every time.
	b.post(t, "/payments", "-", `{}`)
	b.post(t, "/payments", "-", `{}`)
	if n := b.effects.Load(); n != 5 {
		t.Fatalf("%d side effects, want 5", n)
	}
}

// rawPost sends a POST with an Idempotency-Key header written byte for byte
// (net/http's client refuses some of the values the server must refuse).
func rawPost(t testing.TB, baseURL, path, key string) (int, string) {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(baseURL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nConnection: close\r\n%s: %s\r\n\r\n{}", path, HeaderKey, key)
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

func TestRequireKey(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{store: StoreRedis, opts: Opts{RequireKey: true}})
	p := wantProblem(t, b.post(t, "/payments", "-", `{}`), http.StatusBadRequest)
	if !strings.Contains(fmt.Sprint(p["detail"]), "needs an Idempotency-Key") {
		t.Fatalf("detail %q", p["detail"])
	}
	if n := b.effects.Load(); n != 0 {
		t.Fatalf("%d side effects, want 0", n)
	}
}

func TestRequestBodyLimit(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{store: StoreRedis, toml: "max_request_body = 16"})
	wantProblem(t, b.post(t, "/payments", "k", strings.Repeat("x", 17)), http.StatusRequestEntityTooLarge)
	if r := b.post(t, "/payments", "k", strings.Repeat("x", 16)); r.Status != http.StatusCreated {
		t.Fatalf("16 bytes: %d %s", r.Status, r.Body)
	}
	if n := b.effects.Load(); n != 1 {
		t.Fatalf("%d side effects, want 1", n)
	}
}

// Fifty identical requests at once: the handler runs exactly once, the other
// 49 get 409 with Retry-After while it runs, and a later repeat the stored response.
func TestFiftyConcurrentRequestsRunOnce(t *testing.T) {
	t.Parallel()
	forStores(t, func(t *testing.T, store string) {
		// Generous store deadlines: on a loaded 2-core machine under -race, 50
		// requests at once can make a command wait past the 1s default, and
		// this test is about atomicity, not deadlines (see the outage test).
		b := setup(t, setupOpts{store: store, toml: `store_timeout = "15s"`, cacheTOML: `command_timeout = "10s"`})
		entered, release := b.hold()
		defer release()
		const n = 50
		var (
			wg        sync.WaitGroup
			mu        sync.Mutex
			statuses  = map[int]int{}
			answered  = make(chan struct{}, n)
			retryHdrs = map[string]int{}
		)
		for range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r := b.post(t, "/payments", "pay-50", `{"amount":50}`)
				mu.Lock()
				statuses[r.Status]++
				if r.Status == http.StatusConflict {
					retryHdrs[r.Header.Get("Retry-After")]++
				}
				mu.Unlock()
				answered <- struct{}{}
			}()
		}
		// The one that runs holds the key until the other 49 have been answered.
		select {
		case <-entered:
		case <-time.After(20 * time.Second):
			t.Fatal("no request reached the handler")
		}
		for i := range n - 1 {
			select {
			case <-answered:
			case <-time.After(20 * time.Second):
				t.Fatalf("only %d of %d repeats answered", i, n-1)
			}
		}
		release()
		wg.Wait()
		if statuses[http.StatusCreated] != 1 || statuses[http.StatusConflict] != n-1 {
			t.Fatalf("statuses %v, want one 201 and %d 409\nlogs:\n%s", statuses, n-1, b.svc.Logs())
		}
		if retryHdrs["1"] != n-1 {
			t.Fatalf("Retry-After of the 409s: %v, want \"1\" on all", retryHdrs)
		}
		if got := b.effects.Load(); got != 1 {
			t.Fatalf("the handler ran %d times, want 1", got)
		}
		r := b.post(t, "/payments", "pay-50", `{"amount":50}`)
		if r.Status != http.StatusCreated || r.Header.Get(HeaderReplayed) != "true" {
			t.Fatalf("after: %d replayed=%q", r.Status, r.Header.Get(HeaderReplayed))
		}
	})
}

// A first request that never finishes holds its key for the lease, measured on
// the App clock; after it, the key is taken over, and the late first request
// can no longer overwrite what the second stored.
func TestLeaseExpiryFreesAStuckKey(t *testing.T) {
	t.Parallel()
	forStores(t, func(t *testing.T, store string) {
		b := setup(t, setupOpts{store: store, toml: `lease = "2m"`})
		entered, release := b.hold()
		defer release()
		firstDone := make(chan jfasttest.Response, 1)
		go func() { firstDone <- b.post(t, "/payments", "stuck", `{}`) }()
		<-entered

		p := wantProblem(t, b.post(t, "/payments", "stuck", `{}`), http.StatusConflict)
		if !strings.Contains(fmt.Sprint(p["detail"]), "still being processed") {
			t.Fatalf("detail %q", p["detail"])
		}
		b.clock.Advance(2*time.Minute - time.Second)
		wantProblem(t, b.post(t, "/payments", "stuck", `{}`), http.StatusConflict)

		b.clock.Advance(time.Second) // the lease ends
		second := b.post(t, "/payments", "stuck", `{}`)
		if second.Status != http.StatusCreated || second.Header.Get(HeaderReplayed) != "" {
			t.Fatalf("after the lease: %d replayed=%q %s", second.Status, second.Header.Get(HeaderReplayed), second.Body)
		}
		if got := decode(t, second)["payment_id"]; got != float64(2) {
			t.Fatalf("payment_id %v, want 2", got)
		}

		release()
		first := <-firstDone
		if first.Status != http.StatusCreated {
			t.Fatalf("first: %d", first.Status)
		}
		third := b.post(t, "/payments", "stuck", `{}`)
		if third.Header.Get(HeaderReplayed) != "true" || string(third.Body) != string(second.Body) {
			t.Fatalf("replay %q (replayed=%q), want the second's %q", third.Body, third.Header.Get(HeaderReplayed), second.Body)
		}
		if !strings.Contains(b.svc.Logs(), "lease ran out") {
			t.Errorf("the late first request's lost response was not logged:\n%s", b.svc.Logs())
		}
		if n := b.effects.Load(); n != 2 {
			t.Fatalf("%d side effects, want 2", n)
		}
	})
}

// A key whose lease ended still belongs to its first request: another request
// with it gets 422 and does not run (the client reused a key), and only the
// same request takes it over.
func TestLeaseEndedKeyKeepsItsFingerprint(t *testing.T) {
	t.Parallel()
	forStores(t, func(t *testing.T, store string) {
		b := setup(t, setupOpts{store: store, toml: `lease = "2m"`})
		entered, release := b.hold()
		defer release()
		firstDone := make(chan jfasttest.Response, 1)
		go func() { firstDone <- b.post(t, "/payments", "t6", `{"amount":1}`) }()
		<-entered

		b.clock.Advance(2 * time.Minute) // the lease ends
		p := wantProblem(t, b.post(t, "/payments", "t6", `{"amount":2}`), http.StatusUnprocessableEntity)
		if !strings.Contains(fmt.Sprint(p["detail"]), "different request") {
			t.Fatalf("detail %q", p["detail"])
		}
		if n := b.effects.Load(); n != 1 {
			t.Fatalf("%d side effects after another request with the key, want 1", n)
		}
		if r := b.post(t, "/payments", "t6", `{"amount":1}`); r.Status != http.StatusCreated || r.Header.Get(HeaderReplayed) != "" {
			t.Fatalf("the same request after the lease: %d replayed=%q %s", r.Status, r.Header.Get(HeaderReplayed), r.Body)
		}
		wantProblem(t, b.post(t, "/payments", "t6", `{"amount":2}`), http.StatusUnprocessableEntity)
		release()
		<-firstDone
		if n := b.effects.Load(); n != 2 {
			t.Fatalf("%d side effects, want 2", n)
		}
		if got := counterValue(t, b.idem.metrics.requests.WithLabelValues(store, outcomeMismatch)); got != 2 {
			t.Errorf("mismatch: %v, want 2", got)
		}
	})
}

func TestTTLExpiry(t *testing.T) {
	t.Parallel()
	forStores(t, func(t *testing.T, store string) {
		b := setup(t, setupOpts{store: store, toml: `ttl = "1h"`})
		b.post(t, "/payments", "k", `{}`)
		b.settled("k") // the record's ttl counts from its write, after the answer
		b.clock.Advance(time.Hour - time.Second)
		if r := b.post(t, "/payments", "k", `{}`); r.Header.Get(HeaderReplayed) != "true" {
			t.Fatalf("before the ttl: %d replayed=%q", r.Status, r.Header.Get(HeaderReplayed))
		}
		b.clock.Advance(time.Second)
		if r := b.post(t, "/payments", "k", `{"other":"body"}`); r.Status != http.StatusCreated || r.Header.Get(HeaderReplayed) != "" {
			t.Fatalf("after the ttl: %d replayed=%q", r.Status, r.Header.Get(HeaderReplayed))
		}
		if n := b.effects.Load(); n != 2 {
			t.Fatalf("%d side effects, want 2", n)
		}
	})
}

// A 5xx or 429 first response is not stored: the key is released and a retry runs.
func TestServerErrorsReleaseTheKey(t *testing.T) {
	t.Parallel()
	forStores(t, func(t *testing.T, store string) {
		b := setup(t, setupOpts{store: store})
		b.failFirst.Store(true)
		wantProblem(t, b.post(t, "/flaky", "k", `{}`), http.StatusServiceUnavailable)
		r := b.post(t, "/flaky", "k", `{}`)
		if r.Status != http.StatusCreated || r.Header.Get(HeaderReplayed) != "" {
			t.Fatalf("retry: %d replayed=%q", r.Status, r.Header.Get(HeaderReplayed))
		}
		if r := b.post(t, "/flaky", "k", `{}`); r.Header.Get(HeaderReplayed) != "true" {
			t.Fatalf("third: %d replayed=%q", r.Status, r.Header.Get(HeaderReplayed))
		}

		for range 2 {
			if r := b.post(t, "/too-many", "t", `{}`); r.Status != http.StatusTooManyRequests || r.Header.Get(HeaderReplayed) != "" {
				t.Fatalf("429: %d replayed=%q", r.Status, r.Header.Get(HeaderReplayed))
			}
		}
		for range 2 {
			wantProblem(t, b.post(t, "/panics", "p", `{}`), http.StatusInternalServerError)
		}
		if n := b.effects.Load(); n != 5 {
			t.Fatalf("%d side effects, want 5 (1 payment, 2 × 429, 2 panics)", n)
		}
	})
}

// A response over max_response_body reaches the first client, is not kept,
// and the handler is not run again for that key.
func TestResponseTooLargeToKeep(t *testing.T) {
	t.Parallel()
	forStores(t, func(t *testing.T, store string) {
		b := setup(t, setupOpts{store: store, toml: "max_response_body = 63"})
		first := b.post(t, "/big", "k", `{}`)
		if first.Status != 200 || len(first.Body) != 64 {
			t.Fatalf("first: %d, %d bytes", first.Status, len(first.Body))
		}
		p := wantProblem(t, b.post(t, "/big", "k", `{}`), http.StatusConflict)
		if !strings.Contains(fmt.Sprint(p["detail"]), "too large to keep") {
			t.Fatalf("detail %q", p["detail"])
		}
		if n := b.effects.Load(); n != 1 {
			t.Fatalf("%d side effects, want 1", n)
		}
	})
}

func TestMiddlewareIsNotGlobal(t *testing.T) {
	t.Parallel()
	var p any = New()
	if _, ok := p.(framework.Middlewarer); ok {
		t.Fatal("the plugin would wrap every route")
	}
}

// With the default scope, each caller has its own keys: the same key, route
// and body from two callers are two operations, each replayed only to its own
// caller, and a caller cannot occupy a key another caller will use.
func TestCallersHaveTheirOwnKeys(t *testing.T) {
	t.Parallel()
	forStores(t, func(t *testing.T, store string) {
		b := setup(t, setupOpts{store: store})
		alice := b.post(t, "/payments", "charge-1", `{"amount":10}`, "Authorization", "Bearer alice")
		// Mallory sends Alice's key with Alice's body: she runs her own
		// operation and never sees Alice's response.
		mallory := b.post(t, "/payments", "charge-1", `{"amount":10}`, "Authorization", "Bearer mallory")
		if alice.Status != http.StatusCreated || mallory.Status != http.StatusCreated || mallory.Header.Get(HeaderReplayed) != "" {
			t.Fatalf("alice %d %s, mallory %d replayed=%q %s", alice.Status, alice.Body, mallory.Status, mallory.Header.Get(HeaderReplayed), mallory.Body)
		}
		if decode(t, alice)["payment_id"] == decode(t, mallory)["payment_id"] {
			t.Fatalf("mallory got alice's payment: %s", mallory.Body)
		}
		for token, first := range map[string]jfasttest.Response{"alice": alice, "mallory": mallory} {
			r := b.post(t, "/payments", "charge-1", `{"amount":10}`, "Authorization", "Bearer "+token)
			if r.Header.Get(HeaderReplayed) != "true" || string(r.Body) != string(first.Body) {
				t.Fatalf("%s's retry: %d replayed=%q %s, want its own %s", token, r.Status, r.Header.Get(HeaderReplayed), r.Body, first.Body)
			}
		}
		// Squatting: mallory takes a key first, with another body; alice's
		// later request with that key runs (no 422, no 409).
		b.post(t, "/payments", "charge-2", `{"amount":1}`, "Authorization", "Bearer mallory")
		if r := b.post(t, "/payments", "charge-2", `{"amount":99}`, "Authorization", "Bearer alice"); r.Status != http.StatusCreated || r.Header.Get(HeaderReplayed) != "" {
			t.Fatalf("alice after mallory took her key: %d replayed=%q %s", r.Status, r.Header.Get(HeaderReplayed), r.Body)
		}
		if n := b.effects.Load(); n != 4 {
			t.Fatalf("%d side effects, want 4", n)
		}
	})
}

// Callers without a subject (no bearer token) on a route that keeps keys per
// caller: two of them, same key, same body. Neither runs and neither gets the
// other's response; the service says it cannot tell them apart, and logs the fix.
func TestNoSubjectIsRefused(t *testing.T) {
	t.Parallel()
	forStores(t, func(t *testing.T, store string) {
		b := setup(t, setupOpts{store: store})
		for i := range 2 {
			p := wantProblem(t, b.post(t, "/payments", "charge-1", `{"amount":10}`, "Authorization", ""), http.StatusInternalServerError)
			if !strings.Contains(fmt.Sprint(p["detail"]), "could not tell who is calling") {
				t.Fatalf("anonymous caller %d: detail %q", i+1, p["detail"])
			}
		}
		if n := b.effects.Load(); n != 0 {
			t.Fatalf("%d side effects, want 0", n)
		}
		logs := b.svc.Logs()
		if strings.Count(logs, "no caller subject") != 1 || !strings.Contains(logs, "Opts.Subject") {
			t.Errorf("want one ERROR naming the fix:\n%s", logs)
		}
		if got := counterValue(t, b.idem.metrics.requests.WithLabelValues(store, outcomeNoSubject)); got != 2 {
			t.Errorf("no_subject: %v, want 2", got)
		}
		// Without a key the route runs unguarded, as before.
		if r := b.post(t, "/payments", "-", `{}`, "Authorization", ""); r.Status != http.StatusCreated {
			t.Fatalf("no key: %d %s", r.Status, r.Body)
		}
		// The service was told at boot that nothing identifies callers.
		if !strings.Contains(logs, "the auth plugin is not enabled") {
			t.Errorf("no boot warning:\n%s", logs)
		}
	})
}

// scope = "global" (or Opts.Scope) opts a route into one key space for every
// caller: anonymous callers are served, and share their keys — the documented
// price of the opt-in.
func TestGlobalScope(t *testing.T) {
	t.Parallel()
	for name, o := range map[string]setupOpts{
		"config": {store: StoreRedis, toml: `scope = "global"`},
		"opts":   {store: StoreRedis, opts: Opts{Scope: ScopeGlobal}},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, o)
			first := b.post(t, "/payments", "webhook-1", `{"event":1}`, "Authorization", "")
			if first.Status != http.StatusCreated {
				t.Fatalf("anonymous: %d %s", first.Status, first.Body)
			}
			if r := b.post(t, "/payments", "webhook-1", `{"event":1}`, "Authorization", ""); r.Header.Get(HeaderReplayed) != "true" || string(r.Body) != string(first.Body) {
				t.Fatalf("same key, same body: %d replayed=%q", r.Status, r.Header.Get(HeaderReplayed))
			}
			wantProblem(t, b.post(t, "/payments", "webhook-1", `{"event":2}`, "Authorization", ""), http.StatusUnprocessableEntity)
			// The subject still goes into the fingerprint: a caller with a
			// token is another request for the same key.
			wantProblem(t, b.post(t, "/payments", "webhook-1", `{"event":1}`), http.StatusUnprocessableEntity)
			if n := b.effects.Load(); n != 1 {
				t.Fatalf("%d side effects, want 1", n)
			}
		})
	}
	// A per-route caller scope wins over a global plugin scope.
	b := setup(t, setupOpts{store: StoreRedis, toml: `scope = "global"`, opts: Opts{Scope: ScopeCaller}})
	wantProblem(t, b.post(t, "/payments", "k", `{}`, "Authorization", ""), http.StatusInternalServerError)
}

func TestUnknownOptsScopePanicsAtBoot(t *testing.T) {
	t.Parallel()
	defer func() {
		if v := recover(); v == nil || !strings.Contains(fmt.Sprint(v), `Opts.Scope must be "caller" or "global"`) {
			t.Fatalf("recovered %v", v)
		}
	}()
	New().Middleware(Opts{Scope: "tenant"})
}

func TestCustomSubject(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{store: StorePostgres, opts: Opts{Subject: func(r *http.Request) string { return r.Header.Get("X-User") }}})
	if r := b.post(t, "/payments", "k", `{}`, "X-User", "ada", "Authorization", "Bearer t1"); r.Status != http.StatusCreated {
		t.Fatalf("first: %d", r.Status)
	}
	// Another token, same subject: replayed.
	if r := b.post(t, "/payments", "k", `{}`, "X-User", "ada", "Authorization", "Bearer t2"); r.Header.Get(HeaderReplayed) != "true" {
		t.Fatalf("same subject: %d replayed=%q", r.Status, r.Header.Get(HeaderReplayed))
	}
	// Another subject has its own key space; no subject is refused.
	if r := b.post(t, "/payments", "k", `{}`, "X-User", "bob"); r.Status != http.StatusCreated || r.Header.Get(HeaderReplayed) != "" {
		t.Fatalf("another subject: %d replayed=%q", r.Status, r.Header.Get(HeaderReplayed))
	}
	wantProblem(t, b.post(t, "/payments", "k", `{}`), http.StatusInternalServerError)
	if n := b.effects.Load(); n != 2 {
		t.Fatalf("%d side effects, want 2", n)
	}
}
