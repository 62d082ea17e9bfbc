package http

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"syscall"
	"testing"
	"time"
)

// The client against the bare net/http client with the same transport
// settings, on one loopback upstream, in the same run (docs/performance.md).
//
//	go test -run '^$' -bench . -benchmem ./plugins/http/

func benchUpstream(b *testing.B) *httptest.Server {
	body := []byte(`{"id":7,"amount_minor":1250,"currency":"EUR","status":"paid"}`)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(body)
	}))
	b.Cleanup(srv.Close)
	return srv
}

func BenchmarkGet(b *testing.B) {
	srv := benchUpstream(b)
	u := Upstream{Name: "billing", BaseURL: srv.URL}.withDefaults()

	b.Run("bare-net-http", func(b *testing.B) {
		client := bareClient(u)
		defer client.CloseIdleConnections()
		b.ReportAllocs()
		for b.Loop() {
			bareGet(b, client, srv.URL+"/invoices/7")
		}
	})

	b.Run("jfast-client", func(b *testing.B) {
		c := benchClient(b, u)
		b.ReportAllocs()
		for b.Loop() {
			jfastGet(b, c)
		}
	})

	b.Run("jfast-transport", func(b *testing.B) {
		hc := benchClient(b, u).HTTPClient()
		b.ReportAllocs()
		for b.Loop() {
			bareGet(b, hc, srv.URL+"/invoices/7")
		}
	})

	b.Run("jfast-shared", func(b *testing.B) {
		sc := benchShared(b)
		ctx := context.Background()
		b.ReportAllocs()
		for b.Loop() {
			resp, err := sc.Get(ctx, srv.URL+"/invoices/7")
			if err != nil || len(BodyBytes(resp)) == 0 {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkGetPaired alternates blocks of bare calls and client calls, in
// both orders, and measures each block's wall time and the process's CPU time
// (client, server and transport goroutines alike), so load from other
// processes on the machine falls on both alike. It reports both per call and
// their ratios; CPU time is the steadier figure on a shared machine.
func BenchmarkGetPaired(b *testing.B) {
	srv := benchUpstream(b)
	u := Upstream{Name: "billing", BaseURL: srv.URL}.withDefaults()
	client := bareClient(u)
	defer client.CloseIdleConnections()
	c := benchClient(b, u)
	paired(b, func() { bareGet(b, client, srv.URL+"/invoices/7") }, func() { jfastGet(b, c) })
}

// BenchmarkInterleaved runs the bare client, the client (Do), the
// RoundTripper (an *http.Client over Transport, reading the streamed body
// with io.ReadAll as the bare client does) and a shared client (by absolute
// URL, the origin's policy looked up per call) in rotating order, blocks of
// 50 calls each, on one upstream, and reports each one's CPU and wall time
// per call against the bare client's measured in the same rounds.
func BenchmarkInterleaved(b *testing.B) {
	srv := benchUpstream(b)
	target := srv.URL + "/invoices/7"
	u := Upstream{Name: "billing", BaseURL: srv.URL}.withDefaults()
	client := bareClient(u)
	defer client.CloseIdleConnections()
	c := benchClient(b, u)
	hc := benchClient(b, u).HTTPClient()
	sc := benchShared(b)
	ctx := context.Background()
	contenders := []struct {
		name string
		call func()
	}{
		{"bare", func() { bareGet(b, client, target) }},
		{"client", func() { jfastGet(b, c) }},
		{"transport", func() { bareGet(b, hc, target) }},
		{"shared", func() {
			resp, err := sc.Get(ctx, target)
			if err != nil || len(BodyBytes(resp)) == 0 {
				b.Fatal(err)
			}
		}},
	}
	const block = 50
	wall := make([]time.Duration, len(contenders))
	cpu := make([]time.Duration, len(contenders))
	rounds := 0
	for b.Loop() {
		for k := range contenders {
			i := (k + rounds) % len(contenders)
			w0, c0 := time.Now(), processCPU()
			for range block {
				contenders[i].call()
			}
			cpu[i] += processCPU() - c0
			wall[i] += time.Since(w0)
		}
		rounds++
	}
	calls := float64(rounds * block)
	b.ReportMetric(float64(cpu[0].Nanoseconds())/calls, "bare-cpu-ns/call")
	for i := 1; i < len(contenders); i++ {
		b.ReportMetric(float64(cpu[i])/float64(cpu[0]), contenders[i].name+"-cpu-ratio")
		b.ReportMetric(float64(wall[i])/float64(wall[0]), contenders[i].name+"-wall-ratio")
	}
}

// paired alternates blocks of 50 bare calls and 50 jfast calls, in both
// orders, and reports wall and CPU time per call and their ratios.
func paired(b *testing.B, bare, jfast func()) {
	const block = 50
	var bareWall, jfastWall, bareCPU, jfastCPU time.Duration
	run := func(f func(), wall, cpu *time.Duration) {
		w0, c0 := time.Now(), processCPU()
		for range block {
			f()
		}
		*cpu += processCPU() - c0
		*wall += time.Since(w0)
	}
	n := 0
	for b.Loop() {
		if n%2 == 0 {
			run(bare, &bareWall, &bareCPU)
			run(jfast, &jfastWall, &jfastCPU)
		} else {
			run(jfast, &jfastWall, &jfastCPU)
			run(bare, &bareWall, &bareCPU)
		}
		n++
	}
	calls := float64(n * block)
	b.ReportMetric(float64(bareWall.Nanoseconds())/calls, "bare-ns/call")
	b.ReportMetric(float64(jfastWall.Nanoseconds())/calls, "jfast-ns/call")
	b.ReportMetric(float64(jfastWall)/float64(bareWall), "wall-ratio")
	b.ReportMetric(float64(bareCPU.Nanoseconds())/calls, "bare-cpu-ns/call")
	b.ReportMetric(float64(jfastCPU.Nanoseconds())/calls, "jfast-cpu-ns/call")
	b.ReportMetric(float64(jfastCPU)/float64(bareCPU), "cpu-ratio")
}

func benchShared(b *testing.B) *SharedClient {
	s := SharedConfig{Upstream: Upstream{Name: "webhooks"}, AllowPrivate: true}.withDefaults()
	sc, err := newSharedClient(s)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = sc.Close() })
	return sc
}

// processCPU is the user and system CPU time of the whole process so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// bareClient is net/http with the settings of newTransport, without the gap
// deadlines, the total deadline as Client.Timeout and redirects not followed.
func bareClient(u Upstream) *http.Client {
	dialer := &net.Dialer{Timeout: u.ConnectTimeout, KeepAlive: 30 * time.Second}
	tr := &http.Transport{
		DialContext:           dialer.DialContext,
		TLSHandshakeTimeout:   u.ConnectTimeout,
		MaxConnsPerHost:       u.MaxConcurrent,
		MaxIdleConns:          u.MaxConcurrent,
		MaxIdleConnsPerHost:   u.MaxConcurrent,
		IdleConnTimeout:       90 * time.Second,
		ExpectContinueTimeout: time.Second,
	}
	return &http.Client{Transport: tr, Timeout: u.Timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

func bareGet(b *testing.B, client *http.Client, url string) {
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, url, nil)
	if err != nil {
		b.Fatal(err)
	}
	resp, err := client.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := io.ReadAll(resp.Body); err != nil {
		b.Fatal(err)
	}
	_ = resp.Body.Close()
}

func benchClient(b *testing.B, u Upstream, opts ...ClientOption) *ServiceClient {
	c, err := newClient(u, opts...)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = c.Close() })
	return c
}

func jfastGet(b *testing.B, c *ServiceClient) {
	resp, err := c.Get(context.Background(), "/invoices/7")
	if err != nil {
		b.Fatal(err)
	}
	if len(BodyBytes(resp)) == 0 {
		b.Fatal("empty body")
	}
}

// memoryTransport answers every request at once from memory, so the
// benchmark measures the client's own work (breaker, bulkhead, budget,
// deadline, headers, reading the body) without the network's noise.
type memoryTransport struct{ body []byte }

func (m memoryTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	return &http.Response{
		StatusCode: 200, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header:        http.Header{"Content-Type": {"application/json"}},
		Body:          io.NopCloser(bytes.NewReader(m.body)),
		ContentLength: int64(len(m.body)),
		Request:       r,
	}, nil
}

func BenchmarkGetInMemory(b *testing.B) {
	mt := memoryTransport{body: []byte(`{"id":7,"amount_minor":1250,"currency":"EUR","status":"paid"}`)}
	const base = "http://billing.internal:8010"

	b.Run("bare-net-http", func(b *testing.B) {
		client := &http.Client{Transport: mt, Timeout: DefaultTimeout,
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		ctx := context.Background()
		b.ReportAllocs()
		for b.Loop() {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/invoices/7", nil)
			if err != nil {
				b.Fatal(err)
			}
			resp, err := client.Do(req)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := io.ReadAll(resp.Body); err != nil {
				b.Fatal(err)
			}
			_ = resp.Body.Close()
		}
	})

	b.Run("jfast-transport", func(b *testing.B) {
		c, err := NewClient(Upstream{Name: "billing", BaseURL: base},
			WithTransportWrapper(func(string, http.RoundTripper) http.RoundTripper { return mt }))
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		hc := c.HTTPClient()
		ctx := context.Background()
		b.ReportAllocs()
		for b.Loop() {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/invoices/7", nil)
			if err != nil {
				b.Fatal(err)
			}
			resp, err := hc.Do(req)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := io.ReadAll(resp.Body); err != nil {
				b.Fatal(err)
			}
			_ = resp.Body.Close()
		}
	})

	b.Run("jfast-client", func(b *testing.B) {
		c, err := NewClient(Upstream{Name: "billing", BaseURL: base},
			WithTransportWrapper(func(string, http.RoundTripper) http.RoundTripper { return mt }))
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		ctx := context.Background()
		b.ReportAllocs()
		for b.Loop() {
			resp, err := c.Get(ctx, "/invoices/7")
			if err != nil {
				b.Fatal(err)
			}
			if len(BodyBytes(resp)) == 0 {
				b.Fatal("empty body")
			}
		}
	})
}
