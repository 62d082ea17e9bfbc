package scenarios_test

import (
	"fmt"
	"net/http"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jfastframework/jfast/drills"
	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/jfasttest"
	jhttp "github.com/jfastframework/jfast/plugins/http"
)

// Hedging drill: the upstream billing has two replicas, one of them slow
// (every chunk through its fault proxy delayed by slowReplica). Without
// hedging about half the requests wait for it; with hedge_after they are
// answered by the other replica hedge_after later.
const (
	slowReplica   = 600 * time.Millisecond
	drillHedge    = 50 * time.Millisecond
	hedgeRequests = 20
	// hedgeMargin is what a fast answer may take on a busy machine after
	// the hedge starts; hedge_after plus it stays under slowReplica.
	hedgeMargin = 400 * time.Millisecond
)

// hedgeService starts an App whose upstream billing has the instances fast
// and slow, with hedge_after when hedge is set.
func hedgeService(t *testing.T, fast, slow string, hedge bool) *jfasttest.Service {
	t.Helper()
	toml := `[app]
name = "drill"
[plugins]
enabled = ["http"]
[plugin.http.upstreams.billing]
base_url = "http://billing.internal"
instances = ["http://` + fast + `", "http://` + slow + `"]
timeout = "3s"
attempts = 2
breaker_cool_down = "` + coolDown + `"
`
	if hedge {
		// Half the calls meet the slow replica first and need a hedge: more
		// than the default retry budget (0.2 of the calls) grants. With
		// ratio 1 every call's one hedge fits: the call is counted before
		// its hedge asks, so the hedges of n calls (at most n-1 before the
		// n-th asks) stay below the n calls. At 0.8 a run of five calls
		// meeting the slow replica first was refused its fifth hedge.
		toml += `hedge_after = "` + drillHedge.String() + `"` + "\nretry_budget_ratio = 1\n"
	}
	return jfasttest.Start(t, jfasttest.Options{
		TOML:    toml,
		Plugins: []framework.Plugin{jhttp.New()},
		Routes:  upstreamRoute,
	})
}

// TestDrillHedgeSlowReplica: with one replica of two slow, hedging answers
// every request well before the slow replica could (hedge_after plus a
// fast answer, within the margin), while without it some requests wait for
// the slow one. The fast replica counts what it received: with hedging,
// every request's answer came from it.
func TestDrillHedgeSlowReplica(t *testing.T) {
	var fastHits atomic.Int64
	fast := httpUpstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fastHits.Add(1)
		paid(w, r)
	}))
	proxy, err := drills.StartProxy(httpUpstream(t, http.HandlerFunc(paid)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { proxy.Close() })
	if err := proxy.Latency(slowReplica); err != nil {
		t.Fatal(err)
	}
	measure := func(hedge bool) []time.Duration {
		svc := hedgeService(t, fast, proxy.Addr(), hedge)
		lat := make([]time.Duration, hedgeRequests)
		for i := range lat {
			start := time.Now()
			resp := svc.Do(t, http.MethodGet, "/upstream", "")
			lat[i] = time.Since(start)
			if resp.Status != http.StatusOK {
				t.Fatalf("hedge %v: request %d: %d %s", hedge, i, resp.Status, resp.Body)
			}
		}
		slices.Sort(lat)
		return lat
	}
	res := drills.Result{Dependency: "upstream (2 replicas)", Fault: fmt.Sprintf("one replica %s slow (proxy); hedge_after %s", slowReplica, drillHedge), Status: http.StatusOK}
	defer func() { record(res) }()
	without := measure(false)
	fastHits.Store(0)
	with := measure(true)
	// In the table: "paid" and "slowest" are the requests without hedging
	// that waited for the slow replica; "answered fast" is with hedging.
	for _, d := range without {
		if d >= slowReplica {
			res.Paid++
		}
	}
	res.Slowest, res.AnsweredP50, res.AnsweredMax = without[len(without)-1], with[len(with)/2], with[len(with)-1]
	t.Logf("one replica of two %s slow, %d requests: without hedging p50 %s max %s; with hedge_after %s p50 %s max %s; the fast replica received %d",
		slowReplica, hedgeRequests, without[len(without)/2], without[len(without)-1], drillHedge, with[len(with)/2], with[len(with)-1], fastHits.Load())
	if without[len(without)-1] < slowReplica {
		res.Err = fmt.Errorf("without hedging no request waited for the slow replica (max %s): the drill shows nothing", without[len(without)-1])
		t.Error(res.Err)
	}
	// The bound: hedge_after, then a fast answer within hedgeMargin; under
	// the slow replica's delay.
	if bound := drillHedge + hedgeMargin; with[len(with)-1] >= bound || bound >= slowReplica {
		res.Err = fmt.Errorf("with hedging the slowest request took %s, want under %s (the slow replica takes %s)", with[len(with)-1], bound, slowReplica)
		t.Error(res.Err)
	}
	if fastHits.Load() < hedgeRequests {
		res.Err = fmt.Errorf("the fast replica received %d requests for %d calls, want every answer from it", fastHits.Load(), hedgeRequests)
		t.Error(res.Err)
	}
}
