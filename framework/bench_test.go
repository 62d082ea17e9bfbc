package framework_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/jfastframework/jfast/framework"
)

// The benchmarks compare a hello route through jfast's whole middleware stack
// (request ID, recovery, deadline, access log, metrics) with the same handler on
// bare chi, in the same run. docs/performance.md keeps the ratios.

var helloBody = []byte(`{"message":"hello, world"}` + "\n")

func hello(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Write(helloBody)
}

func bareChi() http.Handler {
	r := chi.NewRouter()
	r.Get("/hello", hello)
	return r
}

func jfastApp(b testing.TB) *framework.App {
	app, err := framework.New(framework.Options{
		ConfigText: "[app]\nlisten = \"127.0.0.1:0\"\n",
		Environ:    []string{},
		LogOutput:  io.Discard,
		Routes: func(_ *framework.App, r chi.Router) error {
			r.Get("/hello", hello)
			return nil
		},
	})
	if err != nil {
		b.Fatal(err)
	}
	if err := app.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { app.Stop(context.Background()) })
	return app
}

// BenchmarkStack serves in-process (no socket): the middleware's own cost.
func BenchmarkStack(b *testing.B) {
	run := func(b *testing.B, h http.Handler) {
		req := httptest.NewRequest(http.MethodGet, "/hello", nil)
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				w := httptest.NewRecorder()
				h.ServeHTTP(w, req)
				if w.Code != http.StatusOK {
					b.Fatalf("status %d", w.Code)
				}
			}
		})
	}
	b.Run("bare-chi", func(b *testing.B) { run(b, bareChi()) })
	b.Run("jfast", func(b *testing.B) { run(b, jfastApp(b).Router()) })
}

// TestStackAllocations holds the stack to its allocation budget: at most 4
// allocations per request beyond bare chi's (docs/performance.md). Allocation
// counts are exact, unlike times, so this is a test; `make test` runs it without
// the race detector, whose instrumentation allocates.
func TestStackAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector's instrumentation allocates; make test runs this without -race")
	}
	count := func(h http.Handler) float64 {
		req := httptest.NewRequest(http.MethodGet, "/hello", nil)
		return testing.AllocsPerRun(200, func() {
			w := httptest.NewRecorder()
			h.ServeHTTP(w, req)
			if w.Code != http.StatusOK {
				t.Fatalf("status %d", w.Code)
			}
		})
	}
	bare := count(bareChi())
	stack := count(jfastApp(t).Router())
	t.Logf("allocations per request: bare chi %.0f, jfast %.0f (+%.0f)", bare, stack, stack-bare)
	if stack-bare > 4 {
		t.Fatalf("the stack allocates %.0f times per request beyond bare chi's %.0f; the budget is 4", stack-bare, bare)
	}
}

// BenchmarkLoopback serves over real loopback sockets with keep-alive: the
// throughput a client sees.
func BenchmarkLoopback(b *testing.B) {
	run := func(b *testing.B, url string) {
		tr := &http.Transport{MaxIdleConnsPerHost: 64}
		defer tr.CloseIdleConnections()
		client := &http.Client{Transport: tr}
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				resp, err := client.Get(url + "/hello")
				if err != nil {
					b.Fatal(err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					b.Fatalf("status %d", resp.StatusCode)
				}
			}
		})
	}
	b.Run("bare-chi", func(b *testing.B) {
		srv := httptest.NewServer(bareChi())
		defer srv.Close()
		run(b, srv.URL)
	})
	b.Run("jfast", func(b *testing.B) {
		run(b, "http://"+jfastApp(b).Addr())
	})
}

