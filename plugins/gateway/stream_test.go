package gateway_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"net/textproto"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jfastframework/jfast/framework"
)

// hundredMB is the size of the bodies streamed through the gateway.
const hundredMB = 100 << 20

// heapPeak samples the heap in use every few milliseconds until stop is
// called, and returns the largest growth over the heap in use when it began.
func heapPeak(t *testing.T) (stop func() uint64) {
	t.Helper()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	base := ms.HeapInuse
	var peak atomic.Uint64
	done, finished := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(finished)
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				var ms runtime.MemStats
				runtime.ReadMemStats(&ms)
				if ms.HeapInuse > base && ms.HeapInuse-base > peak.Load() {
					peak.Store(ms.HeapInuse - base)
				}
			}
		}
	}()
	return func() uint64 {
		close(done)
		<-finished
		return peak.Load()
	}
}

// maxGrowth is the heap growth a 100 MB transfer may cause in this whole
// test process (upstream, gateway and client together): a few copy buffers
// and the requests' own structures, nothing proportional to the body.
const maxGrowth = 8 << 20

// A 100 MB download and a 100 MB upload go through the gateway without the
// process's heap growing by more than a few MB: neither body is buffered.
func TestStreamsHundredMegabytesBothWays(t *testing.T) {
	if testing.Short() {
		t.Skip("moves 200 MB")
	}
	chunk := []byte(strings.Repeat("0123456789abcdef", 2048)) // 32 KiB
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			n, err := io.Copy(io.Discard, r.Body)
			if err != nil {
				w.WriteHeader(400)
				return
			}
			_, _ = io.WriteString(w, strconv.FormatInt(n, 10))
			return
		}
		w.Header().Set("Content-Length", strconv.Itoa(hundredMB))
		for sent := 0; sent < hundredMB; sent += len(chunk) {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	})
	svc := gatewayService(t, "[app]\nrequest_timeout = \"120s\"\n"+upstreamTOML("files", up.URL,
		`timeout = "120s"`, "max_response_bytes = 209715200")+`
[plugin.gateway.routes.files]
prefix = "/files"
upstream = "files"
max_body_bytes = 209715200
`)
	client := &http.Client{Timeout: 120 * time.Second}

	stop := heapPeak(t)
	resp, err := client.Get(svc.URL + "/files/big")
	if err != nil {
		t.Fatal(err)
	}
	n, err := io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	growth := stop()
	if err != nil || n != hundredMB {
		t.Fatalf("download: %d bytes, %v", n, err)
	}
	t.Logf("download of %d MB: heap grew by at most %.1f MB", hundredMB>>20, float64(growth)/(1<<20))
	if growth > maxGrowth {
		t.Errorf("download: the heap grew by %.1f MB, want at most %d MB", float64(growth)/(1<<20), maxGrowth>>20)
	}

	stop = heapPeak(t)
	req, _ := http.NewRequest(http.MethodPost, svc.URL+"/files/up", io.LimitReader(zeros{}, hundredMB))
	req.ContentLength = hundredMB
	resp, err = client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	growth = stop()
	if resp.StatusCode != 200 || string(body) != strconv.Itoa(hundredMB) {
		t.Fatalf("upload: %d %q", resp.StatusCode, body)
	}
	t.Logf("upload of %d MB: heap grew by at most %.1f MB", hundredMB>>20, float64(growth)/(1<<20))
	if growth > maxGrowth {
		t.Errorf("upload: the heap grew by %.1f MB, want at most %d MB", float64(growth)/(1<<20), maxGrowth>>20)
	}
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// sseService proxies /events (a stream route) to an upstream whose read gap
// is 300ms and timeout 700ms, behind a request_timeout of 500ms: a
// stream outlives both.
func sseService(t *testing.T, h http.HandlerFunc) string {
	t.Helper()
	up := newUpstream(t, h)
	svc := gatewayService(t, "[app]\nrequest_timeout = \"500ms\"\n"+upstreamTOML("events", up.URL,
		`read_timeout = "300ms"`, `timeout = "700ms"`, "attempts = 1")+`
[plugin.gateway.routes.events]
prefix = "/events"
upstream = "events"
stream = true
`)
	return svc.URL
}

