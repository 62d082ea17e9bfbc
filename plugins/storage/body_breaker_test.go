package storage_test

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/jfastframework/jfast/framework/resilience"
	"github.com/jfastframework/jfast/plugins/storage"
	"github.com/jfastframework/jfast/problem"
)

// What the breaker learns from a response S3 began and did not finish: a
// Get's body read by the caller, a List's read inside the plugin.

// readObject runs a Get of key and reads the body to its end. opened says
// whether Get returned the object (the response headers had arrived); n is
// the body bytes read; err is Get's error or the read's.
func readObject(ctx context.Context, d *storage.Disk, key string) (opened bool, n int64, err error) {
	obj, err := d.Get(ctx, key)
	if err != nil {
		return false, 0, err
	}
	defer obj.Close()
	n, err = io.Copy(io.Discard, obj)
	return true, n, err
}

// listAll runs a List of every key and returns how many it yielded and its
// error.
func listAll(ctx context.Context, d *storage.Disk) (int, error) {
	n := 0
	for _, err := range d.List(ctx, "") {
		if err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}

// status returns the HTTP status of the response an error came with, or 0.
func status(err error) int {
	var re interface{ HTTPStatusCode() int }
	if errors.As(err, &re) {
		return re.HTTPStatusCode()
	}
	return 0
}

func isStorage503(err error) bool {
	var de *problem.DependencyError
	p, ok := problem.As(err)
	return errors.As(err, &de) && de.Dependency == "storage" && ok && p.Status == 503
}

// A body that stalls until the disk's read gap (300 ms) fires, or whose
// connection is reset or closed after half of it, is a failure of S3, for a
// Get (the error in the caller's read) and for a List (the error from List,
// a 503 storage error that came with a 200): two of them open a 2-failure
// breaker (a body that stalls after S3 answered the headers is a failure, not
// a hang), and the next operation is refused with no request.
func TestS3BrokenBodiesOpenTheBreaker(t *testing.T) {
	t.Parallel()
	wantKind := map[bodyFault]string{bodyStall: "timeout", bodyReset: "reset", bodyCut: "unexpected EOF"}
	for _, mode := range []bodyFault{bodyStall, bodyReset, bodyCut} {
		for _, op := range []string{"get", "list"} {
			t.Run(mode.String()+"/"+op, func(t *testing.T) {
				t.Parallel()
				s, bs := startBodyFault(t, `read_timeout = "300ms"`, `attempts = 1`, `breaker_failures = 2`, `breaker_cool_down = "20s"`)
				bs.set(mode)
				ctx := context.Background()
				for i := range 2 {
					switch op {
					case "get":
						opened, n, err := readObject(ctx, s.disk, "obj")
						if !opened || n == 0 || n >= objSize || errKind(err) != wantKind[mode] {
							t.Fatalf("get %d: opened %v, %d of %d bytes, %s error %v; want the half body then a %s",
								i, opened, n, objSize, errKind(err), err, wantKind[mode])
						}
					case "list":
						n, err := listAll(ctx, s.disk)
						if n != 0 || !isStorage503(err) || status(err) != 200 || errKind(err) != wantKind[mode] {
							t.Fatalf("list %d: %d keys, %s error (status %d) %v; want the storage 503 of a 200 cut by a %s",
								i, n, errKind(err), status(err), err, wantKind[mode])
						}
					}
					st := s.disk.Breaker().Snapshot()
					if i == 0 && (st.State != resilience.StateClosed || st.Consecutive != 1 || st.WindowFailures != 1) {
						t.Fatalf("after one broken body: %+v, want closed with 1 failure", st)
					}
					if i == 1 && st.State != resilience.StateOpen {
						t.Fatalf("after two broken bodies: %+v, want open", st)
					}
				}
				before := bs.requests.Load()
				_, _, err := readObject(ctx, s.disk, "obj")
				p, _ := problem.As(err)
				if !errors.Is(err, resilience.ErrOpen) || !isStorage503(err) || p.RetryAfter != 20*time.Second {
					t.Fatalf("with the breaker open: %v, want the open breaker's 503", err)
				}
				if got := bs.requests.Load(); got != before {
					t.Fatalf("the open breaker let %d requests through", got-before)
				}
			})
		}
	}
}

// A complete answer below 500 is a success whatever else fails around it: a
// NoSuchKey between two stalled bodies resets the run of failures. A 404
// whose own body stalls is no answer: S3 began one and did not finish it.
func TestS3AnswersCountMidBodyStallsDoNot(t *testing.T) {
	t.Parallel()
	s, bs := startBodyFault(t, `read_timeout = "300ms"`, `attempts = 1`, `breaker_failures = 2`)
	bs.set(bodyStall)
	ctx := context.Background()
	stalledGet := func() {
		t.Helper()
		if opened, n, err := readObject(ctx, s.disk, "obj"); !opened || n == 0 || errKind(err) != "timeout" {
			t.Fatalf("stalled get: opened %v, %d bytes, %v", opened, n, err)
		}
	}
	stalledGet()
	if _, _, err := readObject(ctx, s.disk, "missing"); !errors.Is(err, storage.ErrNotExist) {
		t.Fatalf("get missing: %v, want ErrNotExist", err)
	}
	if st := s.disk.Breaker().Snapshot(); st.State != resilience.StateClosed || st.Consecutive != 0 || st.WindowCalls != 3 || st.WindowFailures != 1 {
		t.Fatalf("after a stalled body and a NoSuchKey: %+v, want closed, 3 calls (the put too), 1 failure, none consecutive", st)
	}
	stalledGet()
	bs.cutErrors.Store(true)
	_, _, err := readObject(ctx, s.disk, "missing")
	if errors.Is(err, storage.ErrNotExist) || !isStorage503(err) || status(err) != 404 || errKind(err) != "timeout" {
		t.Fatalf("get missing with a stalled error body: %v (status %d), want the storage 503 of a 404 cut by the read gap", err, status(err))
	}
	if st := s.disk.Breaker().Snapshot(); st.State != resilience.StateOpen {
		t.Fatalf("after a stalled body and a stalled 404 body: %+v, want open", st)
	}
}

// failingWriter is a caller's destination that refuses every write.
type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("the client went away") }

