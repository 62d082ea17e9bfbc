package problem_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jfastframework/jfast/problem"
	"github.com/jfastframework/jfast/requestid"
)

func marshal(t *testing.T, p *problem.Problem) string {
	t.Helper()
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatalf("json.Marshal: %v", err)
	}
	return string(b)
}

func TestMarshalMemberOrder(t *testing.T) {
	t.Parallel()
	p := &problem.Problem{
		Type:      "https://errors.example.com/out-of-stock",
		Title:     "Out of stock",
		Status:    409,
		Detail:    "item 7 is out of stock",
		Instance:  "/orders/42",
		RequestID: "req-1",
		Extensions: map[string]any{
			"zeta":       1,
			"dependency": "db",
			"alpha":      []int{1, 2},
			"upstream":   "billing",
		},
	}
	want := `{"type":"https://errors.example.com/out-of-stock","title":"Out of stock","status":409,` +
		`"detail":"item 7 is out of stock","instance":"/orders/42","request_id":"req-1",` +
		`"alpha":[1,2],"dependency":"db","upstream":"billing","zeta":1}`
	if got := marshal(t, p); got != want {
		t.Fatalf("MarshalJSON:\n got %s\nwant %s", got, want)
	}
	// The output is stable: map iteration order must not leak into it.
	for range 20 {
		if got := marshal(t, p); got != want {
			t.Fatalf("MarshalJSON is not stable:\n got %s\nwant %s", got, want)
		}
	}
}