// A server-sent events stream that keeps sending is not cut, though it
// lasts far longer than the read gap, the upstream's timeout and
// app.request_timeout: each event arrives as it is sent, and the upstream
// is not told to stop (no Jfast-Timeout-Ms).
func TestSSEKeepsFlowing(t *testing.T) {
	t.Parallel()
	const events = 15
	url := sseService(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		rc := http.NewResponseController(w)
		for i := range events {
			fmt.Fprintf(w, "data: %d\n\n", i)
			_ = rc.Flush()
			time.Sleep(100 * time.Millisecond) // 1.5 s in all: 5 read gaps, 2 timeouts, 3 request timeouts
		}
		if h := r.Header.Get(framework.TimeoutHeader); h != "" {
			t.Errorf("the stream's upstream was sent %s: %s", framework.TimeoutHeader, h)
		}
	})
	resp, err := http.Get(url + "/events")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	got := 0
	for sc.Scan() {
		if line := sc.Text(); strings.HasPrefix(line, "data: ") {
			if line != "data: "+strconv.Itoa(got) {
				t.Fatalf("event %d: %q", got, line)
			}
			got++
		}
	}
	if err := sc.Err(); err != nil || got != events {
		t.Fatalf("got %d events of %d, then %v", got, events, err)
	}
}

// A stream whose upstream goes silent is cut at the upstream's read gap: the
// client sees the events sent so far, then the connection ends without the
// stream's end, and the upstream's request is cancelled.
func TestSilentStreamIsCutAtTheReadGap(t *testing.T) {
	t.Parallel()
	cancelled := make(chan struct{})
	url := sseService(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "data: 0\n\ndata: 1\n\n")
		_ = http.NewResponseController(w).Flush()
		<-r.Context().Done() // silent until the gateway lets go
		close(cancelled)
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second) // generous: a loaded machine
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url+"/events", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if string(b) != "data: 0\n\ndata: 1\n\n" {
		t.Fatalf("read %q before the cut", b)
	}
	if err == nil || ctx.Err() != nil {
		t.Fatalf("the silent stream ended with %v (test context: %v), want a cut connection", err, ctx.Err())
	}
	select {
	case <-cancelled:
	case <-time.After(20 * time.Second):
		t.Fatal("the upstream request was not cancelled")
	}
}

// timeout still bounds a stream route's wait for the response headers:
// an upstream that reads the request and answers nothing for longer than
// timeout (its read gap is longer still) gets the gateway's 503
// problem, not an answer after it.
func TestStreamRouteHeadersAreBoundedByTotalTimeout(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "data: late\n\n")
	})
	t.Cleanup(func() { close(release) })
	svc := gatewayService(t, upstreamTOML("events", up.URL,
		`read_timeout = "30s"`, `timeout = "300ms"`, "attempts = 1")+`
[plugin.gateway.routes.events]
prefix = "/events"
upstream = "events"
stream = true
`)
	resp, err := http.Get(svc.URL + "/events")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("status %d, body %s: want the upstream's timeout to end the wait", resp.StatusCode, b)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/problem+json" {
		t.Fatalf("content type %q, body %s", ct, b)
	}
}

// A stream the App's drain cuts while its client still reads ends without
// the body's end: the connection closes with no last chunk, so the client
// cannot take a cut download for a complete one.
func TestDrainCutStreamIsAborted(t *testing.T) {
	t.Parallel()
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "part 1\n")
		_ = http.NewResponseController(w).Flush()
		<-r.Context().Done() // the rest never comes before the drain
	})
	svc := gatewayService(t, upstreamTOML("files", up.URL, "attempts = 1")+`
[plugin.gateway.routes.files]
prefix = "/files"
upstream = "files"
stream = true
`)
	resp, err := http.Get(svc.URL + "/files/big")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	if line, err := br.ReadString('\n'); line != "part 1\n" {
		t.Fatalf("read %q, %v", line, err)
	}
	stopped := make(chan error, 1)
	go func() { stopped <- svc.App.Stop(context.Background()) }()
	rest, err := io.ReadAll(br)
	if err == nil {
		t.Fatalf("the drained stream ended cleanly after %q: want the connection cut without its last chunk", rest)
	}
	if err := <-stopped; err != nil {
		t.Fatal(err)
	}
}