// failingBody is an upload body that fails after sending some bytes.
type failingBody struct{ sent bool }

func (b *failingBody) Read(p []byte) (int, error) {
	if b.sent {
		return 0, errors.New("the client went away")
	}
	b.sent = true
	return copy(p, "some bytes"), nil
}

// What the caller does is no evidence, against a 1-failure breaker that any
// failure would open: a write to its destination failing, a body closed
// early, its upload body failing, its cancel mid-body (for Get and List), and
// its deadline mid-body after less silence than connect_timeout (5 s). A Get
// read to its end, or closed after all its bytes, is a success.
func TestS3CallerSideOfABodyIsNoEvidence(t *testing.T) {
	t.Parallel()
	s, bs := startBodyFault(t, `read_timeout = "5s"`, `attempts = 1`, `breaker_failures = 1`)
	ctx := context.Background()
	calls := s.disk.Breaker().Snapshot().WindowCalls // the put of "obj"
	counted := func(after string, successes int) {
		t.Helper()
		calls += successes
		if st := s.disk.Breaker().Snapshot(); st.State != resilience.StateClosed || st.WindowCalls != calls || st.WindowFailures != 0 {
			t.Fatalf("after %s: %+v, want closed with %d successes and no failure", after, st, calls)
		}
	}

	if opened, n, err := readObject(ctx, s.disk, "obj"); !opened || n != objSize || err != nil {
		t.Fatalf("get: %v, %d bytes, %v", opened, n, err)
	}
	counted("a get read to its end", 1)

	obj, err := s.disk.Get(ctx, "obj")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(failingWriter{}, obj); err == nil || err.Error() != "the client went away" {
		t.Fatalf("copy to a failing writer: %v", err)
	}
	obj.Close()
	counted("a get whose destination failed", 0)

	obj, err = s.disk.Get(ctx, "obj")
	if err != nil {
		t.Fatal(err)
	}
	obj.Close()
	counted("a get closed unread", 0)

	obj, err = s.disk.Get(ctx, "obj")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(obj, make([]byte, objSize)); err != nil {
		t.Fatal(err)
	}
	obj.Close()
	counted("a get closed after all its bytes", 1)

	err = s.disk.Put(ctx, "failing", &failingBody{}, "")
	if !errors.As(err, new(*storage.BodyError)) {
		t.Fatalf("put with a failing body: %v, want a BodyError", err)
	}
	counted("a put whose body failed", 0)

	bs.set(bodyStall)
	for range 3 {
		cctx, cancel := context.WithCancel(ctx)
		obj, err := s.disk.Get(cctx, "obj")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(obj, make([]byte, objSize/2)); err != nil {
			t.Fatalf("the half body: %v", err)
		}
		cancel() // mid-body: the server has sent half and stalls
		_, err = io.Copy(io.Discard, obj)
		obj.Close()
		if errKind(err) != "canceled" {
			t.Fatalf("get cancelled mid-body: %v, want context.Canceled", err)
		}
	}
	counted("3 gets cancelled mid-body", 0)

	obj, err = s.disk.Get(ctx, "obj")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(obj, make([]byte, objSize/2)); err != nil {
		t.Fatalf("the half body: %v", err)
	}
	copied := make(chan error, 1)
	go func() { _, err := io.Copy(io.Discard, obj); copied <- err }()
	obj.Close() // from another goroutine than the one reading, stalled or about to
	if err := <-copied; err == nil {
		t.Fatal("reading a closed body succeeded")
	}
	counted("a get closed mid-body while being read", 0)

	for range 3 {
		bs.drainSent()
		cctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { _, err := listAll(cctx, s.disk); done <- err }()
		<-bs.sent // the list's response has begun and stalls
		cancel()
		err := <-done
		if !errors.Is(err, context.Canceled) || errors.As(err, new(*problem.DependencyError)) {
			t.Fatalf("list cancelled mid-body: %v, want a plain context.Canceled", err)
		}
	}
	counted("3 lists cancelled mid-body", 0)

	for range 2 {
		dctx, cancel := context.WithTimeout(ctx, time.Second)
		obj, err := s.disk.Get(dctx, "obj")
		if err != nil {
			cancel()
			t.Fatal(err)
		}
		if _, err := io.ReadFull(obj, make([]byte, objSize/2)); err != nil {
			cancel()
			t.Fatalf("the half body: %v", err)
		}
		_, err = io.Copy(io.Discard, obj)
		obj.Close()
		cancel()
		if errKind(err) != "deadline" {
			t.Fatalf("get whose caller's deadline ran out mid-body: %v, want context.DeadlineExceeded", err)
		}
	}
	counted("2 gets cut mid-body by a 1 s deadline, under connect_timeout of silence", 0)
}

