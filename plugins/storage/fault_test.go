package storage_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	"github.com/jfastframework/jfast/framework/resilience"
	"github.com/jfastframework/jfast/plugins/storage"
	"github.com/jfastframework/jfast/problem"
)

// Faults that must be scripted byte by byte run against gofakes3 (an in-process
// S3) behind a middleware that slows, stalls or fails its responses; everything
// else runs against the real versitygw.

type faultMode int32

const (
	faultNone  faultMode = iota
	faultSlow            // object bodies in 16 KiB pieces, 100 ms apart
	faultStall           // object bodies stop after the first write until the client leaves
	faultHang            // no response at all until the client leaves
	fault503             // 503 ServiceUnavailable to everything (not throttling: short backoff)
	fault500             // 500 InternalError to everything
	faultFlaky           // every other request (the 1st, the 3rd…) a 503 after reading its body; the others served
)

type faultServer struct {
	*httptest.Server
	mode     atomic.Int32
	requests atomic.Int64
}

func newFaultServer(t *testing.T) *faultServer {
	t.Helper()
	fs := &faultServer{}
	s3 := gofakes3.New(s3mem.New(), gofakes3.WithAutoBucket(true)).Server()
	fs.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := fs.requests.Add(1)
		mode := faultMode(fs.mode.Load())
		if mode == faultFlaky && n%2 == 1 {
			_, _ = io.Copy(io.Discard, r.Body)
			mode = fault503
		}
		switch mode {
		case faultSlow:
			if r.Method == http.MethodGet {
				s3.ServeHTTP(&pacedWriter{ResponseWriter: w, piece: 16 << 10, every: 100 * time.Millisecond}, r)
				return
			}
		case faultStall:
			if r.Method == http.MethodGet {
				s3.ServeHTTP(&pacedWriter{ResponseWriter: w, piece: 64 << 10, stallAfter: 1, ctx: r.Context()}, r)
				return
			}
		case faultHang:
			// The request's context ends when the client leaves only once
			// its body has been read.
			_, _ = io.Copy(io.Discard, r.Body)
			<-r.Context().Done()
			return
		case fault503:
			w.Header().Set("Content-Type", "application/xml")
			w.WriteHeader(http.StatusServiceUnavailable)
			io.WriteString(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>ServiceUnavailable</Code><Message>Service is unable to handle request.</Message></Error>`)
			return
		case fault500:
			w.Header().Set("Content-Type", "application/xml")
			w.WriteHeader(http.StatusInternalServerError)
			io.WriteString(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>InternalError</Code><Message>We encountered an internal error.</Message></Error>`)
			return
		}
		s3.ServeHTTP(w, r)
	}))
	t.Cleanup(func() {
		fs.CloseClientConnections()
		fs.Close()
	})
	return fs
}

func (fs *faultServer) set(m faultMode) { fs.mode.Store(int32(m)) }

// pacedWriter writes a body in pieces: every 'every', or stopping after
// stallAfter pieces until ctx ends.
type pacedWriter struct {
	http.ResponseWriter
	piece      int
	every      time.Duration
	stallAfter int
	ctx        context.Context
	pieces     int
}

func (p *pacedWriter) Write(b []byte) (int, error) {
	written := 0
	for len(b) > 0 {
		if p.stallAfter > 0 && p.pieces >= p.stallAfter {
			<-p.ctx.Done()
			return written, p.ctx.Err()
		}
		if p.every > 0 && p.pieces > 0 {
			time.Sleep(p.every)
		}
		n := min(len(b), p.piece)
		m, err := p.ResponseWriter.Write(b[:n])
		written += m
		if err != nil {
			return written, err
		}
		p.ResponseWriter.(http.Flusher).Flush()
		b = b[n:]
		p.pieces++
	}
	return written, nil
}

func startFault(t *testing.T, extra ...string) (setup, *faultServer) {
	t.Helper()
	fs := newFaultServer(t)
	return start(t, s3TOML(fs.URL, "faults", extra...), "files", nil), fs
}

