package http_test

import (
	"errors"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/framework/resilience"
	jhttp "github.com/jfastframework/jfast/plugins/http"
	"github.com/jfastframework/jfast/problem"
)

// trickle returns a streamed request body (no GetBody) that gives one byte
// every 10 ms until the test ends, then fails with failWith when it is not
// nil.
func trickle(t *testing.T, bytes int, failWith error) io.ReadCloser {
	pr, pw := io.Pipe()
	done := make(chan struct{})
	t.Cleanup(func() { close(done) })
	go func() {
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for range bytes {
			select {
			case <-done:
				_ = pw.Close()
				return
			case <-tick.C:
			}
			if _, err := pw.Write([]byte("x")); err != nil {
				return
			}
		}
		_ = pw.CloseWithError(failWith)
	}()
	return pr
}

// A call that fails while the transport waits on the caller's request body,
// or on a read of it that failed, is the caller's: a *RequestBodyError
// rendering as the body's problem (408 when it was late), not retried, and
// no evidence for the breaker, which one failure would open here. A body
// the upstream stops reading is the upstream's failure: the write gap cuts
// it and the breaker opens.
func TestTransportRequestBodyFailures(t *testing.T) {
	t.Parallel()
	broken := errors.New("the caller's reader broke")
	for _, tc := range []struct {
		name    string
		body    func(t *testing.T) io.ReadCloser
		read    bool // the upstream reads the body
		timeout time.Duration
		status  int // the problem's; 0: an upstream failure
		cause   error
	}{
		// 100 bytes at 10 ms each: 1 s, past the 200 ms timeout.
		{"late, the call's timeout passes", func(t *testing.T) io.ReadCloser { return trickle(t, 100, nil) }, true, 200 * time.Millisecond, 408, os.ErrDeadlineExceeded},
		// A failure that is not the framework's BodyReadError is the
		// caller's own error: problem.From's 500.
		{"a read of it fails", func(t *testing.T) io.ReadCloser { return trickle(t, 3, broken) }, true, noTotal, 500, broken},
		// An endless body the upstream never reads: the socket's buffers
		// fill and the 100 ms write gap cuts the write.
		{"the upstream stops reading", func(*testing.T) io.ReadCloser { return io.NopCloser(endless{}) }, false, noTotal, 0, os.ErrDeadlineExceeded},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			release := make(chan struct{})
			up := newUpstream(t, func(w http.ResponseWriter, r *http.Request, _ int) {
				if tc.read {
					_, _ = io.Copy(io.Discard, r.Body)
					return
				}
				<-release
			})
			t.Cleanup(func() { close(release) }) // before up.Close, which waits for the handler
			c, _, _ := newClient(t, jhttp.Upstream{BaseURL: up.URL, WriteTimeout: 100 * time.Millisecond, ReadTimeout: noTotal,
				PolicyConfig: resilience.PolicyConfig{Timeout: tc.timeout, Attempts: 3,
					BreakerConfig: resilience.BreakerConfig{BreakerFailures: 1}}})
			req, _ := http.NewRequest(http.MethodPut, up.URL+"/upload", tc.body(t))
			_, err := c.Transport().RoundTrip(req)
			if !errors.Is(err, tc.cause) {
				t.Errorf("err = %v, want it caused by %v", err, tc.cause)
			}
			var rb *jhttp.RequestBodyError
			if tc.status == 0 {
				wantGapCut(t, err, "write")
				if errors.As(err, &rb) {
					t.Fatalf("err = %v: an upstream that stops reading blamed on the caller", err)
				}
				if s := c.Breaker().Snapshot().State; s != resilience.StateOpen {
					t.Errorf("breaker %s, want open: an upstream that stops reading failed", s)
				}
				return
			}
			if !errors.As(err, &rb) || rb.Upstream != "billing" {
				t.Fatalf("err = %v (%T), want a RequestBodyError naming billing", err, err)
			}
			if p := problem.From(err); p.Status != tc.status {
				t.Errorf("problem %d, want %d", p.Status, tc.status)
			}
			if tc.status == 408 {
				var be *framework.BodyReadError
				if !errors.As(err, &be) || be.Status != 408 {
					t.Errorf("err = %v, want a 408 framework.BodyReadError inside", err)
				}
			}
			if s := c.Breaker().Snapshot().State; s != resilience.StateClosed {
				t.Errorf("breaker %s, want closed: the caller's body says nothing of the upstream", s)
			}
			if n := up.hits.Load(); n > 1 {
				t.Errorf("the upstream got %d requests, want at most 1 (no retry)", n)
			}
		})
	}
}

// endless is a reader that never ends.
type endless struct{}

func (endless) Read(p []byte) (int, error) {
	copy(p, strings.Repeat("x", len(p)))
	return len(p), nil
}