func TestMarshalDefaults(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		p    *problem.Problem
		want string
	}{
		{"status only", &problem.Problem{Status: 404},
			`{"type":"about:blank","title":"Not Found","status":404}`},
		{"zero value is a 500", &problem.Problem{},
			`{"type":"about:blank","title":"Internal Server Error","status":500}`},
		{"unknown status has a title", &problem.Problem{Status: 599},
			`{"type":"about:blank","title":"Error","status":599}`},
		{"escaping", &problem.Problem{Status: 400, Detail: "bad \"q\"\n<x>"},
			`{"type":"about:blank","title":"Bad Request","status":400,"detail":"bad \"q\"\n\u003cx\u003e"}`},
		{"retry after without extension", &problem.Problem{Status: 503, RetryAfter: 1500 * time.Millisecond},
			`{"type":"about:blank","title":"Service Unavailable","status":503,"retry_after":2}`},
		{"explicit retry_after extension wins", &problem.Problem{Status: 503, RetryAfter: time.Second, Extensions: map[string]any{"retry_after": 9}},
			`{"type":"about:blank","title":"Service Unavailable","status":503,"retry_after":9}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := marshal(t, tt.p); got != tt.want {
				t.Fatalf("MarshalJSON:\n got %s\nwant %s", got, tt.want)
			}
		})
	}
}

func TestExtensionsCannotOverrideStandardMembers(t *testing.T) {
	t.Parallel()
	p := problem.NotFound("no invoice for this order")
	p.Instance = "/invoices/9"
	p.RequestID = "req-9"
	p.Extensions = map[string]any{
		"type": "https://evil.example", "title": "pwned", "status": 200,
		"detail": "overridden", "instance": "/elsewhere", "request_id": "forged",
		"hint": "kept",
	}
	got := marshal(t, p)
	want := `{"type":"about:blank","title":"Not Found","status":404,"detail":"no invoice for this order",` +
		`"instance":"/invoices/9","request_id":"req-9","hint":"kept"}`
	if got != want {
		t.Fatalf("MarshalJSON:\n got %s\nwant %s", got, want)
	}
	// Also when the standard member is empty: an extension must not fill it.
	p = &problem.Problem{Status: 400, Extensions: map[string]any{"detail": "sneaky", "instance": "/x"}}
	if got := marshal(t, p); strings.Contains(got, "sneaky") || strings.Contains(got, "/x") {
		t.Fatalf("an extension filled a standard member: %s", got)
	}
}

func TestMarshalBadExtension(t *testing.T) {
	t.Parallel()
	p := &problem.Problem{Status: 400, Extensions: map[string]any{"ch": make(chan int)}}
	if _, err := json.Marshal(p); err == nil || !strings.Contains(err.Error(), `"ch"`) {
		t.Fatalf("json.Marshal with a channel extension: err = %v, want one naming \"ch\"", err)
	}
}

func TestUnmarshalRoundTrip(t *testing.T) {
	t.Parallel()
	in := problem.ServiceUnavailable("redis", "", 3*time.Second)
	in.Instance, in.RequestID = "/cart", "r1"
	var out problem.Problem
	if err := json.Unmarshal([]byte(marshal(t, in)), &out); err != nil {
		t.Fatalf("Unmarshal: %v", err)
	}
	if out.Status != 503 || out.Title != "Service Unavailable" || out.Detail != "redis is unavailable" ||
		out.Instance != "/cart" || out.RequestID != "r1" || out.Type != "about:blank" {
		t.Fatalf("Unmarshal standard members: %+v", out)
	}
	if out.Extensions["dependency"] != "redis" || out.Extensions["retry_after"] != float64(3) {
		t.Fatalf("Unmarshal extensions: %v", out.Extensions)
	}
	if err := json.Unmarshal([]byte(`{"status":"x"}`), &out); err == nil {
		t.Fatal(`Unmarshal {"status":"x"}: want an error`)
	}
}

func TestErrorString(t *testing.T) {
	t.Parallel()
	secret := errors.New("dial tcp 10.0.0.7:5432: password authentication failed for user admin:hunter2")
	tests := []struct {
		p    *problem.Problem
		want string
	}{
		{problem.NotFound("no invoice for this order"), "404 not found: no invoice for this order"},
		{&problem.Problem{Status: 409}, "409 conflict"},
		{&problem.Problem{Status: 500, Err: secret}, "500 internal server error"},
		{problem.Unauthorized("token expired"), "401 unauthorized: token expired"},
	}
	for _, tt := range tests {
		if got := tt.p.Error(); got != tt.want {
			t.Errorf("Error() = %q, want %q", got, tt.want)
		}
	}
}

func TestConstructors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		p      *problem.Problem
		status int
		want   string
	}{
		{"BadRequest", problem.BadRequest("page must be a number"), 400,
			`{"type":"about:blank","title":"Bad Request","status":400,"detail":"page must be a number"}`},
		{"Unauthorized", problem.Unauthorized("no bearer token"), 401,
			`{"type":"about:blank","title":"Unauthorized","status":401,"detail":"no bearer token"}`},
		{"Forbidden", problem.Forbidden("not your order"), 403,
			`{"type":"about:blank","title":"Forbidden","status":403,"detail":"not your order"}`},
		{"NotFound", problem.NotFound("no invoice for this order"), 404,
			`{"type":"about:blank","title":"Not Found","status":404,"detail":"no invoice for this order"}`},
		{"MethodNotAllowed", problem.MethodNotAllowed([]string{"GET", "HEAD"}), 405,
			`{"type":"about:blank","title":"Method Not Allowed","status":405,"detail":"the method is not allowed for this resource; allowed: GET, HEAD"}`},
		{"Conflict", problem.Conflict("order already paid"), 409,
			`{"type":"about:blank","title":"Conflict","status":409,"detail":"order already paid"}`},
		{"Unprocessable", problem.Unprocessable("the order is invalid",
			problem.FieldError{Field: "email", Detail: "not an address"},
			problem.FieldError{Field: "items[0].qty", Detail: "must be at least 1"}), 422,
			`{"type":"about:blank","title":"Unprocessable Content","status":422,"detail":"the order is invalid",` +
				`"errors":[{"field":"email","detail":"not an address"},{"field":"items[0].qty","detail":"must be at least 1"}]}`},
		{"Unprocessable without fields", problem.Unprocessable("bad"), 422,
			`{"type":"about:blank","title":"Unprocessable Content","status":422,"detail":"bad"}`},
		{"TooManyRequests", problem.TooManyRequests("slow down", 1200*time.Millisecond), 429,
			`{"type":"about:blank","title":"Too Many Requests","status":429,"detail":"slow down","retry_after":2}`},
		{"BadGateway", problem.BadGateway("billing", "billing answered with invalid JSON"), 502,
			`{"type":"about:blank","title":"Bad Gateway","status":502,"detail":"billing answered with invalid JSON","upstream":"billing"}`},
		{"ServiceUnavailable", problem.ServiceUnavailable("db", "", 0), 503,
			`{"type":"about:blank","title":"Service Unavailable","status":503,"detail":"db is unavailable","dependency":"db"}`},
		{"ServiceUnavailable with wait", problem.ServiceUnavailable("redis", "calls to redis are suspended", 3200*time.Millisecond), 503,
			`{"type":"about:blank","title":"Service Unavailable","status":503,"detail":"calls to redis are suspended","dependency":"redis","retry_after":4}`},
		{"Internal", problem.Internal(), 500,
			`{"type":"about:blank","title":"Internal Server Error","status":500,"detail":"the server could not complete the request; the request ID identifies it in the logs"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if tt.p.Status != tt.status {
				t.Errorf("Status = %d, want %d", tt.p.Status, tt.status)
			}
			if got := marshal(t, tt.p); got != tt.want {
				t.Errorf("MarshalJSON:\n got %s\nwant %s", got, tt.want)
			}
		})
	}
	if got := problem.MethodNotAllowed([]string{"GET", "POST"}).Header.Get("Allow"); got != "GET, POST" {
		t.Errorf("MethodNotAllowed Allow header = %q, want \"GET, POST\"", got)
	}
}