// With connect_timeout = 300ms and a read gap (5 s) longer than the callers'
// deadlines (1 s), a Get and a List whose bodies stall until their caller's
// deadline, after more than connect_timeout of silence, each count as a
// failure and together open a 2-failure breaker.
func TestS3CallerDeadlineAfterSilenceMidBodyCounts(t *testing.T) {
	t.Parallel()
	s, bs := startBodyFault(t, `connect_timeout = "300ms"`, `read_timeout = "5s"`, `attempts = 1`, `breaker_failures = 2`)
	bs.set(bodyStall)
	ctx := context.Background()

	dctx, cancel := context.WithTimeout(ctx, time.Second)
	obj, err := s.disk.Get(dctx, "obj")
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if _, err := io.ReadFull(obj, make([]byte, objSize/2)); err != nil {
		cancel()
		t.Fatalf("the half body: %v", err)
	}
	_, err = io.Copy(io.Discard, obj)
	obj.Close()
	cancel()
	if errKind(err) != "deadline" {
		t.Fatalf("get cut mid-body by its caller's deadline: %v, want context.DeadlineExceeded", err)
	}
	if st := s.disk.Breaker().Snapshot(); st.State != resilience.StateClosed || st.Consecutive != 1 {
		t.Fatalf("after the get: %+v, want closed with 1 failure", st)
	}

	dctx, cancel = context.WithTimeout(ctx, time.Second)
	_, err = listAll(dctx, s.disk)
	cancel()
	if !isStorage503(err) || status(err) != 200 || errKind(err) != "deadline" {
		t.Fatalf("list cut mid-body by its caller's deadline: %v (status %d), want the storage 503 of a 200", err, status(err))
	}
	if st := s.disk.Breaker().Snapshot(); st.State != resilience.StateOpen {
		t.Fatalf("after the get and the list: %+v, want open", st)
	}
}

