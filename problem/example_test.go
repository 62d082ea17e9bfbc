package problem_test

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"time"

	"github.com/jfastframework/jfast/problem"
)

// A handler returns a problem; WriteError renders it.
func ExampleNotFound() {
	rec := httptest.NewRecorder()
	req := httptest.NewRequest("GET", "/orders/42/invoice", nil)

	err := problem.NotFound("no invoice for this order")
	problem.WriteError(rec, req, err)

	fmt.Println(rec.Code, rec.Header().Get("Content-Type"))
	fmt.Println(rec.Body.String())
	fmt.Println(err)
	// Output:
	// 404 application/problem+json
	// {"type":"about:blank","title":"Not Found","status":404,"detail":"no invoice for this order","instance":"/orders/42/invoice"}
	// 404 not found: no invoice for this order
}

// Validation failures list each field in the "errors" member.
func ExampleUnprocessable() {
	p := problem.Unprocessable("the order is invalid",
		problem.FieldError{Field: "email", Detail: "not an address"},
		problem.FieldError{Field: "items", Detail: "at least one item is required"},
	)
	b, _ := p.MarshalJSON()
	fmt.Println(string(b))
	// Output:
	// {"type":"about:blank","title":"Unprocessable Content","status":422,"detail":"the order is invalid","errors":[{"field":"email","detail":"not an address"},{"field":"items","detail":"at least one item is required"}]}
}

// A 503 names the dependency and, when the wait is known, says how long to
// wait in whole seconds, rounded up.
func ExampleServiceUnavailable() {
	rec := httptest.NewRecorder()
	req := httptest.NewRequest("GET", "/cart", nil)

	problem.Write(rec, req, problem.ServiceUnavailable("redis", "calls to redis are suspended", 3200*time.Millisecond))

	fmt.Println(rec.Code, "Retry-After:", rec.Header().Get("Retry-After"))
	fmt.Println(rec.Body.String())
	// Output:
	// 503 Retry-After: 4
	// {"type":"about:blank","title":"Service Unavailable","status":503,"detail":"calls to redis are suspended","instance":"/cart","dependency":"redis","retry_after":4}
}

// Plugins return a DependencyError; wrapped or not, it renders as a 503 that
// names the dependency and never the cause.
func ExampleDependencyError() {
	cause := errors.New("dial tcp 10.0.0.7:6379: connect: connection refused")
	err := fmt.Errorf("load cart: %w", &problem.DependencyError{Dependency: "redis", Err: cause})

	rec := httptest.NewRecorder()
	problem.WriteError(rec, httptest.NewRequest("GET", "/cart", nil), err)

	fmt.Println(err) // for the log
	fmt.Println(rec.Code, rec.Body.String())
	// Output:
	// load cart: redis unavailable: dial tcp 10.0.0.7:6379: connect: connection refused
	// 503 {"type":"about:blank","title":"Service Unavailable","status":503,"detail":"redis is unavailable","instance":"/cart","dependency":"redis"}
}

// Anything that is not a problem is a 500 that tells the client nothing
// about the cause.
func ExampleFrom() {
	p := problem.From(errors.New(`pq: relation "invoices" does not exist`))
	fmt.Println(p.Status, p.Detail)
	// Output:
	// 500 the server could not complete the request; the request ID identifies it in the logs
}

// A 405 carries its Allow header.
func ExampleMethodNotAllowed() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		problem.Write(w, r, problem.MethodNotAllowed([]string{"GET", "HEAD"}))
	}))
	defer srv.Close()

	resp, err := srv.Client().Post(srv.URL+"/orders", "text/plain", nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer resp.Body.Close()
	fmt.Println(resp.StatusCode, "Allow:", resp.Header.Get("Allow"))
	_, _ = io.Copy(os.Stdout, resp.Body)
	// Output:
	// 405 Allow: GET, HEAD
	// {"type":"about:blank","title":"Method Not Allowed","status":405,"detail":"the method is not allowed for this resource; allowed: GET, HEAD","instance":"/orders"}
}
