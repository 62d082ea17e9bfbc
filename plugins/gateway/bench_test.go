package gateway_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/jfasttest"
)

// benchTargets starts an upstream answering a small JSON body, a gateway
// App in front of it (the http plugin's defaults, one route), and a bare
// httputil.ReverseProxy in front of it over an http.Transport with the
// settings the http plugin gives an upstream by default (HTTP/1.1, no
// proxy, 50 connections per host, 50 idle, 90 s idle timeout). It returns
// the URLs to GET: direct, bare proxy, a bare proxy configured as
// net/http/httputil's documentation shows (SetXForwarded) with a pool of
// copy buffers, that careful proxy as a route of a jfast App (the
// framework's middleware, no plugin), gateway.
func benchTargets(b *testing.B) (direct, bare, pooled, inApp, gw string) {
	b.Helper()
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"id":42,"status":"paid"}`)
	}))
	b.Cleanup(up.Close)
	target, _ := url.Parse(up.URL)
	tr := &http.Transport{
		Proxy:               nil,
		MaxConnsPerHost:     50,
		MaxIdleConns:        50,
		MaxIdleConnsPerHost: 50,
		IdleConnTimeout:     90 * time.Second,
	}
	b.Cleanup(tr.CloseIdleConnections)
	rp := &httputil.ReverseProxy{Rewrite: func(pr *httputil.ProxyRequest) { pr.SetURL(target) }, Transport: tr}
	bareSrv := httptest.NewServer(rp)
	b.Cleanup(bareSrv.Close)
	// The bare proxy as a careful author writes it: X-Forwarded-* set, and a
	// pool of copy buffers, as the gateway has (without one a ReverseProxy
	// allocates 32 KiB per response).
	careful := &httputil.ReverseProxy{
		Rewrite:   func(pr *httputil.ProxyRequest) { pr.SetURL(target); pr.SetXForwarded() },
		Transport: tr, BufferPool: &benchBuffers{p: sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}},
	}
	pooledSrv := httptest.NewServer(careful)
	b.Cleanup(pooledSrv.Close)
	app := jfasttest.Start(b, jfasttest.Options{
		TOML: "[app]\nlog_level = \"warn\"\n",
		Routes: func(_ *framework.App, r chi.Router) error {
			r.Handle("/orders/*", careful)
			return nil
		},
	})
	svc := jfasttest.Start(b, jfasttest.Options{
		TOML: "[plugins]\nenabled = [\"http\", \"gateway\"]\n[app]\nlog_level = \"warn\"\n" + upstreamTOML("orders", up.URL) + `
[plugin.gateway.routes.orders]
prefix = "/orders"
upstream = "orders"
`,
		Plugins: gatewayPlugins(),
	})
	return up.URL + "/orders/42", bareSrv.URL + "/orders/42", pooledSrv.URL + "/orders/42", app.URL + "/orders/42", svc.URL + "/orders/42"
}

// benchBuffers is an httputil.BufferPool over a sync.Pool.
type benchBuffers struct{ p sync.Pool }

func (bb *benchBuffers) Get() []byte  { return *bb.p.Get().(*[]byte) }
func (bb *benchBuffers) Put(b []byte) { bb.p.Put(&b) }

// benchClient is the client every target is called with: keep-alive, one
// connection at a time.
func benchClient(b *testing.B) *http.Client {
	tr := &http.Transport{MaxIdleConnsPerHost: 10}
	b.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

func getOnce(b *testing.B, c *http.Client, u string) {
	resp, err := c.Get(u)
	if err != nil {
		b.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != 200 {
		b.Fatalf("GET %s: %d", u, resp.StatusCode)
	}
}

// BenchmarkProxyInterleaved compares one GET through the gateway with the
// same GET through a bare httputil.ReverseProxy (same transport settings, no
// jfast), through one written with care (X-Forwarded-* and a pool of copy
// buffers, as the gateway has), with that careful proxy mounted as a route
// of a jfast App, and with the direct call. Like the http plugin's
// BenchmarkInterleaved it runs them in rotating order, blocks of 50 calls
// each, and measures each block's wall time and the process's CPU time (client, proxy and upstream goroutines and
// the garbage collector's work alike), so load from other processes falls on
// all five alike and each pays for the garbage it makes. It reports CPU and
// wall time per call and their ratios, and the ratios of the medians of single
// calls' wall times (which leave out most of the collector's work: it runs in
// the background and stretches a few calls, not the median one);
// docs/performance.md has the figures.
//
//	go test -run '^$' -bench 'ProxyInterleaved' -benchtime 400x -count 4 ./plugins/gateway/
func BenchmarkProxyInterleaved(b *testing.B) {
	var urls [5]string
	urls[0], urls[1], urls[2], urls[3], urls[4] = benchTargets(b)
	names := [5]string{"direct", "bare", "bare-pooled", "pooled-in-app", "gateway"}
	const gw = 4
	c := benchClient(b)
	for _, u := range urls {
		getOnce(b, c, u) // connect every hop before measuring
	}
	const block = 50
	var wall, cpu [5]time.Duration
	var single [5][]time.Duration
	rounds := 0
	for b.Loop() {
		for k := range urls {
			j := (rounds + k) % len(urls)
			w0, c0 := time.Now(), processCPU()
			for range block {
				t0 := time.Now()
				getOnce(b, c, urls[j])
				single[j] = append(single[j], time.Since(t0))
			}
			cpu[j] += processCPU() - c0
			wall[j] += time.Since(w0)
		}
		rounds++
	}
	calls := float64(rounds * block)
	var median [5]time.Duration
	for j, n := range names {
		slices.Sort(single[j])
		median[j] = single[j][len(single[j])/2]
		b.ReportMetric(float64(cpu[j].Nanoseconds())/calls, n+"-cpu-ns/call")
		b.ReportMetric(float64(wall[j].Nanoseconds())/calls, n+"-wall-ns/call")
	}
	for _, base := range []int{1, 2, 3, 0} {
		b.ReportMetric(float64(cpu[gw])/float64(cpu[base]), "gateway/"+names[base]+"-cpu")
		b.ReportMetric(float64(wall[gw])/float64(wall[base]), "gateway/"+names[base]+"-wall")
		b.ReportMetric(float64(median[gw])/float64(median[base]), "gateway/"+names[base]+"-p50")
	}
}

// processCPU is the user and system CPU time of the whole process so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkProxy measures each path alone, for allocations per request
// (the whole process: client, proxy and upstream).
func BenchmarkProxy(b *testing.B) {
	direct, bare, pooled, inApp, gw := benchTargets(b)
	for _, t := range []struct{ name, url string }{{"direct", direct}, {"bare", bare}, {"bare-pooled", pooled}, {"pooled-in-app", inApp}, {"gateway", gw}} {
		b.Run(t.name, func(b *testing.B) {
			c := benchClient(b)
			getOnce(b, c, t.url)
			b.ReportAllocs()
			for b.Loop() {
				getOnce(b, c, t.url)
			}
		})
	}
}