func TestRetryAfterRounding(t *testing.T) {
	t.Parallel()
	tests := []struct {
		d    time.Duration
		want string // "" means no header
	}{
		{0, ""},
		{-time.Second, ""},
		{time.Nanosecond, "1"},
		{999 * time.Millisecond, "1"},
		{time.Second, "1"},
		{time.Second + time.Nanosecond, "2"},
		{3200 * time.Millisecond, "4"},
		{15 * time.Second, "15"},
		{90*time.Second + time.Millisecond, "91"},
	}
	for _, tt := range tests {
		t.Run(tt.d.String(), func(t *testing.T) {
			t.Parallel()
			rec := httptest.NewRecorder()
			problem.Write(rec, httptest.NewRequest("GET", "/x", nil), problem.ServiceUnavailable("s3", "", tt.d))
			if got := rec.Header().Get("Retry-After"); got != tt.want {
				t.Fatalf("Retry-After for %v = %q, want %q", tt.d, got, tt.want)
			}
			var body map[string]any
			if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
				t.Fatal(err)
			}
			ra, has := body["retry_after"]
			if (tt.want == "") == has || (has && fmt.Sprint(ra) != tt.want) {
				t.Fatalf("retry_after member for %v = %v (present %v), want %q", tt.d, ra, has, tt.want)
			}
		})
	}
}

func TestAsAndFrom(t *testing.T) {
	t.Parallel()
	nf := problem.NotFound("no invoice for this order")
	dep := &problem.DependencyError{Dependency: "redis", Err: errors.New("dial tcp 127.0.0.1:6379: connection refused")}
	tests := []struct {
		name       string
		err        error
		ok         bool
		status     int
		detail     string
		dependency any
	}{
		{"problem", nf, true, 404, "no invoice for this order", nil},
		{"wrapped problem", fmt.Errorf("load invoice: %w", nf), true, 404, "no invoice for this order", nil},
		{"twice wrapped problem", fmt.Errorf("handler: %w", fmt.Errorf("load: %w", nf)), true, 404, "no invoice for this order", nil},
		{"joined", errors.Join(errors.New("other"), nf), true, 404, "no invoice for this order", nil},
		{"renderer", dep, true, 503, "redis is unavailable", "redis"},
		{"wrapped renderer", fmt.Errorf("get cart: %w", dep), true, 503, "redis is unavailable", "redis"},
		{"deadline", context.DeadlineExceeded, false, 503, "the request did not finish within its deadline", nil},
		{"wrapped deadline", fmt.Errorf("query orders: %w", context.DeadlineExceeded), false, 503, "the request did not finish within its deadline", nil},
		{"plain", errors.New("boom"), false, 500, "the server could not complete the request; the request ID identifies it in the logs", nil},
		{"nil", nil, false, 500, "the server could not complete the request; the request ID identifies it in the logs", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, ok := problem.As(tt.err)
			if ok != tt.ok {
				t.Errorf("As ok = %v, want %v", ok, tt.ok)
			}
			p := problem.From(tt.err)
			if p == nil {
				t.Fatal("From returned nil")
			}
			if p.Status != tt.status || p.Detail != tt.detail {
				t.Errorf("From = %d %q, want %d %q", p.Status, p.Detail, tt.status, tt.detail)
			}
			if got := p.Extensions["dependency"]; got != tt.dependency {
				t.Errorf("dependency = %v, want %v", got, tt.dependency)
			}
			// The cause stays reachable for logs: either the problem wraps
			// err, or err holds the problem (or what the problem wraps).
			linked := errors.Is(p, tt.err) || errors.Is(tt.err, p) || (p.Err != nil && errors.Is(tt.err, p.Err))
			if tt.err != nil && !linked {
				t.Errorf("From(err) is not linked to err")
			}
		})
	}
}

