package gateway_test

import (
	"io"
	"net/http"
	"testing"
)

// A route inherits its upstream's instances: with one of two replicas gone
// (its listener closed, as after kill -9), every proxied GET and keyed
// POST is answered by the other, each attempt that met the dead one retried
// there, until the dead one's breaker ejects it (breaker_failures, 5
// refused connections: 5 retries, within the bucket's 10).
func TestRouteOverInstances(t *testing.T) {
	t.Parallel()
	echo := func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		_, _ = w.Write(b)
	}
	live := newUpstream(t, echo)
	dead := newUpstream(t, echo)
	dead.Close()
	svc := gatewayService(t, `[plugin.http.upstreams.orders]
base_url = "http://orders-instances:8000"
instances = ["`+live.URL+`", "`+dead.URL+`"]
backoff_base = "1ms"
backoff_max = "1ms"
retry_budget = "bucket"        # 10 retries at hand from the first call: a quiet test has no traffic to earn them
[plugin.gateway.routes.orders]
prefix = "/api/orders"
upstream = "orders"
rewrite_prefix = "/orders"
`)
	for i := range 40 {
		if res := svc.Get(t, "/api/orders/7"); res.Status != 200 {
			t.Fatalf("GET %d: %d %s", i, res.Status, res.Body)
		}
		if res := svc.Do(t, http.MethodPost, "/api/orders", `{"qty":1}`, "Idempotency-Key", "k"); res.Status != 200 || string(res.Body) != `{"qty":1}` {
			t.Fatalf("POST %d: %d %s", i, res.Status, res.Body)
		}
	}
	if got := live.hits.Load(); got != 80 {
		t.Fatalf("the live replica answered %d of 80", got)
	}
	if r := live.last.Load(); r.Host != "orders-instances:8000" || r.URL.Path != "/orders" {
		t.Fatalf("the replica was asked for %s%s", r.Host, r.URL.Path)
	}
}
