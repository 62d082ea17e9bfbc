package framework_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/jfasttest"
)

// handlerEnd is what a handler under test reports when it returns.
type handlerEnd struct {
	took time.Duration
	err  error
}

// dial opens a raw connection to the service, closed when the test ends.
func dial(t *testing.T, svc *jfasttest.Service) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", svc.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// waitEnd waits for the handler to return; a handler still running after a
// long while is the failure these tests exist for.
func waitEnd(t *testing.T, ended <-chan handlerEnd) handlerEnd {
	t.Helper()
	select {
	case e := <-ended:
		return e
	case <-time.After(15 * time.Second):
		t.Fatal("the handler is still running 15s after its request's deadline")
		return handlerEnd{}
	}
}

// A client that sends its body one byte at a time cannot hold the handler
// reading it: the read fails at the request's deadline with a 408, which the
// client receives.
func TestTricklingBodyIsCutAtTheDeadline(t *testing.T) {
	t.Parallel()
	const timeout = 300 * time.Millisecond
	ended := make(chan handlerEnd, 1)
	svc := jfasttest.Start(t, jfasttest.Options{
		TOML: fmt.Sprintf("[app]\nrequest_timeout = %q", timeout),
		Routes: func(_ *framework.App, r chi.Router) error {
			r.Method(http.MethodPost, "/upload", framework.Handler(func(w http.ResponseWriter, r *http.Request) error {
				start := time.Now()
				_, err := io.ReadAll(r.Body)
				ended <- handlerEnd{time.Since(start), err}
				return err
			}))
			return nil
		},
	})
	conn := dial(t, svc)
	if _, err := io.WriteString(conn, "POST /upload HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	trickled := make(chan struct{})
	go func() { // one byte every 50 ms: the whole body would take 50 s
		defer close(trickled)
		for {
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
				if _, err := conn.Write([]byte("x")); err != nil {
					return
				}
			}
		}
	}()
	defer func() { close(stop); <-trickled }()

	e := waitEnd(t, ended)
	var readErr *framework.BodyReadError
	if !errors.As(e.err, &readErr) || readErr.Status != http.StatusRequestTimeout || !errors.Is(e.err, os.ErrDeadlineExceeded) {
		t.Fatalf("the handler's read returned %v, want a BodyReadError with status 408 wrapping the deadline", e.err)
	}
	t.Logf("the handler's read ended after %v (request_timeout %v)", e.took, timeout)
	if e.took > timeout+2*time.Second {
		t.Errorf("the handler's read took %v, over request_timeout + 2s", e.took)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusRequestTimeout || resp.Header.Get("Content-Type") != "application/problem+json" ||
		!strings.Contains(string(body), `"detail":"the request body did not arrive within the request's deadline"`) {
		t.Fatalf("response = %d %s %s", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
	if !resp.Close {
		t.Error("the connection of a cut body stays open; want Connection: close")
	}
}

// A client that does not read the response cannot hold the handler writing
// it: writes fail one second (the write grace) after the request's deadline.
func TestNonReadingClientCannotHoldTheHandler(t *testing.T) {
	t.Parallel()
	const timeout = 300 * time.Millisecond
	ended := make(chan handlerEnd, 1)
	svc := jfasttest.Start(t, jfasttest.Options{
		TOML: fmt.Sprintf("[app]\nrequest_timeout = %q", timeout),
		Routes: func(_ *framework.App, r chi.Router) error {
			r.Get("/export", func(w http.ResponseWriter, r *http.Request) {
				start := time.Now()
				chunk := make([]byte, 1<<20)
				var err error
				for i := 0; i < 1024 && err == nil; i++ { // up to 1 GiB: far more than socket buffers hold
					_, err = w.Write(chunk)
				}
				ended <- handlerEnd{time.Since(start), err}
			})
			return nil
		},
	})
	conn := dial(t, svc)
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetReadBuffer(4096)
	}
	if _, err := io.WriteString(conn, "GET /export HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	// ... and never read.
	e := waitEnd(t, ended)
	if e.err == nil || !errors.Is(e.err, os.ErrDeadlineExceeded) {
		t.Fatalf("the handler's writes ended with %v, want the write deadline", e.err)
	}
	t.Logf("the handler's writes failed after %v (request_timeout %v + 1s grace)", e.took, timeout)
	if e.took < timeout || e.took > timeout+time.Second+2*time.Second {
		t.Errorf("the handler's writes failed after %v, want between request_timeout and request_timeout + 1s + 2s", e.took)
	}
	// The access log says the response was cut, which its 200 alone hides.
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second) // a bound on a failure only
	defer cancel()
	if err := svc.WaitLogs(ctx, func(logs string) bool {
		return strings.Contains(logs, "path=/export status=200") && strings.Contains(logs, "write_error=")
	}); err != nil {
		t.Fatalf("no access log line with the write error:\n%s", svc.Logs())
	}
}

// The deadlines of one request do not leak into the next on the same
// connection: a keep-alive client whose first request ran to its deadline is
// served normally afterwards.
func TestDeadlinesDoNotOutliveTheirRequest(t *testing.T) {
	t.Parallel()
	const timeout = 200 * time.Millisecond
	svc := jfasttest.Start(t, jfasttest.Options{
		TOML: fmt.Sprintf("[app]\nrequest_timeout = %q", timeout),
		Routes: func(_ *framework.App, r chi.Router) error {
			r.Post("/echo", func(w http.ResponseWriter, r *http.Request) {
				b, _ := io.ReadAll(r.Body)
				w.Write(b)
			})
			r.Get("/slow", func(w http.ResponseWriter, r *http.Request) {
				<-r.Context().Done()
				w.Write([]byte("late"))
			})
			return nil
		},
	})
	conn := dial(t, svc)
	br := bufio.NewReader(conn)
	roundTrip := func(req string) string {
		t.Helper()
		if _, err := io.WriteString(conn, req); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return fmt.Sprintf("%d %s", resp.StatusCode, b)
	}
	if got := roundTrip("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nhi"); got != "200 hi" {
		t.Fatalf("first = %q", got)
	}
	if got := roundTrip("GET /slow HTTP/1.1\r\nHost: x\r\n\r\n"); got != "200 late" {
		t.Fatalf("slow = %q", got)
	}
	// Past both earlier requests' deadlines and write grace.
	time.Sleep(timeout + 1200*time.Millisecond)
	if got := roundTrip("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nagain"); got != "200 again" {
		t.Fatalf("after the deadlines = %q", got)
	}
}

func bodyService(t *testing.T, toml string) *jfasttest.Service {
	t.Helper()
	readAll := framework.Handler(func(w http.ResponseWriter, r *http.Request) error {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			return err
		}
		return framework.JSON(w, http.StatusOK, map[string]int{"read": len(b)})
	})
	return jfasttest.Start(t, jfasttest.Options{
		TOML: toml,
		Routes: func(_ *framework.App, r chi.Router) error {
			r.Method(http.MethodPost, "/default", readAll)
			r.With(framework.MaxBodyBytes(10)).Method(http.MethodPost, "/small", readAll)
			r.With(framework.MaxBodyBytes(10)).Method(http.MethodPost, "/small.json", framework.Handler(func(w http.ResponseWriter, r *http.Request) error {
				var v any
				if err := framework.DecodeJSON(r, &v); err != nil {
					return err
				}
				return framework.JSON(w, http.StatusOK, v)
			}))
			r.With(framework.MaxBodyBytes(3<<20)).Method(http.MethodPost, "/large", readAll)
			return nil
		},
	})
}

func TestBodyLimit(t *testing.T) {
	t.Parallel()
	svc := bodyService(t, "")
	const mib = 1 << 20
	tests := []struct {
		path string
		size int
		want int
	}{
		{"/default", mib, 200},
		{"/default", mib + 1, 413},
		{"/small", 10, 200},
		{"/small", 11, 413},
		{"/large", 3 * mib, 200},
		{"/large", 3*mib + 1, 413},
	}
	for _, tt := range tests {
		r := svc.Do(t, http.MethodPost, tt.path, strings.Repeat("a", tt.size))
		if r.Status != tt.want {
			t.Errorf("POST %s with %d bytes = %d %s, want %d", tt.path, tt.size, r.Status, r.Body, tt.want)
			continue
		}
		if tt.want == 413 {
			limit := map[string]int{"/default": mib, "/small": 10, "/large": 3 * mib}[tt.path]
			want := fmt.Sprintf(`"title":"Content Too Large","status":413,"detail":"the request body is larger than the %d bytes this route accepts"`, limit)
			if r.Header.Get("Content-Type") != "application/problem+json" || !strings.Contains(r.String(), want) {
				t.Errorf("POST %s with %d bytes: %s", tt.path, tt.size, r.Body)
			}
		}
	}
}

// app.max_body_bytes changes the default; a body without Content-Length
// (chunked) is held to it too.
func TestBodyLimitFromConfigAndChunked(t *testing.T) {
	t.Parallel()
	svc := bodyService(t, "[app]\nmax_body_bytes = 100")
	for size, want := range map[int]int{100: 200, 101: 413} {
		req, err := http.NewRequest(http.MethodPost, svc.URL+"/default", io.MultiReader(strings.NewReader(strings.Repeat("a", size))))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if len(req.TransferEncoding) == 0 && req.ContentLength > 0 {
			t.Fatal("the request was not sent chunked")
		}
		if resp.StatusCode != want {
			t.Errorf("chunked %d bytes = %d, want %d", size, resp.StatusCode, want)
		}
	}
}

// A chunked body one byte over the limit, sent whole with its last chunk:
// reading the byte over the limit also reads the body to its end, after
// which net/http watches the connection for the client going away. The
// client is still there and gets the 413 problem, not the 499 of a client
// that left (the limit's read deadline in the past once failed that watch).
func TestChunkedBodyOneByteOverTheLimitWithItsLastChunk(t *testing.T) {
	t.Parallel()
	svc := bodyService(t, "")
	// 1 MiB + 1 bytes, app.max_body_bytes' default + 1, in 64 KiB chunks
	// and a last one of 1 byte, then the end.
	var body strings.Builder
	chunk := strings.Repeat("a", 64<<10)
	for range 16 {
		fmt.Fprintf(&body, "%x\r\n%s\r\n", len(chunk), chunk)
	}
	body.WriteString("1\r\na\r\n0\r\n\r\n")
	for range 20 {
		conn := dial(t, svc)
		if _, err := io.WriteString(conn, "POST /default HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"+body.String()); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		conn.Close()
		if resp.StatusCode != http.StatusRequestEntityTooLarge || !strings.Contains(string(b), `"status":413`) {
			t.Fatalf("1 MiB + 1 bytes chunked: %d %s, want the 413 problem", resp.StatusCode, b)
		}
	}
}

// A declared Content-Length over the limit is answered at once, without
// waiting for a body the server will not read, and the connection is closed
// at once: the body, held back here, is not waited for either, whether
// the handler reads the body or decodes it (which does not read it), and
// whatever its size (net/http would read up to 256 KiB of it,
// maxPostHandlerReadBytes, until the request's deadline).
func TestDeclaredLengthOverTheLimitIsAnsweredAtOnce(t *testing.T) {
	t.Parallel()
	const timeout = 30 * time.Second
	svc := bodyService(t, fmt.Sprintf("[app]\nrequest_timeout = %q", timeout))
	for _, path := range []string{"/small", "/small.json"} {
		for _, size := range []int{11, 256 << 10, 5000000} {
			conn := dial(t, svc)
			if _, err := fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", path, size); err != nil {
				t.Fatal(err)
			}
			_ = conn.SetReadDeadline(time.Now().Add(timeout / 3)) // well under the request's deadline
			br := bufio.NewReader(conn)
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatalf("%s, Content-Length %d: %v", path, size, err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusRequestEntityTooLarge || !resp.Close {
				t.Errorf("%s, Content-Length %d: status = %d, close = %v; want 413 and Connection: close", path, size, resp.StatusCode, resp.Close)
			}
			if n, err := br.Read(make([]byte, 1)); n != 0 || err != io.EOF {
				t.Errorf("%s, Content-Length %d: after the 413 the connection read %d, %v; want it closed (EOF)", path, size, n, err)
			}
		}
	}
}

func TestMaxBodyBytesMustBePositive(t *testing.T) {
	t.Parallel()
	errs := configErrors(t, jfasttest.Options{TOML: "[app]\nmax_body_bytes = 0"})
	e, ok := errs["app.max_body_bytes"]
	if !ok || !strings.Contains(e.Problem, "must be a positive number of bytes, got 0") || !strings.Contains(e.Fix, "framework.MaxBodyBytes") {
		t.Fatalf("errors = %v", errs)
	}
	defer func() {
		if v := recover(); v == nil || !strings.Contains(fmt.Sprint(v), "framework: MaxBodyBytes needs a positive limit") {
			t.Fatalf("MaxBodyBytes(0) recovered %v", v)
		}
	}()
	framework.MaxBodyBytes(0)
}

type order struct {
	SKU      string `json:"sku"`
	Quantity int    `json:"quantity"`
	Items    []struct {
		Price uint `json:"price"`
	} `json:"items"`
	At time.Time `json:"at"`
}

func TestDecodeJSON(t *testing.T) {
	t.Parallel()
	decode := func(opts ...framework.DecodeOption) http.Handler {
		return framework.Handler(func(w http.ResponseWriter, r *http.Request) error {
			var o order
			if err := framework.DecodeJSON(r, &o, opts...); err != nil {
				return err
			}
			return framework.JSON(w, http.StatusOK, o)
		})
	}
	svc := jfasttest.Start(t, jfasttest.Options{
		Routes: func(_ *framework.App, r chi.Router) error {
			r.Method(http.MethodPost, "/orders", decode())
			r.Method(http.MethodPost, "/strict", decode(framework.DisallowUnknownFields()))
			r.With(framework.MaxBodyBytes(64)).Method(http.MethodPost, "/tiny", decode())
			return nil
		},
	})
	const jsonCT = "application/json"
	tests := []struct {
		name, path, ct, body string
		status               int
		detail               string
		field                string // the "errors" member's first field, when set
	}{
		{"valid", "/orders", jsonCT, `{"sku":"a","quantity":2}`, 200, "", ""},
		{"charset and +json", "/orders", "application/merge-patch+json; charset=utf-8", `{"sku":"a"}`, 200, "", ""},
		{"unknown field ignored", "/orders", jsonCT, `{"sku":"a","colour":"red"}`, 200, "", ""},
		{"form", "/orders", "application/x-www-form-urlencoded", `sku=a`, 415, "this route takes JSON, not application/x-www-form-urlencoded; send the body with \"Content-Type: application/json\"", ""},
		{"no content type", "/orders", "", `{"sku":"a"}`, 415, "the request has no Content-Type; send the body with \"Content-Type: application/json\"", ""},
		{"malformed content type", "/orders", "json;;", `{}`, 415, "the Content-Type is malformed; send the body with \"Content-Type: application/json\"", ""},
		{"too large", "/tiny", jsonCT, `{"sku":"` + strings.Repeat("a", 100) + `"}`, 413, "the request body is larger than the 64 bytes this route accepts", ""},
		{"empty", "/orders", jsonCT, ``, 400, "the request body is empty; it must be a JSON value", ""},
		{"syntax", "/orders", jsonCT, "{\n  \"sku\": \"a\",\n  \"quantity\" 2\n}", 400, "the request body is not valid JSON: invalid character '2' after object key at line 3, column 14", ""},
		{"truncated", "/orders", jsonCT, "{\"sku\": \"a\",\n \"quantity\": 2", 400, "the request body is not valid JSON: it ends in the middle of a value, at line 2, column 15", ""},
		{"two values", "/orders", jsonCT, `{"sku":"a"} {"sku":"b"}`, 400, "the request body holds more than one JSON value: another begins at line 1, column 13", ""},
		{"wrong type", "/orders", jsonCT, `{"sku":"a","quantity":"two"}`, 422, "a field of the request body has the wrong type", "quantity"},
		{"wrong nested type", "/orders", jsonCT, `{"items":[{"price":-1}]}`, 422, "a field of the request body has the wrong type", "items.price"},
		{"not an object", "/orders", jsonCT, `[1,2]`, 422, "the request body must be an object, got array", ""},
		{"bad time", "/orders", jsonCT, `{"at":"yesterday"}`, 422, "a value of the request body does not have the form its field takes", ""},
		{"unknown field refused", "/strict", jsonCT, `{"sku":"a","colour":"red"}`, 422, "the request body has a field this route does not take", "colour"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var headers []string
			if tt.ct != "" {
				headers = []string{"Content-Type", tt.ct}
			}
			r := svc.Do(t, http.MethodPost, tt.path, tt.body, headers...)
			if r.Status != tt.status {
				t.Fatalf("status = %d %s, want %d", r.Status, r.Body, tt.status)
			}
			if tt.status == 200 {
				return
			}
			var p struct {
				Detail string
				Errors []struct{ Field, Detail string }
			}
			if err := json.Unmarshal(r.Body, &p); err != nil || r.Header.Get("Content-Type") != "application/problem+json" {
				t.Fatalf("body %s (%v)", r.Body, err)
			}
			if p.Detail != tt.detail {
				t.Errorf("detail = %q\n      want %q", p.Detail, tt.detail)
			}
			if tt.field != "" && (len(p.Errors) != 1 || p.Errors[0].Field != tt.field) {
				t.Errorf("errors = %+v, want the field %q", p.Errors, tt.field)
			}
		})
	}
	r := svc.Do(t, http.MethodPost, "/orders", `{"sku":"a","quantity":"two"}`, "Content-Type", jsonCT)
	if !strings.Contains(r.String(), `"errors":[{"field":"quantity","detail":"must be an integer, got string"}]`) {
		t.Errorf("wrong type body: %s", r.Body)
	}
}