func TestS3SlowDownloadIsNotCut(t *testing.T) {
	t.Parallel()
	s, fs := startFault(t, `read_timeout = "300ms"`)
	want := bytes.Repeat([]byte("0123456789abcdef"), 16<<10) // 256 KiB: 16 pieces, 1.5 s
	if err := s.disk.Put(context.Background(), "slow", bytes.NewReader(want), ""); err != nil {
		t.Fatal(err)
	}
	fs.set(faultSlow)
	t0 := time.Now()
	obj, err := s.disk.Get(context.Background(), "slow")
	if err != nil {
		t.Fatal(err)
	}
	defer obj.Close()
	got, err := io.ReadAll(obj)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("slow download cut after %s: %d bytes, %v", time.Since(t0), len(got), err)
	}
	if el := time.Since(t0); el < time.Second {
		t.Fatalf("download took %s: it was not slow", el)
	}
}

func TestS3StalledDownloadFailsAfterTheGap(t *testing.T) {
	t.Parallel()
	s, fs := startFault(t, `read_timeout = "300ms"`)
	if err := s.disk.Put(context.Background(), "stall", bytes.NewReader(make([]byte, 1<<20)), ""); err != nil {
		t.Fatal(err)
	}
	fs.set(faultStall)
	obj, err := s.disk.Get(context.Background(), "stall")
	if err != nil {
		t.Fatal(err)
	}
	defer obj.Close()
	t0 := time.Now()
	n, err := io.Copy(io.Discard, obj)
	el := time.Since(t0)
	var ne net.Error
	if err == nil || !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("stalled body: read %d bytes, err %v", n, err)
	}
	if n == 0 || n >= 1<<20 || el > 2*time.Second {
		t.Fatalf("stalled body: read %d bytes in %s", n, el)
	}
}

