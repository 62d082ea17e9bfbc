package http

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
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
		// The same settings as newTransport, without the gap deadlines.
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
		defer tr.CloseIdleConnections()
		client := &http.Client{Transport: tr, Timeout: u.TotalTimeout,
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		ctx := context.Background()
		b.ReportAllocs()
		for b.Loop() {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/invoices/7", nil)
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

	b.Run("jfast-client", func(b *testing.B) {
		c, err := NewClient(u)
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