// TestDecodeJSONRefusesATopLevelNull: a body that is only null, which
// encoding/json would let leave a struct (or a slice, a number) as it was,
// is a 422 naming what the route takes, so the handler never reads a zero
// value the client did not send; a target that can hold null (a pointer, an
// interface, json.RawMessage) still takes it.
func TestDecodeJSONRefusesATopLevelNull(t *testing.T) {
	t.Parallel()
	decode := func(newTarget func() any) http.Handler {
		return framework.Handler(func(w http.ResponseWriter, r *http.Request) error {
			v := newTarget()
			if err := framework.DecodeJSON(r, v); err != nil {
				return err
			}
			return framework.JSON(w, http.StatusOK, v)
		})
	}
	svc := jfasttest.Start(t, jfasttest.Options{
		Routes: func(_ *framework.App, r chi.Router) error {
			r.Method(http.MethodPost, "/struct", decode(func() any { return new(order) }))
			r.Method(http.MethodPost, "/slice", decode(func() any { return new([]int) }))
			r.Method(http.MethodPost, "/pointer", decode(func() any { return new(*order) }))
			r.Method(http.MethodPost, "/any", decode(func() any { return new(any) }))
			r.Method(http.MethodPost, "/raw", decode(func() any { return new(json.RawMessage) }))
			return nil
		},
	})
	tests := []struct {
		path, body string
		status     int
		detail     string
	}{
		{"/struct", `null`, 422, "the request body must be an object, got null"},
		{"/struct", " \n null \t", 422, "the request body must be an object, got null"},
		{"/slice", `null`, 422, "the request body must be an array, got null"},
		{"/struct", `{"sku":null}`, 200, ""}, // a member's null is the field's zero, as encoding/json reads it
		{"/pointer", `null`, 200, ""},
		{"/any", `null`, 200, ""},
		{"/raw", `null`, 200, ""},
	}
	for _, tt := range tests {
		r := svc.Do(t, http.MethodPost, tt.path, tt.body, "Content-Type", "application/json")
		if r.Status != tt.status {
			t.Errorf("%s %q: status %d %s, want %d", tt.path, tt.body, r.Status, r.Body, tt.status)
			continue
		}
		var p struct{ Detail string }
		if tt.detail != "" && (json.Unmarshal(r.Body, &p) != nil || p.Detail != tt.detail) {
			t.Errorf("%s %q: body %s, want the detail %q", tt.path, tt.body, r.Body, tt.detail)
		}
	}
}

// A handler that aborts its response (panic(http.ErrAbortHandler), as a
// reverse proxy does when a body breaks off) has its access log line say
// so: the client got the response cut, or nothing, whatever status was
// written.
func TestAbortedResponseIsLoggedAsAborted(t *testing.T) {
	t.Parallel()
	svc := jfasttest.Start(t, jfasttest.Options{Routes: func(_ *framework.App, r chi.Router) error {
		r.Get("/abort", func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusOK)
			panic(http.ErrAbortHandler)
		})
		return nil
	}})
	if resp, err := http.Get(svc.URL + "/abort"); err == nil {
		_ = resp.Body.Close()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second) // a bound on a failure only
	defer cancel()
	if err := svc.WaitLogs(ctx, func(logs string) bool {
		return strings.Contains(logs, "path=/abort status=200") && strings.Contains(logs, "aborted=true")
	}); err != nil {
		t.Fatalf("no access log line saying the response was aborted:\n%s", svc.Logs())
	}
}
