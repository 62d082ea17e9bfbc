package idempotency

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/jfasttest"
	httpplugin "github.com/jfastframework/jfast/plugins/http"
	"github.com/jfastframework/jfast/problem"
)

// caller starts a second service with the http plugin, whose "payments"
// upstream is baseURL and receives the caller's bearer token
// (forward_authorization), and returns its client. Calls made with
// callerContext carry that token, which is the payment service's subject.
// Its clock advances by itself, so the client's backoff between attempts
// takes no time.
func caller(t *testing.T, baseURL string) *httpplugin.ServiceClient {
	t.Helper()
	clk := jfasttest.NewClock()
	clk.SetAutoAdvance(true)
	var client *httpplugin.ServiceClient
	jfasttest.Start(t, jfasttest.Options{
		TOML:    "[app]\nname = \"orders\"\n[plugins]\nenabled = [\"http\"]\n[plugin.http.upstreams.payments]\nattempts = 3\nforward_authorization = true\n",
		Plugins: []framework.Plugin{httpplugin.New()},
		Env:     map[string]string{"JFAST_HTTP_UPSTREAMS__PAYMENTS__BASE_URL": baseURL},
		Clock:   clk,
		Routes: func(app *framework.App, r chi.Router) error {
			c, err := httpplugin.Client(app, "payments")
			client = c
			return err
		},
	})
	return client
}

// callerContext is a context carrying the bearer token the caller's own
// auth would have verified, bounded by 10 s.
func callerContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return framework.ContextWithBearerToken(ctx, testCaller)
}

// loseFirstResponse stands for what can happen after a service acted: the
// handler ran and its 201 was stored, then the answer never reached the
// caller, who got a 503 instead (a gateway timing out, a connection cut after
// the commit). It wraps the guarded route outside the middleware.
func loseFirstResponse(calls *atomic.Int64) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if calls.Add(1) == 1 {
				next.ServeHTTP(httptest.NewRecorder(), r)
				problem.Write(w, r, problem.ServiceUnavailable("payments-gateway", "", 0))
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}

// The seed's payment case: the payment service acts, the caller gets 503, the
// http plugin retries the POST because it carries an Idempotency-Key, and the
// retry gets the stored result: one charge, and the caller has its payment id.
func TestHTTPClientRetryAfterTheServiceActed(t *testing.T) {
	t.Parallel()
	forStores(t, func(t *testing.T, store string) {
		var calls atomic.Int64
		b := setup(t, setupOpts{store: store, wrap: loseFirstResponse(&calls)})
		client := caller(t, b.svc.URL)

		ctx := callerContext(t)
		resp, err := client.Post(ctx, "/payments", map[string]any{"order_id": 42, "amount_minor": 1999},
			httpplugin.IdempotencyKey("charge-42"))
		if err != nil {
			t.Fatal(err)
		}
		body := httpplugin.BodyBytes(resp)
		if resp.StatusCode != http.StatusCreated || resp.Header.Get(HeaderReplayed) != "true" {
			t.Fatalf("%d replayed=%q %s", resp.StatusCode, resp.Header.Get(HeaderReplayed), body)
		}
		var got struct {
			PaymentID int `json:"payment_id"`
		}
		if err := json.Unmarshal(body, &got); err != nil || got.PaymentID != 1 {
			t.Fatalf("payment_id %d (%v) in %s, want 1", got.PaymentID, err, body)
		}
		if n := b.effects.Load(); n != 1 {
			t.Fatalf("%d charges, want 1", n)
		}
		if n := calls.Load(); n != 2 {
			t.Fatalf("the service saw %d requests, want 2 (the first and one retry)", n)
		}

		// Without a key the same 503 is not retried: one request, one charge,
		// and the caller gets the 503.
		calls.Store(0)
		resp, err = client.Post(ctx, "/payments", map[string]any{"order_id": 43})
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != http.StatusServiceUnavailable || calls.Load() != 1 || b.effects.Load() != 2 {
			t.Fatalf("without a key: %d, %d requests, %d charges", resp.StatusCode, calls.Load(), b.effects.Load())
		}
	})
}

// The other order: the handler fails with 503 before acting (its own
// dependency is down). Nothing is stored, the key is released, and the
// client's retry runs the handler: one charge, a fresh 201.
func TestHTTPClientRetryAfterTheServiceFailedFirst(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{store: StorePostgres})
	b.failFirst.Store(true)
	client := caller(t, b.svc.URL)
	resp, err := client.Post(callerContext(t), "/flaky", map[string]any{"order_id": 7}, httpplugin.IdempotencyKey("charge-7"))
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusCreated || resp.Header.Get(HeaderReplayed) != "" {
		t.Fatalf("%d replayed=%q %s", resp.StatusCode, resp.Header.Get(HeaderReplayed), httpplugin.BodyBytes(resp))
	}
	if n := b.effects.Load(); n != 1 {
		t.Fatalf("%d charges, want 1", n)
	}
}