// teapotError is an error from outside the package that renders itself.
type teapotError struct{}

func (teapotError) Error() string { return "no coffee" }
func (teapotError) Problem() *problem.Problem {
	return &problem.Problem{Status: http.StatusTeapot, Detail: "this server brews tea"}
}

// nilRenderer is a Renderer that (wrongly) returns nil: it must not crash.
type nilRenderer struct{}

func (nilRenderer) Error() string             { return "nil renderer" }
func (nilRenderer) Problem() *problem.Problem { return nil }

func TestForeignRenderer(t *testing.T) {
	t.Parallel()
	p := problem.From(fmt.Errorf("brew: %w", teapotError{}))
	if p.Status != 418 || p.Detail != "this server brews tea" {
		t.Fatalf("From(teapot) = %d %q", p.Status, p.Detail)
	}
	if p := problem.From(nilRenderer{}); p == nil || p.Status != 500 {
		t.Fatalf("From(nilRenderer) = %v, want the generic 500", p)
	}
}

func TestDependencyError(t *testing.T) {
	t.Parallel()
	cause := errors.New("dial tcp 127.0.0.1:6379: connect: connection refused")
	tests := []struct {
		e    *problem.DependencyError
		want string
	}{
		{&problem.DependencyError{Dependency: "redis", Err: cause}, "redis unavailable: dial tcp 127.0.0.1:6379: connect: connection refused"},
		{&problem.DependencyError{Dependency: "redis", Err: cause, Detail: "calls to redis are suspended for 3.2s"}, "redis unavailable: calls to redis are suspended for 3.2s"},
		{&problem.DependencyError{Dependency: "db"}, "db unavailable"},
	}
	for _, tt := range tests {
		if got := tt.e.Error(); got != tt.want {
			t.Errorf("Error() = %q, want %q", got, tt.want)
		}
	}
	e := &problem.DependencyError{Dependency: "redis", Err: cause, RetryAfter: 3200 * time.Millisecond}
	if !errors.Is(e, cause) || !errors.Is(fmt.Errorf("x: %w", e), cause) {
		t.Error("errors.Is does not reach the cause through DependencyError")
	}
	var got *problem.DependencyError
	if !errors.As(fmt.Errorf("get cart: %w", e), &got) || got != e {
		t.Error("errors.As does not find a wrapped DependencyError")
	}
	p := e.Problem()
	if !errors.Is(p, cause) {
		t.Error("the problem of a DependencyError does not keep the cause in its chain")
	}
	if p.Status != 503 || p.RetryAfter != 3200*time.Millisecond || p.Extensions["dependency"] != "redis" {
		t.Errorf("Problem() = %+v", p)
	}
}

