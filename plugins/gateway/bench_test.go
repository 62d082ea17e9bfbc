package gateway_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
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
// the URLs to GET: direct, bare proxy, the same bare proxy as a route of a
// jfast App (the framework's middleware, no plugin), gateway.
func benchTargets(b *testing.B) (direct, bare, inApp, gw string) {
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
	app := jfasttest.Start(b, jfasttest.Options{
		TOML: "[app]\nlog_level = \"warn\"\n",
		Routes: func(_ *framework.App, r chi.Router) error {
			r.Handle("/orders/*", rp)
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
	return up.URL + "/orders/42", bareSrv.URL + "/orders/42", app.URL + "/orders/42", svc.URL + "/orders/42"
}

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
// jfast), with that bare proxy mounted as a route of a jfast App, and with
// the direct call, in one loop whose order rotates every
// iteration, so the machine's load hits all four alike. It reports the
// medians and the ratios; docs/performance.md has the figures.
//
//	go test -run '^$' -bench 'ProxyInterleaved' -benchtime 5000x -count 3 ./plugins/gateway/
func BenchmarkProxyInterleaved(b *testing.B) {
	urls := [4]string{}
	urls[0], urls[1], urls[2], urls[3] = benchTargets(b)
	c := benchClient(b)
	for _, u := range urls {
		getOnce(b, c, u) // connect every hop before measuring
	}
	var times [4][]time.Duration
	i := 0
	for b.Loop() {
		for k := range 4 {
			j := (i + k) % 4
			start := time.Now()
			getOnce(b, c, urls[j])
			times[j] = append(times[j], time.Since(start))
		}
		i++
	}
	var med [4]time.Duration
	for j := range times {
		slices.Sort(times[j])
		med[j] = times[j][len(times[j])/2]
	}
	b.ReportMetric(float64(med[0].Nanoseconds()), "direct-median-ns")
	b.ReportMetric(float64(med[1].Nanoseconds()), "bare-median-ns")
	b.ReportMetric(float64(med[2].Nanoseconds()), "bare-in-app-median-ns")
	b.ReportMetric(float64(med[3].Nanoseconds()), "gateway-median-ns")
	b.ReportMetric(float64(med[3])/float64(med[1]), "gateway/bare")
	b.ReportMetric(float64(med[3])/float64(med[2]), "gateway/bare-in-app")
	b.ReportMetric(float64(med[3])/float64(med[0]), "gateway/direct")
}

// BenchmarkProxy measures each path alone, for allocations per request
// (the whole process: client, proxy and upstream).
func BenchmarkProxy(b *testing.B) {
	direct, bare, inApp, gw := benchTargets(b)
	for _, t := range []struct{ name, url string }{{"direct", direct}, {"bare", bare}, {"bare-in-app", inApp}, {"gateway", gw}} {
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