func TestS3ServerErrorsAreRetriedThenOpenTheBreaker(t *testing.T) {
	t.Parallel()
	// The retry budget (the policy's) lets every call's retries through:
	// the test counts the attempts of each call.
	s, fs := startFault(t, `attempts = 3`, `retry_budget_min_per_second = 100`, `breaker_failures = 2`, `breaker_cool_down = "20s"`)
	s.clock.SetAutoAdvance(true) // the backoff between attempts waits on the test clock
	fs.set(fault503)
	for i := range 2 {
		err := s.disk.Put(context.Background(), "k", strings.NewReader("v"), "")
		var de *problem.DependencyError
		if !errors.As(err, &de) || de.Dependency != "storage" {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	if got := fs.requests.Load(); got != 6 {
		t.Fatalf("%d requests, want 2 calls × 3 attempts", got)
	}
	_, err := s.disk.Get(context.Background(), "k")
	if !errors.Is(err, resilience.ErrOpen) || fs.requests.Load() != 6 {
		t.Fatalf("open breaker: %v after %d requests", err, fs.requests.Load())
	}
}

// A 500 InternalError is retried like any 5xx (the SDK's rule), but it is
// an answer: S3 is up, and the breaker follows the rule every plugin shares
// (resilience.HTTPOutcome), so no run of 500s opens it.
func TestS3InternalErrorsAreRetriedButKeepTheBreakerClosed(t *testing.T) {
	t.Parallel()
	s, fs := startFault(t, `attempts = 3`, `retry_budget_min_per_second = 100`, `breaker_failures = 2`, `breaker_cool_down = "20s"`)
	s.clock.SetAutoAdvance(true) // the backoff between attempts waits on the test clock
	fs.set(fault500)
	for i := range 3 {
		err := s.disk.Put(context.Background(), "k", strings.NewReader("v"), "")
		if err == nil || errors.Is(err, resilience.ErrOpen) {
			t.Fatalf("call %d: %v, want S3's error", i, err)
		}
	}
	if got := fs.requests.Load(); got != 9 {
		t.Fatalf("%d requests, want 3 calls × 3 attempts", got)
	}
}

func TestS3MissingObjectsDoNotOpenTheBreaker(t *testing.T) {
	t.Parallel()
	s, _ := startFault(t, `breaker_failures = 2`)
	for range 5 {
		if _, err := s.disk.Get(context.Background(), "missing"); !errors.Is(err, storage.ErrNotExist) {
			t.Fatalf("get missing: %v", err)
		}
	}
	if st := s.disk.Breaker().Snapshot(); st.State != resilience.StateClosed || st.WindowFailures != 0 {
		t.Fatalf("breaker = %+v", st)
	}
}

// A failed half-open probe reopens the breaker for a full cool-down; a probe
// that succeeds closes it.
func TestS3HalfOpenProbe(t *testing.T) {
	t.Parallel()
	s, fs := startFault(t, `attempts = 1`, `breaker_failures = 1`, `breaker_cool_down = "15s"`)
	ctx := context.Background()
	fs.set(fault503)
	_ = s.disk.Put(ctx, "k", strings.NewReader("v"), "")
	if st := s.disk.Breaker().Snapshot().State; st != resilience.StateOpen {
		t.Fatalf("state = %s", st)
	}
	s.clock.Advance(15 * time.Second)
	before := fs.requests.Load()
	if err := s.disk.Put(ctx, "k", strings.NewReader("v"), ""); err == nil || errors.Is(err, resilience.ErrOpen) {
		t.Fatalf("probe: %v", err)
	}
	if fs.requests.Load() != before+1 {
		t.Fatal("the probe did not reach S3")
	}
	snap := s.disk.Breaker().Snapshot()
	if snap.State != resilience.StateOpen || snap.RetryAfter != 15*time.Second {
		t.Fatalf("after a failed probe: %+v", snap)
	}
	fs.set(faultNone)
	s.clock.Advance(15 * time.Second)
	if err := s.disk.Put(ctx, "k", strings.NewReader("v"), ""); err != nil {
		t.Fatalf("probe after healing: %v", err)
	}
	if st := s.disk.Breaker().Snapshot().State; st != resilience.StateClosed {
		t.Fatalf("state after a good probe = %s", st)
	}
}

// Whose deadline ended the operation decides what the breaker learns
// (docs/resilience.md, "Whose deadline was it?"). Against an S3 that accepts
// and never answers, with read_timeout = 300ms and the default connect_timeout
// (5 s): a caller that cancels, and callers whose deadline (50 ms) cut the
// operation after less silence than connect_timeout, are no evidence however
// many they are — each still a 503 storage dependency error for the deadline,
// a plain context.Canceled for the cancel — while operations cut by the read
// gap with the caller still waiting count: the first, with nothing answered
// meanwhile, opens the breaker at once (the silence rule) and the next
// operation is refused.
func TestS3CallerCancellationAndDeadline(t *testing.T) {
	t.Parallel()
	s, fs := startFault(t, `read_timeout = "300ms"`, `attempts = 1`, `breaker_failures = 2`)
	fs.set(faultHang)

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		time.Sleep(100 * time.Millisecond)
		cancel()
	})
	_, err := s.disk.Get(ctx, "k")
	wg.Wait()
	var de *problem.DependencyError
	if !errors.Is(err, context.Canceled) || errors.As(err, &de) {
		t.Fatalf("cancelled: %v", err)
	}

	get := func(callerDeadline time.Duration) {
		t.Helper()
		dctx, dcancel := context.WithTimeout(context.Background(), callerDeadline)
		defer dcancel()
		t0 := time.Now()
		_, err := s.disk.Get(dctx, "k")
		if !errors.As(err, &de) || de.Dependency != "storage" || time.Since(t0) > 2*time.Second {
			t.Fatalf("caller deadline %s: %v after %s; want the storage dependency error", callerDeadline, err, time.Since(t0))
		}
		if p, ok := problem.As(err); !ok || p.Status != 503 {
			t.Fatalf("caller deadline %s: problem %+v, want 503", callerDeadline, p)
		}
	}
	for range 5 {
		get(50 * time.Millisecond)
	}
	if st := s.disk.Breaker().Snapshot(); st.State != resilience.StateClosed || st.Consecutive != 0 || st.WindowCalls != 0 {
		t.Fatalf("after a cancel and 5 calls cut by the caller's deadline: %+v, want closed with nothing counted", st)
	}
	get(time.Minute)
	if st := s.disk.Breaker().Snapshot(); st.State != resilience.StateOpen || st.Opens != 1 {
		t.Fatalf("after a call cut by the read gap: %+v, want opened once", st)
	}
	before := fs.requests.Load()
	if _, err := s.disk.Get(context.Background(), "k"); !errors.Is(err, resilience.ErrOpen) || !errors.As(err, &de) {
		t.Fatalf("after the hang: %v, want the open breaker's storage error", err)
	}
	if got := fs.requests.Load(); got != before {
		t.Fatalf("the open breaker let %d requests through", got-before)
	}
}

