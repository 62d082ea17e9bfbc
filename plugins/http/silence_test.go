package http_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/jfasttest"
	jhttp "github.com/jfastframework/jfast/plugins/http"
)

// A handler that calls a hung upstream twice in one request pays one bound,
// not two: the first call's hang opens the breaker (nothing answered since
// it was sent), so the second is refused at once with a 503 naming the
// upstream, and never reaches it. Two bounds, each the only one of its
// case: the call's timeout (attempts within it), and a read_timeout shorter
// than timeout, where the first call's retries would each pay the read gap
// again and the silence rule stops them.
func TestHungUpstreamTwoCallsOneBound(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		keys  string
		bound time.Duration
	}{
		{name: "timeout", keys: "timeout = \"600ms\"\n", bound: 600 * time.Millisecond},
		{name: "read_timeout", keys: "read_timeout = \"600ms\"\ntimeout = \"10s\"\n", bound: 600 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			addr, accepted := jfasttest.CountingSilentServer(t) // accepts and never answers
			base := "http://" + addr
			firstErr := make(chan error, 1)
			svc := jfasttest.Start(t, jfasttest.Options{
				TOML:    "[plugins]\nenabled = [\"http\"]\n[plugin.http.upstreams.billing]\nbase_url = \"" + base + "\"\n" + tc.keys,
				Plugins: []framework.Plugin{jhttp.New()},
				Routes: func(app *framework.App, r chi.Router) error {
					billing, err := jhttp.Client(app, "billing")
					if err != nil {
						return err
					}
					r.Method(http.MethodGet, "/checkout", framework.Handler(func(w http.ResponseWriter, r *http.Request) error {
						_, err := billing.Get(r.Context(), "/invoices")
						firstErr <- err
						_, err = billing.Get(r.Context(), "/customers")
						return err
					}))
					return nil
				},
			})
			start := time.Now()
			res := svc.Get(t, "/checkout")
			took := time.Since(start)
			first := <-firstErr
			var to *jhttp.UpstreamTimeout
			if !errors.As(first, &to) {
				t.Fatalf("the first call: %v (%T), want UpstreamTimeout", first, first)
			}
			var body map[string]any
			if res.Status != http.StatusServiceUnavailable || json.Unmarshal(res.Body, &body) != nil || body["upstream"] != "billing" {
				t.Fatalf("the second call: %d %s, want a 503 naming billing", res.Status, res.Body)
			}
			if got := accepted.Load(); got != 1 {
				t.Errorf("the upstream accepted %d connections, want 1: one attempt of one call", got)
			}
			// One bound paid, the refusal at once: less than two bounds.
			if took < tc.bound || took >= 2*tc.bound {
				t.Errorf("the request took %s, want one bound (%s) and less than two", took, tc.bound)
			}
		})
	}
}