// BenchmarkInterleaved alternates one bare-chi request and one jfast request per
// iteration (swapping which goes first) and reports the median time of each side
// and their ratio: on a shared machine, two benchmarks run one after the other see
// different loads, while interleaved medians move together.
func BenchmarkInterleaved(b *testing.B) {
	app := jfastApp(b)
	bareSrv := httptest.NewServer(bareChi())
	defer bareSrv.Close()

	inProcess := func(h http.Handler) func() {
		req := httptest.NewRequest(http.MethodGet, "/hello", nil)
		return func() { h.ServeHTTP(httptest.NewRecorder(), req) }
	}
	loopback := func(url string) (func(), func()) {
		tr := &http.Transport{MaxIdleConnsPerHost: 4}
		client := &http.Client{Transport: tr}
		return func() {
			resp, err := client.Get(url + "/hello")
			if err != nil {
				b.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}, tr.CloseIdleConnections
	}
	run := func(b *testing.B, bare, stack func()) {
		bareD := make([]time.Duration, 0, b.N)
		stackD := make([]time.Duration, 0, b.N)
		for i := 0; i < b.N; i++ {
			first, second, fd, sd := bare, stack, &bareD, &stackD
			if i%2 == 1 {
				first, second, fd, sd = stack, bare, &stackD, &bareD
			}
			t0 := time.Now()
			first()
			t1 := time.Now()
			second()
			t2 := time.Now()
			*fd = append(*fd, t1.Sub(t0))
			*sd = append(*sd, t2.Sub(t1))
		}
		mb, ms := median(bareD), median(stackD)
		b.ReportMetric(float64(mb.Nanoseconds()), "bare-ns/req")
		b.ReportMetric(float64(ms.Nanoseconds()), "jfast-ns/req")
		b.ReportMetric(float64(ms)/float64(mb), "ratio")
		b.ReportMetric(throughputCost(mb, ms), "cost-%")
	}
	b.Run("in-process", func(b *testing.B) {
		run(b, inProcess(bareChi()), inProcess(app.Router()))
	})
	b.Run("loopback", func(b *testing.B) {
		bare, closeBare := loopback(bareSrv.URL)
		defer closeBare()
		stack, closeStack := loopback("http://" + app.Addr())
		defer closeStack()
		run(b, bare, stack)
	})
	// Saturated: each iteration sends a batch of requests from 8 concurrent
	// clients to each side, alternating which goes first; the medians of the
	// batch times give requests per second at full load, where the loopback
	// case above gives one request's latency.
	b.Run("saturated", func(b *testing.B) {
		const clients, batch = 8, 1000
		burst := func(url string) (func() time.Duration, func()) {
			tr := &http.Transport{MaxIdleConnsPerHost: clients}
			client := &http.Client{Transport: tr}
			return func() time.Duration {
				var next atomic.Int64
				var wg sync.WaitGroup
				t0 := time.Now()
				for range clients {
					wg.Go(func() {
						for next.Add(1) <= batch {
							resp, err := client.Get(url + "/hello")
							if err != nil {
								b.Error(err)
								return
							}
							io.Copy(io.Discard, resp.Body)
							resp.Body.Close()
						}
					})
				}
				wg.Wait()
				return time.Since(t0)
			}, tr.CloseIdleConnections
		}
		bare, closeBare := burst(bareSrv.URL)
		defer closeBare()
		stack, closeStack := burst("http://" + app.Addr())
		defer closeStack()
		var bareD, stackD []time.Duration
		for i := 0; i < b.N; i++ {
			if i%2 == 0 {
				bareD = append(bareD, bare())
				stackD = append(stackD, stack())
			} else {
				stackD = append(stackD, stack())
				bareD = append(bareD, bare())
			}
		}
		mb, ms := median(bareD), median(stackD)
		b.ReportMetric(float64(batch)/mb.Seconds(), "bare-req/s")
		b.ReportMetric(float64(batch)/ms.Seconds(), "jfast-req/s")
		b.ReportMetric(float64(ms)/float64(mb), "ratio")
		b.ReportMetric(throughputCost(mb, ms), "cost-%")
	})
}

// throughputCost is the share of bare chi's throughput the stack costs, in
// percent, from the time per request (or per batch) of each: serving at
// bare/stack of bare chi's rate costs 1 - bare/stack of it.
func throughputCost(bare, stack time.Duration) float64 {
	return 100 * (1 - float64(bare)/float64(stack))
}

func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}
