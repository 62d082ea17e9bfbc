package http_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jfastframework/jfast/framework/resilience"
	jhttp "github.com/jfastframework/jfast/plugins/http"
)

// An upstream that refuses every request for load (503), with throttle on:
// the client drops calls locally, as a 503 problem naming the upstream,
// counted by outcome="throttled", and the upstream receives only the rest.
// Without the throttle it receives every call.
func TestThrottleRefusesLocally(t *testing.T) {
	t.Parallel()
	const calls = 100
	noBreaker := resilience.BreakerConfig{BreakerFailures: 1000, BreakerMinimumCalls: 1000}
	for _, on := range []bool{true, false} {
		up := newUpstream(t, status(503))
		c, _, reg := newClient(t, jhttp.Upstream{BaseURL: up.URL, PolicyConfig: resilience.PolicyConfig{
			Attempts: 1, Throttle: on, BreakerConfig: noBreaker}})
		throttled := 0
		for range calls {
			resp, err := c.Get(context.Background(), "/stock")
			if err == nil {
				if resp.StatusCode != 503 {
					t.Fatalf("status %d, want the upstream's 503", resp.StatusCode)
				}
				continue
			}
			var th *jhttp.Throttled
			if !errors.As(err, &th) || !errors.Is(err, resilience.ErrThrottled) {
				t.Fatalf("error %v, want *Throttled", err)
			}
			if p := th.Problem(); p.Status != 503 || p.Extensions["dependency"] != "billing" || p.RetryAfter <= 0 {
				t.Fatalf("problem %+v, want a 503 naming billing with Retry-After", p)
			}
			throttled++
		}
		if got := metric(t, reg, "jfast_client_calls_total", "dependency", "billing", "outcome", "throttled"); int(got) != throttled {
			t.Errorf("throttle %v: outcome=throttled counts %v, want %d", on, got, throttled)
		}
		if hits := up.hits.Load(); int(hits) != calls-throttled {
			t.Errorf("throttle %v: the upstream received %d, want %d", on, hits, calls-throttled)
		}
		// With nothing accepted, call n is sent with probability 1/n: about
		// ln(100) ≈ 5 of the 100 reach the upstream.
		if on && throttled < calls/2 {
			t.Errorf("throttle on: %d of %d calls dropped locally, want most", throttled, calls)
		}
		if !on && throttled != 0 {
			t.Errorf("throttle off: %d calls dropped", throttled)
		}
	}
}