// serve starts a real server whose only handler returns err through
// WriteError, with a request ID in the context as the framework's
// middleware puts it.
func serve(t *testing.T, err error) *http.Response {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r = r.WithContext(requestid.NewContext(r.Context(), "req-42"))
		problem.WriteError(w, r, err)
	}))
	t.Cleanup(srv.Close)
	resp, gerr := srv.Client().Get(srv.URL + "/carts/7?x=1")
	if gerr != nil {
		t.Fatal(gerr)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

func readBody(t *testing.T, resp *http.Response) string {
	t.Helper()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestWriteDependencyErrorOverHTTP(t *testing.T) {
	t.Parallel()
	cause := errors.New("dial tcp 10.1.2.3:6379: i/o timeout; password=s3cr3t")
	resp := serve(t, fmt.Errorf("load cart: %w",
		&problem.DependencyError{Dependency: "redis", Err: cause, RetryAfter: 3200 * time.Millisecond}))
	body := readBody(t, resp)
	if resp.StatusCode != 503 {
		t.Fatalf("status = %d, want 503", resp.StatusCode)
	}
	if ct := resp.Header.Get("Content-Type"); ct != problem.ContentType {
		t.Errorf("Content-Type = %q, want %q", ct, problem.ContentType)
	}
	if ra := resp.Header.Get("Retry-After"); ra != "4" {
		t.Errorf("Retry-After = %q, want 4", ra)
	}
	want := `{"type":"about:blank","title":"Service Unavailable","status":503,"detail":"redis is unavailable",` +
		`"instance":"/carts/7","request_id":"req-42","dependency":"redis","retry_after":4}`
	if body != want {
		t.Errorf("body:\n got %s\nwant %s", body, want)
	}
	for _, leak := range []string{"10.1.2.3", "s3cr3t", "i/o timeout", "load cart"} {
		if strings.Contains(body, leak) {
			t.Errorf("body leaks %q: %s", leak, body)
		}
	}
}

func TestWritePlainErrorLeaksNothing(t *testing.T) {
	t.Parallel()
	err := fmt.Errorf("query invoices: %w", errors.New(`pq: relation "invoices" does not exist (postgres://admin:hunter2@10.0.0.5/prod)`))
	resp := serve(t, err)
	body := readBody(t, resp)
	if resp.StatusCode != 500 {
		t.Fatalf("status = %d, want 500", resp.StatusCode)
	}
	want := `{"type":"about:blank","title":"Internal Server Error","status":500,` +
		`"detail":"the server could not complete the request; the request ID identifies it in the logs",` +
		`"instance":"/carts/7","request_id":"req-42"}`
	if body != want {
		t.Errorf("body:\n got %s\nwant %s", body, want)
	}
	for _, h := range []string{"Retry-After", "Allow"} {
		if v := resp.Header.Get(h); v != "" {
			t.Errorf("%s = %q, want none", h, v)
		}
	}
	// The cause is still there for the log line.
	if p := problem.From(err); !errors.Is(p, err) || !strings.Contains(p.Err.Error(), "hunter2") {
		t.Errorf("From lost the cause for logging: %v", p.Err)
	}
}

func TestWriteDeadline(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
	defer cancel()
	<-ctx.Done()
	resp := serve(t, fmt.Errorf("list orders: %w", ctx.Err()))
	body := readBody(t, resp)
	if resp.StatusCode != 503 || !strings.Contains(body, `"detail":"the request did not finish within its deadline"`) {
		t.Fatalf("deadline: %d %s", resp.StatusCode, body)
	}
	if strings.Contains(body, "dependency") || strings.Contains(body, "list orders") {
		t.Fatalf("deadline body says too much: %s", body)
	}
}

func TestWriteHeadersAndNoMutation(t *testing.T) {
	t.Parallel()
	p := problem.MethodNotAllowed([]string{"GET", "HEAD"})
	p.Header.Set("X-Extra", "1")
	p.RetryAfter = 2 * time.Second
	before := marshal(t, p)

	rec := httptest.NewRecorder()
	req := httptest.NewRequest("DELETE", "/orders/1", nil)
	req = req.WithContext(requestid.NewContext(req.Context(), "abc"))
	problem.Write(rec, req, p)

	if rec.Code != 405 {
		t.Fatalf("status = %d, want 405", rec.Code)
	}
	if got := rec.Header().Get("Allow"); got != "GET, HEAD" {
		t.Errorf("Allow = %q", got)
	}
	if got := rec.Header().Get("X-Extra"); got != "1" {
		t.Errorf("X-Extra = %q", got)
	}
	if got := rec.Header().Get("Retry-After"); got != "2" {
		t.Errorf("Retry-After = %q", got)
	}
	if !strings.Contains(rec.Body.String(), `"instance":"/orders/1","request_id":"abc"`) {
		t.Errorf("body misses instance or request_id: %s", rec.Body.String())
	}
	if p.Instance != "" || p.RequestID != "" || marshal(t, p) != before {
		t.Errorf("Write mutated the problem: %+v", p)
	}

	// A problem that carries its own instance and request ID keeps them.
	rec = httptest.NewRecorder()
	problem.Write(rec, req, &problem.Problem{Status: 404, Instance: "urn:x", RequestID: "mine"})
	if !strings.Contains(rec.Body.String(), `"instance":"urn:x","request_id":"mine"`) {
		t.Errorf("Write replaced set members: %s", rec.Body.String())
	}

	// nil writes the generic 500; a status out of range too.
	for _, p := range []*problem.Problem{nil, {Status: 42}} {
		rec = httptest.NewRecorder()
		problem.Write(rec, req, p)
		if rec.Code != 500 || !strings.Contains(rec.Body.String(), `"status":500`) {
			t.Errorf("Write(%v) = %d %s, want a 500", p, rec.Code, rec.Body.String())
		}
	}

	// Without a request ID in the context the member is omitted.
	rec = httptest.NewRecorder()
	problem.Write(rec, httptest.NewRequest("GET", "/a", nil), problem.NotFound(""))
	if strings.Contains(rec.Body.String(), "request_id") {
		t.Errorf("request_id present without one in the context: %s", rec.Body.String())
	}

	// An extension that cannot be encoded still yields a valid body.
	rec = httptest.NewRecorder()
	problem.Write(rec, req, &problem.Problem{Status: 400, Detail: "d", Extensions: map[string]any{"f": func() {}}})
	var m map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &m); err != nil || rec.Code != 400 || m["detail"] != "d" {
		t.Errorf("bad extension: %d %s (%v)", rec.Code, rec.Body.String(), err)
	}
}

// The instance member is a URI reference: the path as the client sent it,
// percent-encoded, never the decoded form (which is not one).
func TestInstanceIsTheEscapedPath(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		problem.Write(w, r, problem.NotFound("no such file"))
	}))
	t.Cleanup(srv.Close)
	for path, want := range map[string]string{
		"/a%20b":         "/a%20b",
		"/files/x%2Fy":   "/files/x%2Fy",
		"/caf%C3%A9/%22": "/caf%C3%A9/%22",
		"/plain/7":       "/plain/7",
	} {
		resp, err := srv.Client().Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		var body struct{ Instance string }
		err = json.NewDecoder(resp.Body).Decode(&body)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		if body.Instance != want {
			t.Errorf("GET %s: instance = %q, want %q", path, body.Instance, want)
		}
		if _, err := url.Parse(body.Instance); err != nil || strings.ContainsAny(body.Instance, " \"") {
			t.Errorf("GET %s: instance %q is not a URI reference", path, body.Instance)
		}
	}
}