// A half-open breaker's probe Get is settled when its headers arrive, so a
// long download does not hold the probe: the breaker closes at once. If its
// body then breaks, that is a fresh failure in the closed breaker.
func TestS3ProbeGetWithABrokenBody(t *testing.T) {
	t.Parallel()
	s, bs := startBodyFault(t, `read_timeout = "300ms"`, `attempts = 1`, `breaker_failures = 2`, `breaker_cool_down = "20s"`)
	bs.set(bodyStall)
	ctx := context.Background()
	for range 2 {
		if _, _, err := readObject(ctx, s.disk, "obj"); errKind(err) != "timeout" {
			t.Fatalf("stalled get: %v", err)
		}
	}
	if st := s.disk.Breaker().Snapshot(); st.State != resilience.StateOpen {
		t.Fatalf("after 2 stalled bodies: %+v, want open", st)
	}
	s.clock.Advance(20 * time.Second)

	obj, err := s.disk.Get(ctx, "obj")
	if err != nil {
		t.Fatalf("probe: %v", err)
	}
	if st := s.disk.Breaker().Snapshot(); st.State != resilience.StateClosed || st.Consecutive != 0 {
		obj.Close()
		t.Fatalf("after the probe's headers: %+v, want closed", st)
	}
	_, err = io.Copy(io.Discard, obj)
	obj.Close()
	if errKind(err) != "timeout" {
		t.Fatalf("the probe's stalled body: %v", err)
	}
	if st := s.disk.Breaker().Snapshot(); st.State != resilience.StateClosed || st.Consecutive != 1 {
		t.Fatalf("after the probe's body stalled: %+v, want closed with 1 failure", st)
	}
	if _, _, err := readObject(ctx, s.disk, "obj"); errKind(err) != "timeout" {
		t.Fatalf("stalled get: %v", err)
	}
	if st := s.disk.Breaker().Snapshot(); st.State != resilience.StateOpen {
		t.Fatalf("after another stalled body: %+v, want open", st)
	}

	bs.set(bodyWhole)
	s.clock.Advance(20 * time.Second)
	if opened, n, err := readObject(ctx, s.disk, "obj"); !opened || n != objSize || err != nil {
		t.Fatalf("probe after healing: %v, %d bytes, %v", opened, n, err)
	}
	if _, err := listAll(ctx, s.disk); err != nil {
		t.Fatalf("list after healing: %v", err)
	}
	if st := s.disk.Breaker().Snapshot(); st.State != resilience.StateClosed || st.Consecutive != 0 || st.WindowFailures != 0 {
		t.Fatalf("after healing: %+v, want closed with nothing failed", st)
	}
}
