package framework_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/jfasttest"
)

// echoService answers every POST with the body it read, every GET with "ok".
func echoService(t *testing.T) *jfasttest.Service {
	t.Helper()
	return jfasttest.Start(t, jfasttest.Options{Routes: func(_ *framework.App, r chi.Router) error {
		r.Post("/echo", func(w http.ResponseWriter, r *http.Request) {
			b, _ := io.ReadAll(r.Body)
			_, _ = w.Write(b)
		})
		r.Get("/ok", func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "ok") })
		return nil
	}})
}

// send writes raw to a new connection to svc and reads n responses.
func send(t *testing.T, svc *jfasttest.Service, raw string, n int) ([]*http.Response, []string, *bufio.Reader) {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(svc.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := io.WriteString(conn, raw); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(conn)
	var resps []*http.Response
	var bodies []string
	for i := range n {
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("response %d: %v", i+1, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resps, bodies = append(resps, resp), append(bodies, string(b))
	}
	return resps, bodies, br
}

// net/http reads a request with both Content-Length and Transfer-Encoding
// by its chunks and keeps the connection open; RFC 9112 §6.3 requires it
// closed. The framework answers such a request 400 problem+json and closes
// the connection; the request before it on the connection is served, and
// the bytes after it are never read as a request.
func TestAmbiguousFramingRefused(t *testing.T) {
	t.Parallel()
	svc := echoService(t)
	smuggled := "GET /ok HTTP/1.1\r\nHost: x\r\n\r\n"
	raw := "GET /ok HTTP/1.1\r\nHost: x\r\n\r\n" +
		"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\ntransfer-encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n" +
		smuggled
	resps, bodies, br := send(t, svc, raw, 2)
	if resps[0].StatusCode != 200 || bodies[0] != "ok" {
		t.Errorf("the request before: %d %q", resps[0].StatusCode, bodies[0])
	}
	if r := resps[1]; r.StatusCode != 400 || r.Header.Get("Content-Type") != "application/problem+json" || !r.Close ||
		!strings.Contains(bodies[1], "Content-Length and Transfer-Encoding") {
		t.Errorf("both headers: %d %s close=%v %s, want a 400 problem closing the connection", r.StatusCode, r.Header.Get("Content-Type"), r.Close, bodies[1])
	}
	if b, err := br.ReadByte(); err != io.EOF {
		t.Errorf("after the 400 the connection gave %q, %v: want it closed", b, err)
	}
}

// The framing is followed across bodies: requests with a Content-Length
// body, a chunked body (with an extension and a trailer) and none, one
// after another on one connection, are all served — including bodies whose
// bytes look like the headers refused.
func TestFramingFollowedAcrossBodies(t *testing.T) {
	t.Parallel()
	svc := echoService(t)
	looksAmbiguous := "X\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n"
	chunked := fmt.Sprintf("%x;ext=1\r\n%s\r\n0\r\nX-Trailer: 1\r\n\r\n", len(looksAmbiguous), looksAmbiguous)
	raw := fmt.Sprintf("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s", len(looksAmbiguous), looksAmbiguous) +
		"POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n" + chunked +
		"\r\nGET /ok HTTP/1.1\r\nHost: x\r\n\r\n" +
		"GET /ok HTTP/1.0\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
	resps, bodies, _ := send(t, svc, raw, 4)
	for i, want := range []string{looksAmbiguous, looksAmbiguous, "ok", "ok"} {
		if resps[i].StatusCode != 200 || bodies[i] != want {
			t.Errorf("request %d: %d %q, want 200 %q", i+1, resps[i].StatusCode, bodies[i], want)
		}
	}
}

// A head is followed the same whether it comes in one read or a few bytes
// at a time: a line read whole and a line gathered over several reads are
// judged alike (bodies skipped by length and by chunks, long lines, an
// HTTP/1.0 request whose Transfer-Encoding frames nothing, header names
// only near the two refused together).
func TestFramingSameInAnyReads(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("a", 70)
	body := "X: 1\r\nContent-Length: 3\r\nTransfer-Encoding: x\r\n\r\n" // a body that looks like a head
	cases := []struct {
		name               string
		stream             string
		heads, ambiguousAt int64
	}{
		{"one head", "GET /ok HTTP/1.1\r\nHost: x\r\n\r\n", 1, 0},
		{"both headers", "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\ntransfer-encoding: chunked\r\n\r\n", 1, 1},
		{"after a body", fmt.Sprintf("POST /echo HTTP/1.1\r\nContent-Length: %d\r\n\r\n%s", len(body), body) +
			"GET /" + long + " HTTP/1.1\r\nX-Long: " + long + "\r\nCONTENT-LENGTH:  0\r\nTransfer-Encoding: chunked\r\n\r\n", 2, 2},
		{"after chunks", "\r\nPOST /echo HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n" +
			"5;ext=1\r\nab\r\nc\r\n0\r\nX-Trailer: 1\r\n\r\n" +
			"GET /ok HTTP/1.1\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n", 2, 2},
		{"HTTP/1.0", "GET /" + long + " HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\nGET /ok HTTP/1.1\r\n\r\n", 2, 0},
		{"near names", "GET /ok HTTP/1.1\r\nContent-Lengths: 1\r\nTransfer-Encodings: x\r\ncontent-length : 1\r\nTransfer-Encoding\r\n\r\n", 1, 0},
	}
	for _, c := range cases {
		for _, n := range []int{0, 1, 2, 3, 7, 40} {
			heads, at := framework.FollowFraming([]byte(c.stream), n)
			if heads != c.heads || at != c.ambiguousAt {
				t.Errorf("%s, reads of %d bytes: %d heads, ambiguous at %d; want %d, %d", c.name, n, heads, at, c.heads, c.ambiguousAt)
			}
		}
	}
}

// What net/http reads that the follower might not: a Content-Length with
// leading zeros is followed as the number it is; one padded past the line
// the follower holds, or folded onto the next line, and a request after a
// chunk size over 16 hex digits, cannot be followed, so the request is
// refused 400 and the connection closed, never served on bytes the
// framework cannot frame. "OPTIONS *", which net/http would answer itself
// without the framework counting it, is counted and answered 200.
func TestFramingNetHTTPReadsIsFollowedOrRefused(t *testing.T) {
	t.Parallel()
	svc := echoService(t)
	const tail = "\r\n0\r\n\r\nGET /ok HTTP/1.1\r\nHost: x\r\n\r\n"
	const ambiguous = "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n" + tail
	// Its request line starts with hex digits ("DE"), which a follower
	// that took it for a chunk size would skip.
	const ambiguousDelete = "DELETE /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n" + tail
	for _, tc := range []struct {
		name, raw string
		served    int    // responses of 200 before the refusal
		says      string // the refusal's detail
	}{
		{"leading zeros", "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 0000000000000000000000004\r\nTransfer-Encoding: chunked\r\n" + tail, 0, "Content-Length and Transfer-Encoding"},
		{"padded", "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length:" + strings.Repeat(" ", 40) + "4\r\nTransfer-Encoding: chunked\r\n" + tail, 0, "cannot be followed"},
		{"folded", "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length:\r\n 4\r\nTransfer-Encoding: chunked\r\n" + tail, 0, "cannot be followed"},
		{"tabs after chunked", "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nContent-Length:" + strings.Repeat("\t", 32) + "4\r\n" + tail, 0, "cannot be followed"},
		{"after leading zeros", "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 00000000000000000000004\r\n\r\nabcd" + ambiguous, 1, "Content-Length and Transfer-Encoding"},
		{"after 16 hex digits", "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n0000000000000002\r\nab\r\n0\r\n\r\n" + ambiguous, 1, "Content-Length and Transfer-Encoding"},
		{"after OPTIONS *", "OPTIONS * HTTP/1.1\r\nHost: x\r\n\r\n" + ambiguous, 1, "Content-Length and Transfer-Encoding"},
		// After a POST net/http discards up to 4 CR or LF bytes before the
		// next request line; taken for a line, "\r\r" would hide the
		// HTTP/1.0 of the next one, whose Transfer-Encoding then frames
		// nothing for the server and a chunk for the follower.
		{"CRs after a POST", "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n\r\r\n" +
			"GET /ok HTTP/1.0\r\nHost: x\r\nConnection: keep-alive\r\nTransfer-Encoding: chunked\r\n\r\n" + ambiguousDelete, 2, "Content-Length and Transfer-Encoding"},
		{"CRs after a chunked POST", "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n\r\r\r\n" +
			"GET /ok HTTP/1.0\r\nHost: x\r\nConnection: keep-alive\r\nTransfer-Encoding: chunked\r\n\r\n" + ambiguousDelete, 2, "Content-Length and Transfer-Encoding"},
	} {
		resps, bodies, br := send(t, svc, tc.raw, tc.served+1)
		for i := range tc.served {
			if resps[i].StatusCode != 200 {
				t.Errorf("%s: request %d: %d %q, want 200", tc.name, i+1, resps[i].StatusCode, bodies[i])
			}
		}
		if r := resps[tc.served]; r.StatusCode != 400 || !r.Close || !strings.Contains(bodies[tc.served], tc.says) {
			t.Errorf("%s: %d close=%v %s; want a 400 saying %q, closing the connection", tc.name, r.StatusCode, r.Close, bodies[tc.served], tc.says)
		}
		if b, err := br.ReadByte(); err != io.EOF {
			t.Errorf("%s: after the 400 the connection gave %q, %v: want it closed", tc.name, b, err)
		}
	}
}

// The refusal is an answer like any other: the client's request ID echoed
// and in the problem, and an access log line with its 400.
func TestFramingRefusalHasTheRequestIDAndALogLine(t *testing.T) {
	t.Parallel()
	svc := echoService(t)
	resps, bodies, _ := send(t, svc, "POST /echo HTTP/1.1\r\nHost: x\r\nX-Request-ID: abc-1\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n", 1)
	if r := resps[0]; r.StatusCode != 400 || r.Header.Get("X-Request-Id") != "abc-1" || !strings.Contains(bodies[0], `"request_id":"abc-1"`) {
		t.Fatalf("%d X-Request-Id %q %s; want the 400 with the request ID echoed and in the problem", r.StatusCode, r.Header.Get("X-Request-Id"), bodies[0])
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second) // a bound on a failure only
	defer cancel()
	if err := svc.WaitLogs(ctx, func(logs string) bool { return strings.Contains(logs, "path=/echo status=400") }); err != nil {
		t.Fatalf("no access log line for the refused request:\n%s", svc.Logs())
	}
}
