// Package hedge measures hedging against a slow tail: an upstream where 5 %
// of the responses take 10× the median, called with no hedging, with
// jfast's hedge_after (a fixed delay and a percentile) and with
// failsafe-go's hedge policy, in one run with the arms interleaved
// (docs/performance.md, "Hedging").
package hedge

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/failsafe-go/failsafe-go/failsafehttp"
	"github.com/failsafe-go/failsafe-go/hedgepolicy"

	jhttp "github.com/jfastframework/jfast/plugins/http"
)

const (
	median   = 5 * time.Millisecond
	slow     = 10 * median // the tail: 10× the median
	slowRate = 0.05        // 5 % of responses
	delay    = 2 * median  // the fixed hedge delay of both libraries
	workers  = 8           // calls in flight
	rounds   = 4           // each arm runs once per round, arms interleaved
	perRound = 500         // calls per arm and round
)

// upstream answers after median, or slow for slowRate of the requests (a
// seeded draw), and counts what it receives.
type upstream struct {
	*httptest.Server
	hits atomic.Int64
	mu   sync.Mutex
	rnd  *rand.Rand
}

func newUpstream() *upstream {
	u := &upstream{rnd: rand.New(rand.NewPCG(7, 36))}
	u.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.hits.Add(1)
		u.mu.Lock()
		d := median
		if u.rnd.Float64() < slowRate {
			d = slow
		}
		u.mu.Unlock()
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
			_, _ = io.WriteString(w, "ok")
		case <-r.Context().Done():
		}
	}))
	return u
}

// arm is one way of calling: get makes one GET and reads its body.
type arm struct {
	name  string
	get   func(ctx context.Context, url string) error
	lat   []time.Duration
	calls int64
	hits  int64
}

func jfastArm(name, base, hedgeAfter string) *arm {
	u := jhttp.Upstream{Name: "tail", BaseURL: base}
	u.HedgeAfter = hedgeAfter
	u.MaxConcurrent = 2 * workers
	c, err := jhttp.NewClient(u)
	if err != nil {
		panic(err)
	}
	return &arm{name: name, get: func(ctx context.Context, _ string) error {
		resp, err := c.Get(ctx, "/")
		if err != nil {
			return err
		}
		return resp.Body.Close()
	}}
}

func failsafeArm(name string) *arm {
	// The first answer wins, as in jfast: without CancelIf failsafe-go
	// waits for every attempt and returns the last.
	hp := hedgepolicy.NewBuilderWithDelay[*http.Response](delay).WithMaxHedges(1).
		CancelIf(func(_ *http.Response, err error) bool { return err == nil }).Build()
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 2 * workers
	client := &http.Client{Transport: failsafehttp.NewRoundTripper(tr, hp)}
	return clientArm(name, client)
}

func plainArm(name string) *arm {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 2 * workers
	client := &http.Client{Transport: tr}
	return clientArm(name, client)
}

// clientArm calls through client, reading each body whole.
func clientArm(name string, client *http.Client) *arm {
	return &arm{name: name, get: func(ctx context.Context, url string) error {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		return resp.Body.Close()
	}}
}

// run makes n calls of a on workers goroutines against u, recording each
// call's latency and what u received.
func (a *arm) run(u *upstream, n int) error {
	before := u.hits.Load()
	var next atomic.Int64
	lat := make([]time.Duration, n)
	errs := make(chan error, workers)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				i := next.Add(1) - 1
				if i >= int64(n) {
					return
				}
				start := time.Now()
				if err := a.get(context.Background(), u.URL); err != nil {
					errs <- err
					return
				}
				lat[i] = time.Since(start)
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return fmt.Errorf("%s: %w", a.name, err)
	}
	a.lat = append(a.lat, lat...)
	a.calls += int64(n)
	a.hits += u.hits.Load() - before
	return nil
}

func quantile(s []time.Duration, q float64) time.Duration {
	return s[min(int(float64(len(s))*q), len(s)-1)]
}

// BenchmarkHedgeTail runs the arms interleaved, rounds × perRound calls
// each, and reports per arm the p50 and p99 of a call and the upstream
// requests beyond one per call, as a share of the calls.
//
//	cd bench && go test -run '^$' -bench HedgeTail -benchtime 1x ./hedge/
func BenchmarkHedgeTail(b *testing.B) {
	u := newUpstream()
	defer u.Close()
	for range b.N {
		arms := []*arm{
			plainArm("none"),
			jfastArm("jfast-none", u.URL, ""),
			jfastArm("jfast-fixed", u.URL, delay.String()),
			jfastArm("jfast-p95", u.URL, "p95"),
			failsafeArm("failsafe"),
		}
		// Warm the connections and jfast-p95's latency history.
		for _, a := range arms {
			if err := a.run(u, 200); err != nil {
				b.Fatal(err)
			}
			a.lat, a.calls, a.hits = nil, 0, 0
		}
		for range rounds {
			for _, a := range arms {
				if err := a.run(u, perRound); err != nil {
					b.Fatal(err)
				}
			}
		}
		var tab strings.Builder
		fmt.Fprintf(&tab, "\n%-12s %8s %8s %8s\n", "arm", "p50 ms", "p99 ms", "extra %")
		for _, a := range arms {
			slices.Sort(a.lat)
			p50, p99 := quantile(a.lat, 0.50), quantile(a.lat, 0.99)
			extra := 100 * float64(a.hits-a.calls) / float64(a.calls)
			fmt.Fprintf(&tab, "%-12s %8.2f %8.2f %8.1f\n", a.name, ms(p50), ms(p99), extra)
			b.ReportMetric(ms(p99), a.name+"-p99-ms")
			b.ReportMetric(extra, a.name+"-extra-%")
		}
		b.Log(tab.String())
	}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
