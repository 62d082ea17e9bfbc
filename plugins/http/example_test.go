package http_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"

	"github.com/jfastframework/jfast/framework/resilience"
	jhttp "github.com/jfastframework/jfast/plugins/http"
	"github.com/jfastframework/jfast/problem"
)

// A client outside a service: a script or a test builds one with NewClient
// and closes it.
func ExampleNewClient() {
	billing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id":%q,"status":"paid"}`, r.URL.Path[len("/invoices/"):])
	}))
	defer billing.Close()

	client, err := jhttp.NewClient(jhttp.Upstream{Name: "billing", BaseURL: billing.URL})
	if err != nil {
		panic(err)
	}
	defer client.Close()

	resp, err := client.Get(context.Background(), "/invoices/7")
	if err != nil {
		panic(err)
	}
	var invoice struct{ ID, Status string }
	if err := jhttp.DecodeJSON(resp, &invoice); err != nil {
		panic(err)
	}
	fmt.Println(resp.StatusCode, invoice.ID, invoice.Status)
	// Output: 200 7 paid
}

// A call that got no response fails with an UpstreamError that renders as a
// 503 naming the upstream.
func ExampleUpstreamError() {
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := ln.Addr().String()
	ln.Close() // nothing listens there any more

	client, err := jhttp.NewClient(jhttp.Upstream{Name: "billing", BaseURL: "http://" + addr, PolicyConfig: resilience.PolicyConfig{Attempts: 1}})
	if err != nil {
		panic(err)
	}
	defer client.Close()

	_, err = client.Get(context.Background(), "/invoices/7")
	var ue *jhttp.UpstreamError
	var unavailable *jhttp.UpstreamUnavailable
	fmt.Println(errors.As(err, &ue), ue.Upstream, errors.As(err, &unavailable))
	p, _ := problem.As(err)
	fmt.Println(p.Status, p.Detail, p.Extensions["dependency"], p.Extensions["upstream"])
	// Output:
	// true billing true
	// 503 upstream 'billing' is unreachable billing billing
}

// An SDK or a reverse proxy takes the upstream's policies as an *http.Client
// (or an http.RoundTripper): its requests get the deadlines, retries,
// breaker and bulkhead, and their bodies stream. Turn the SDK's own retries
// off, so that retries happen at one level.
func ExampleServiceClient_HTTPClient() {
	var calls atomic.Int32
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) == 1 {
			w.WriteHeader(http.StatusServiceUnavailable) // retried by the upstream's rules
			return
		}
		fmt.Fprint(w, `{"object":"list"}`)
	}))
	defer api.Close()

	client, err := jhttp.NewClient(jhttp.Upstream{Name: "models", BaseURL: api.URL})
	if err != nil {
		panic(err)
	}
	defer client.Close()
	sdk := client.HTTPClient() // e.g. option.WithHTTPClient(sdk), option.WithMaxRetries(0)

	resp, err := sdk.Get(api.URL + "/v1/models")
	if err != nil {
		panic(err)
	}
	defer resp.Body.Close() // ends the call: give the body back
	body, _ := io.ReadAll(resp.Body)
	fmt.Println(resp.StatusCode, string(body), calls.Load())
	// Output: 200 {"object":"list"} 2
}

// A shared client calls any origin by absolute URL, each origin with its own
// breaker, budget and bulkhead, and refuses addresses inside the service's
// own network unless allowed.
func ExampleNewSharedClient() {
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusNoContent)
	}))
	defer hook.Close()

	guarded, err := jhttp.NewSharedClient(jhttp.SharedConfig{Upstream: jhttp.Upstream{Name: "webhooks"}})
	if err != nil {
		panic(err)
	}
	defer guarded.Close()
	_, err = guarded.Post(context.Background(), hook.URL+"/events", map[string]string{"event": "paid"})
	fmt.Println(errors.Is(err, jhttp.ErrAddressNotAllowed))

	allowed, err := jhttp.NewSharedClient(jhttp.SharedConfig{Upstream: jhttp.Upstream{Name: "webhooks"},
		AllowHosts: []string{"127.0.0.1"}})
	if err != nil {
		panic(err)
	}
	defer allowed.Close()
	resp, err := allowed.Post(context.Background(), hook.URL+"/events", map[string]string{"event": "paid"})
	fmt.Println(resp.StatusCode, err, allowed.Origins())
	// Output:
	// true
	// 204 <nil> 1
}