// A stream route's answer reaches the client however late it comes, with
// or without a body: the framework sets the connection's write deadline to
// the request's deadline plus framework.WriteGrace, and net/http writes a
// bodiless answer's headers (a 204, a 304, an empty 200, a HEAD's, and an
// interim 103 at once) with no Write or Flush to move it. The request's
// deadline is made short here, by request_timeout and by the caller's
// Jfast-Timeout-Ms (which does not shorten a stream route), and the
// upstream answers once that deadline and its grace have passed: the
// upstream hears the request after the framework set the deadline, so
// waiting as long from then is waiting past it.
func TestStreamRouteLateAnswerWithoutABodyReachesTheClient(t *testing.T) {
	t.Parallel()
	const short = 50 * time.Millisecond
	late := short + framework.WriteGrace
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-time.After(late):
		case <-r.Context().Done():
			return
		}
		switch r.URL.Path {
		case "/lp/204":
			w.WriteHeader(http.StatusNoContent)
		case "/lp/304":
			w.WriteHeader(http.StatusNotModified)
		case "/lp/empty":
			w.WriteHeader(http.StatusOK)
		case "/lp/103":
			w.Header().Set("Link", "</a.css>; rel=preload")
			w.WriteHeader(http.StatusEarlyHints)
			w.WriteHeader(http.StatusNoContent)
		default: // a body, and a HEAD's length without it
			_, _ = io.WriteString(w, "hello")
		}
	})
	route := upstreamTOML("lp", up.URL, `read_timeout = "30s"`, `timeout = "30s"`, "attempts = 1") + `
[plugin.gateway.routes.lp]
prefix = "/lp"
upstream = "lp"
stream = true
`
	byConfig := gatewayService(t, fmt.Sprintf("[app]\nrequest_timeout = %q\n", short)+route)
	byCaller := gatewayService(t, route)
	for _, tc := range []struct {
		name, method, path string
		status             int
		body               string
		interim            bool
	}{
		{"204", http.MethodGet, "/lp/204", http.StatusNoContent, "", false},
		{"304", http.MethodGet, "/lp/304", http.StatusNotModified, "", false},
		{"empty 200", http.MethodGet, "/lp/empty", http.StatusOK, "", false},
		{"HEAD", http.MethodHead, "/lp/body", http.StatusOK, "", false},
		{"103 then 204", http.MethodGet, "/lp/103", http.StatusNoContent, "", true},
		{"a body", http.MethodGet, "/lp/body", http.StatusOK, "hello", false},
	} {
		for _, svc := range []struct {
			name    string
			url     string
			headers []string
		}{
			{"request_timeout", byConfig.URL, nil},
			{"Jfast-Timeout-Ms", byCaller.URL, []string{framework.TimeoutHeader, strconv.Itoa(int(short.Milliseconds()))}},
		} {
			t.Run(tc.name+" after "+svc.name, func(t *testing.T) {
				t.Parallel()
				interim := false
				trace := &httptrace.ClientTrace{Got1xxResponse: func(code int, h textproto.MIMEHeader) error {
					interim = interim || code == http.StatusEarlyHints && h.Get("Link") != ""
					return nil
				}}
				ctx, cancel := context.WithTimeout(httptrace.WithClientTrace(t.Context(), trace), 30*time.Second) // generous: a loaded machine
				defer cancel()
				req, _ := http.NewRequestWithContext(ctx, tc.method, svc.url+tc.path, nil)
				for i := 0; i < len(svc.headers); i += 2 {
					req.Header.Set(svc.headers[i], svc.headers[i+1])
				}
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatalf("an answer past the request's deadline and its %s grace never reached the client: %v", framework.WriteGrace, err)
				}
				b, err := io.ReadAll(resp.Body)
				_ = resp.Body.Close()
				if err != nil || resp.StatusCode != tc.status || string(b) != tc.body {
					t.Fatalf("got %d %q (%v), want %d %q", resp.StatusCode, b, err, tc.status, tc.body)
				}
				if interim != tc.interim {
					t.Errorf("the upstream's 103 reached the client: %v, want %v", interim, tc.interim)
				}
			})
		}
	}
}

// A stream route's chunked body whose end comes long after its last byte
// (a long poll that sends its headers at once) ends cleanly: net/http
// writes the body's end after the handler returns, with no Write or Flush
// to move the write deadline that the last byte's write set
// (stream_write_timeout from then). The upstream ends the body once the
// client has read its first part and stream_write_timeout has passed.
func TestStreamRouteLateEndOfABodyReachesTheClient(t *testing.T) {
	t.Parallel()
	const gap = 200 * time.Millisecond
	read := make(chan struct{})
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "part\n")
		_ = http.NewResponseController(w).Flush()
		select {
		case <-read:
		case <-r.Context().Done():
			return
		}
		select {
		case <-time.After(gap):
		case <-r.Context().Done():
		}
	})
	svc := gatewayService(t, fmt.Sprintf("[plugin.gateway]\nstream_write_timeout = %q\n", gap)+
		upstreamTOML("lp", up.URL, `read_timeout = "30s"`, "attempts = 1")+`
[plugin.gateway.routes.lp]
prefix = "/lp"
upstream = "lp"
stream = true
`)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second) // generous: a loaded machine
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, svc.URL+"/lp/poll", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	if line, err := br.ReadString('\n'); line != "part\n" {
		t.Fatalf("read %q, %v", line, err)
	}
	close(read)
	if rest, err := io.ReadAll(br); err != nil || len(rest) != 0 {
		t.Fatalf("after its first part the body ended with %q, %v: want its clean end", rest, err)
	}
}
