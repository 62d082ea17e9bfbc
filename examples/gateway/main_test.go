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

// startGateway starts the example's own configuration with orders (and its
// events) at ordersURL and billing at billingURL.
func startGateway(t *testing.T, ordersURL, billingURL string) *framework.App {
	t.Helper()
	return startGatewayEnv(t,
		"JFAST_HTTP_UPSTREAMS__ORDERS__BASE_URL="+ordersURL,
		"JFAST_HTTP_UPSTREAMS__ORDERS_EVENTS__BASE_URL="+ordersURL,
		"JFAST_HTTP_UPSTREAMS__BILLING__BASE_URL="+billingURL)
}

// startGatewayEnv starts the example's own configuration on a free loopback
// port with the deploy keys of environ, until the test ends.
func startGatewayEnv(t *testing.T, environ ...string) *framework.App {
	t.Helper()
	opts := options()
	opts.ConfigText = config
	opts.Environ = append([]string{"JFAST_APP_LISTEN=127.0.0.1:0"}, environ...)
	opts.LogOutput = io.Discard
	app, err := framework.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := app.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = app.Stop(context.Background()) })
	return app
}

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
	app := startGateway(t, orders.URL, billing.URL)
	for path, want := range map[string]string{
		"/api/orders/1":           "orders /orders/1 Bearer t",
		"/api/orders":             "orders /orders Bearer t",
		"/api/events":             "orders /events Bearer t", // orders filters the stream to the caller
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

// Open event streams hold places of orders_events' max_concurrent, not of the
// orders upstream's: more idle streams than the default 50 stay open, and a
// further stream and the orders route still answer.
func TestIdleStreamsDoNotLockOut(t *testing.T) {
	const streams = 60 // above the http plugin's default max_concurrent (50)
	release := make(chan struct{})
	orders := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/events" {
			_, _ = io.WriteString(w, "orders "+r.URL.Path)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(200)
		_, _ = io.WriteString(w, "retry: 2000\n\n")
		http.NewResponseController(w).Flush()
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	t.Cleanup(orders.Close)
	t.Cleanup(func() { close(release) })
	app := startGateway(t, orders.URL, orders.URL)
	client := &http.Client{Transport: &http.Transport{MaxConnsPerHost: 0, DisableKeepAlives: true}}
	for i := range streams + 1 {
		resp, err := client.Get("http://" + app.Addr() + "/api/events")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		if resp.StatusCode != 200 {
			b, _ := io.ReadAll(resp.Body)
			t.Fatalf("event stream %d = %d %s", i+1, resp.StatusCode, b)
		}
	}
	resp, err := client.Get("http://" + app.Addr() + "/api/orders/1")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(b) != "orders /orders/1" {
		t.Fatalf("GET /api/orders/1 beside %d streams = %d %s", streams+1, resp.StatusCode, b)
	}
}
