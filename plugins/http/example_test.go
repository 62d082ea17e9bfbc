package http_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"

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

	client, err := jhttp.NewClient(jhttp.Upstream{Name: "billing", BaseURL: "http://" + addr, Retries: jhttp.NoRetries})
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