// Titles are RFC 9110's reason phrases, where net/http keeps older ones.
func TestTitlesAreRFC9110ReasonPhrases(t *testing.T) {
	t.Parallel()
	for status, want := range map[int]string{
		413: "Content Too Large",
		414: "URI Too Long",
		416: "Range Not Satisfiable",
		422: "Unprocessable Content",
		404: "Not Found",
		503: "Service Unavailable",
		599: "Error",
	} {
		if got := problem.ReasonPhrase(status); got != want {
			t.Errorf("ReasonPhrase(%d) = %q, want %q", status, got, want)
		}
		b := marshal(t, problem.New(status, ""))
		if !strings.Contains(b, `"title":"`+want+`"`) {
			t.Errorf("a %d problem's body: %s, want the title %q", status, b, want)
		}
	}
}

// A body read past its limit (http.MaxBytesReader, or the framework's own
// limit) is a 413 naming the limit, however it is wrapped.
func TestMaxBytesErrorIs413(t *testing.T) {
	t.Parallel()
	err := fmt.Errorf("decode order: %w", &http.MaxBytesError{Limit: 1024})
	p := problem.From(err)
	if p.Status != 413 || p.Detail != "the request body is larger than the 1024 bytes this route accepts" || !errors.Is(p, err) {
		t.Fatalf("From(MaxBytesError) = %d %q (cause kept: %v)", p.Status, p.Detail, errors.Is(p, err))
	}
	if b := marshal(t, p); !strings.Contains(b, `"title":"Content Too Large"`) {
		t.Errorf("body = %s", b)
	}
}

// Every member string is written as json.Marshal writes it: the plain ones
// as they are, the others escaped by encoding/json.
func TestStringsAreWrittenAsJSONMarshalWritesThem(t *testing.T) {
	for _, s := range []string{"/orders/42", "about:blank", "Service Unavailable", "a\"b", `a\b`, "<tag>", "a&b", "tab\there", "new\nline", "\x7f", "é", "\u2028", "\xff"} {
		p := &problem.Problem{Status: 400, Detail: s, Instance: s}
		got, err := p.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		want, _ := json.Marshal(s)
		if !bytes.Contains(got, append([]byte(`"detail":`), want...)) || !bytes.Contains(got, append([]byte(`"instance":`), want...)) {
			t.Errorf("%q: body %s, want the member as %s", s, got, want)
		}
	}
}

// SetExtension makes the map on a problem that has none and keeps the
// members already there.
func TestSetExtension(t *testing.T) {
	p := problem.New(http.StatusBadGateway, "orders answered 500")
	p.SetExtension("upstream", "orders")
	q := problem.ServiceUnavailable("orders", "", 2*time.Second)
	q.SetExtension("upstream", "orders")
	got := marshal(t, p) + "\n" + marshal(t, q)
	want := `{"type":"about:blank","title":"Bad Gateway","status":502,"detail":"orders answered 500","upstream":"orders"}` + "\n" +
		`{"type":"about:blank","title":"Service Unavailable","status":503,"detail":"orders is unavailable","dependency":"orders","retry_after":2,"upstream":"orders"}`
	if got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
}
