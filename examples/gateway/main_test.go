package main

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/jfastframework/jfast/framework"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The example's own configuration boots, and sends each path to the right
// service with the right path: stand-ins for orders and billing answer
// with the path they got.
func TestExampleRoutes(t *testing.T) {
	echo := func(name string) *httptest.Server {
		s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.WriteString(w, name+" "+r.URL.Path+" "+r.Header.Get("Authorization"))
		}))
		t.Cleanup(s.Close)
		return s
	}
	orders, billing := echo("orders"), echo("billing")
	opts := options()
	opts.ConfigText = config
	opts.Environ = []string{
		"JFAST_APP_LISTEN=127.0.0.1:0",
		"JFAST_HTTP_UPSTREAMS__ORDERS__BASE_URL=" + orders.URL,
		"JFAST_HTTP_UPSTREAMS__ORDERS_EVENTS__BASE_URL=" + orders.URL,
		"JFAST_HTTP_UPSTREAMS__BILLING__BASE_URL=" + billing.URL,
	}
	opts.LogOutput = io.Discard
	app, err := framework.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := app.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = app.Stop(context.Background()) })
	for path, want := range map[string]string{
		"/api/orders/1":           "orders /orders/1 Bearer t",
		"/api/orders":             "orders /orders Bearer t",
		"/api/events":             "orders /events", // no forward_authorization: the token stays at the edge
		"/api/billing/invoices/1": "billing /invoices/1 Bearer t",
	} {
		req, _ := http.NewRequest(http.MethodGet, "http://"+app.Addr()+path, nil)
		req.Header.Set("Authorization", "Bearer t")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || strings.TrimSpace(string(b)) != want {
			t.Errorf("GET %s: %d %q, want %q", path, resp.StatusCode, b, want)
		}
	}
}