// With a read gap (2 s) longer than the callers' deadlines, as with the
// defaults in a request (read_timeout and app.request_timeout both 30 s), a
// hung S3 is counted through the callers' deadlines: an operation cut by its
// caller's deadline after S3 had been silent for connect_timeout (300 ms) or
// longer is a hang: with nothing answered meanwhile it opens the breaker at
// once (the silence rule, before breaker_failures), after which the next
// operation is refused with no request, and a probe cut the same way reopens
// it. Cuts after less silence (a 50 ms deadline) are no evidence, and neither
// is a cancel after any silence.
func TestS3CallerDeadlineAfterSilenceCounts(t *testing.T) {
	t.Parallel()
	s, fs := startFault(t, `connect_timeout = "300ms"`, `read_timeout = "2s"`, `attempts = 1`,
		`breaker_failures = 3`, `breaker_cool_down = "20s"`)
	fs.set(faultHang)
	ops := []struct {
		name string
		run  func(context.Context) error
	}{
		{"put", func(ctx context.Context) error { return s.disk.Put(ctx, "k", strings.NewReader("v"), "") }},
		{"get", func(ctx context.Context) error { _, err := s.disk.Get(ctx, "k"); return err }},
		{"stat", func(ctx context.Context) error { _, err := s.disk.Stat(ctx, "k"); return err }},
	}
	storage503 := func(err error) bool {
		var de *problem.DependencyError
		p, ok := problem.As(err)
		return errors.As(err, &de) && de.Dependency == "storage" && ok && p.Status == 503
	}
	nothingCounted := func(after string) {
		t.Helper()
		if st := s.disk.Breaker().Snapshot(); st.State != resilience.StateClosed || st.Consecutive != 0 || st.WindowCalls != 0 {
			t.Fatalf("after %s: %+v, want closed with nothing counted", after, st)
		}
	}

	for _, op := range ops {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // a request's context has a deadline
		timer := time.AfterFunc(600*time.Millisecond, cancel)                 // twice connect_timeout of silence
		err := op.run(ctx)
		timer.Stop()
		cancel()
		if !errors.Is(err, context.Canceled) || errors.As(err, new(*problem.DependencyError)) {
			t.Fatalf("%s cancelled: %v, want a plain context.Canceled", op.name, err)
		}
	}
	nothingCounted("3 callers cancelled after 600 ms of silence")

	for range 2 {
		for _, op := range ops {
			ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
			err := op.run(ctx)
			cancel()
			if !storage503(err) || errors.Is(err, resilience.ErrOpen) {
				t.Fatalf("%s with a 50 ms deadline: %v, want the storage dependency error", op.name, err)
			}
		}
	}
	nothingCounted("6 callers' deadlines after 50 ms of silence")

	// A cut after 1 s of silence is a hang: the put's, with nothing answered
	// meanwhile, opens the breaker; after each cool-down the get and then the
	// stat are the probe, cut the same way, and reopen it (a cut counted as
	// nothing would leave it half-open).
	for i, op := range ops {
		if i > 0 {
			s.clock.Advance(20 * time.Second)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := op.run(ctx)
		cancel()
		if !storage503(err) || errors.Is(err, resilience.ErrOpen) {
			t.Fatalf("%s with a 1 s deadline: %v, want the storage dependency error", op.name, err)
		}
		st := s.disk.Breaker().Snapshot()
		if st.State != resilience.StateOpen || st.RetryAfter != 20*time.Second {
			t.Fatalf("after the %s's deadline after 1 s of silence: %+v, want open for 20s", op.name, st)
		}
	}

	before := fs.requests.Load()
	_, err := s.disk.Stat(context.Background(), "k")
	p, _ := problem.As(err)
	if !errors.Is(err, resilience.ErrOpen) || !storage503(err) || p.RetryAfter != 20*time.Second {
		t.Fatalf("with the breaker open: %v (%+v), want the open breaker's 503 with Retry-After 20s", err, p)
	}
	if got := fs.requests.Load(); got != before {
		t.Fatalf("the open breaker let %d requests through", got-before)
	}
}

// A caller whose own upload body stalls (a client that stopped sending) holds
// the operation up, not S3: the connection is quiet for longer than
// connect_timeout before the caller's deadline, and the transport returns
// only when the body's read does (1.5 s, then a short body), yet it is no
// evidence.
func TestS3StalledCallerBodyIsNoEvidence(t *testing.T) {
	t.Parallel()
	s, _ := startFault(t, `connect_timeout = "300ms"`, `read_timeout = "2s"`, `attempts = 1`, `breaker_failures = 1`)
	for range 2 {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := s.disk.Put(ctx, "stalled", storage.Sized(stalledBody(1500*time.Millisecond), 1<<10), "")
		cancel()
		var de *problem.DependencyError
		if !errors.As(err, &de) || de.Dependency != "storage" || errors.Is(err, resilience.ErrOpen) {
			t.Fatalf("put with a stalled body: %v, want the storage dependency error", err)
		}
	}
	if st := s.disk.Breaker().Snapshot(); st.State != resilience.StateClosed || st.Consecutive != 0 || st.WindowCalls != 0 {
		t.Fatalf("after 2 stalled bodies: %+v, want closed with nothing counted", st)
	}
	if err := s.disk.Put(context.Background(), "k", strings.NewReader("v"), ""); err != nil {
		t.Fatalf("put after the stalled bodies: %v", err)
	}
}

// stalledBody is a body that sends nothing for its duration, then ends.
type stalledBody time.Duration

func (b stalledBody) Read([]byte) (int, error) {
	time.Sleep(time.Duration(b))
	return 0, io.EOF
}

// /ready with a hung S3 answers within readiness_timeout (status timeout, or a
// failed HEAD), degraded since storage is not critical.
func TestS3ReadinessIsBounded(t *testing.T) {
	t.Parallel()
	fs := newFaultServer(t)
	s := start(t, "[app]\nreadiness_timeout = \"300ms\"\n"+s3TOML(fs.URL, "faults"), "files", nil)
	if r := s.svc.Get(t, "/ready"); r.Status != 200 || !strings.Contains(r.String(), `"status":"ok"`) {
		t.Fatalf("/ready = %d %s", r.Status, r.Body)
	}
	fs.set(faultHang)
	t0 := time.Now()
	r := s.svc.Get(t, "/ready")
	if el := time.Since(t0); el > 2*time.Second {
		t.Fatalf("/ready took %s", el)
	}
	if r.Status != 200 || !strings.Contains(r.String(), `"status":"degraded"`) {
		t.Fatalf("/ready with a hung S3 = %d %s", r.Status, r.Body)
	}
	fs.set(fault503)
	r = s.svc.Get(t, "/ready")
	if r.Status != 200 || !strings.Contains(r.String(), `"status":"fail"`) || strings.Contains(r.String(), testSecretKey) {
		t.Fatalf("/ready with a failing S3 = %d %s", r.Status, r.Body)
	}
}

// fullAcceptQueue listens with a backlog of 0 and never accepts; one connection
// fills the queue, so every further connect hangs (the kernel drops the SYNs),
// as against a blackholed address.
func fullAcceptQueue(t *testing.T) string {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Listen(fd, 0); err != nil {
		t.Fatal(err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", sa.(*syscall.SockaddrInet4).Port)
	filler, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { filler.Close() })
	if c, err := net.DialTimeout("tcp", addr, 100*time.Millisecond); err == nil {
		c.Close()
		t.Fatal("the accept queue is not full: a second connect succeeded")
	}
	return addr
}

// A server that does not complete the TCP handshake costs connect_timeout, not
// read_timeout: the attempt hung with nothing answered, so its hang opens the
// breaker and the policy's loop makes no second attempt (StopOpen).
func TestS3ConnectTimeout(t *testing.T) {
	t.Parallel()
	addr := fullAcceptQueue(t)
	s := start(t, s3TOML("http://"+addr, "b", `connect_timeout = "300ms"`, `read_timeout = "10s"`, `attempts = 2`), "files", nil)
	t0 := time.Now()
	err := s.disk.Put(context.Background(), "k", strings.NewReader("v"), "")
	el := time.Since(t0)
	var de *problem.DependencyError
	var ne net.Error
	if !errors.As(err, &de) || !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("put = %v", err)
	}
	if el < 300*time.Millisecond || el > 3*time.Second {
		t.Fatalf("put took %s, want about connect_timeout", el)
	}
	if st := s.disk.Breaker().Snapshot().State; st != resilience.StateOpen {
		t.Fatalf("breaker after a hung connect = %s, want open", st)
	}
	t.Logf("one connect attempt failed after %s: %v", el, err)
}
