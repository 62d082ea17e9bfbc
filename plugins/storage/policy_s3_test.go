package storage_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/jfastframework/jfast/framework/resilience"
	"github.com/jfastframework/jfast/plugins/storage"
	"github.com/jfastframework/jfast/problem"
)

// Each S3 request of an s3 disk is a call of the disk's policy (the loop every
// plugin that calls out shares): a retry rewinds a seekable body and sends it
// whole again, and the policy metrics count it under plugin="storage".
func TestS3RetryRewindsTheBody(t *testing.T) {
	t.Parallel()
	s, fs := startFault(t, `attempts = 2`)
	s.clock.SetAutoAdvance(true)                            // the backoff between attempts waits on the test clock
	want := bytes.Repeat([]byte("0123456789abcdef"), 4<<10) // 64 KiB
	fs.set(faultFlaky)
	if err := s.disk.Put(context.Background(), "k", bytes.NewReader(want), ""); err != nil {
		t.Fatalf("put through one 503: %v", err)
	}
	if got := fs.requests.Load(); got != 2 {
		t.Fatalf("%d requests, want the 503 and its retry", got)
	}
	fs.set(faultNone)
	if got, _ := readAll(t, s.disk, "k"); got != string(want) {
		t.Fatalf("stored %d bytes, want the %d sent (the retry must rewind the body)", len(got), len(want))
	}
	for name, want := range map[string]float64{
		"jfast_client_attempts_total": 3, // the put's two, the get's one
		"jfast_client_retries_total":  1,
	} {
		if got := counter(t, s, name, "plugin", "storage"); got != want {
			t.Errorf("%s{plugin=storage} = %v, want %v", name, got, want)
		}
	}
	if got := counter(t, s, "jfast_client_calls_total", "outcome", "ok"); got != 2 {
		t.Errorf("jfast_client_calls_total{outcome=ok} = %v, want the put and the get", got)
	}
}

// A body of unknown size is a multipart upload: each of its requests (the
// upload's creation, each part, the completion) is a call of its own, retried
// on its own, and a part is sent again from its buffer, not read again from
// the caller's body.
func TestS3MultipartRetriesEachRequest(t *testing.T) {
	t.Parallel()
	s, fs := startFault(t, `attempts = 2`, `retry_budget_min_per_second = 100`)
	s.clock.SetAutoAdvance(true)
	want := bytes.Repeat([]byte("x"), 9<<20) // two parts: 8 MiB and 1 MiB
	for i := range want {
		want[i] = byte(i % 251)
	}
	fs.set(faultFlaky)
	body := io.MultiReader(bytes.NewReader(want)) // no Len, no Seek: unknown size
	if err := s.disk.Put(context.Background(), "big", body, ""); err != nil {
		t.Fatalf("multipart put with every request failing once: %v", err)
	}
	// create, part 1, part 2, complete: each a 503 then its retry
	if got := fs.requests.Load(); got != 8 {
		t.Fatalf("%d requests, want 4 requests × 2 attempts", got)
	}
	fs.set(faultNone)
	if got, _ := readAll(t, s.disk, "big"); got != string(want) {
		t.Fatalf("stored %d bytes, not the %d sent", len(got), len(want))
	}
}

// timeout bounds an operation until its bytes move: a Stat and a Get's
// headers on an S3 that accepts and never answers end at timeout, not at the
// far longer read gap, as a hang that opens the breaker (the silence rule).
func TestS3TimeoutBoundsTheWaitForAnAnswer(t *testing.T) {
	t.Parallel()
	for _, op := range []string{"stat", "get"} {
		t.Run(op, func(t *testing.T) {
			t.Parallel()
			const timeout = 300 * time.Millisecond
			s, fs := startFault(t, `timeout = "300ms"`, `read_timeout = "20s"`, `connect_timeout = "20s"`)
			fs.set(faultHang)
			t0 := time.Now()
			var err error
			if op == "stat" {
				_, err = s.disk.Stat(context.Background(), "k")
			} else {
				_, err = s.disk.Get(context.Background(), "k")
			}
			el := time.Since(t0)
			var de *problem.DependencyError
			if !errors.As(err, &de) || de.Dependency != "storage" || errors.Is(err, resilience.ErrOpen) {
				t.Fatalf("%s on a silent S3: %v", op, err)
			}
			// Bounds from the keys: at least the timeout, and the read gap
			// (20 s) never waited out.
			if el < timeout || el >= 20*time.Second {
				t.Fatalf("%s took %s, want timeout (%s), not the read gap", op, el, timeout)
			}
			if st := s.disk.Breaker().Snapshot(); st.State != resilience.StateOpen || st.Opens != 1 { // breaker_failures is 5: the silence rule opened it
				t.Fatalf("breaker after a %s that hung = %+v, want opened by the hang", op, st)
			}
			if got := fs.requests.Load(); got != 1 {
				t.Fatalf("%d requests, want 1: a hang opens the breaker, no retry", got)
			}
		})
	}
}

// Once the response's headers are in, a Get's body is a transfer: it is
// bounded by the read gap and the caller, never by timeout, so a body that
// keeps moving for longer than timeout is read to its end.
func TestS3TimeoutDoesNotCutAMovingDownload(t *testing.T) {
	t.Parallel()
	s, fs := startFault(t, `timeout = "150ms"`)
	// 64 KiB served in 16 KiB pieces 100 ms apart: about 300 ms, twice timeout.
	want := strings.Repeat("z", 64<<10)
	if err := s.disk.Put(context.Background(), "k", strings.NewReader(want), ""); err != nil {
		t.Fatal(err)
	}
	fs.set(faultSlow)
	t0 := time.Now()
	got, _ := readAll(t, s.disk, "k")
	el := time.Since(t0)
	if got != want {
		t.Fatalf("read %d bytes, want %d", len(got), len(want))
	}
	if el < 150*time.Millisecond {
		t.Fatalf("the download took %s: it did not outlast timeout, the test proves nothing", el)
	}
	if st := s.disk.Breaker().Snapshot(); st.State != resilience.StateClosed || st.WindowFailures != 0 {
		t.Fatalf("breaker after a slow download = %+v", st)
	}
	t.Logf("a download of %s outlasted timeout (150ms) and was read whole", el)
}

// An upload whose body keeps coming for longer than timeout is not cut either:
// the timeout ends when the body starts to go out.
func TestS3TimeoutDoesNotCutAMovingUpload(t *testing.T) {
	t.Parallel()
	s, _ := startFault(t, `timeout = "150ms"`)
	pr, pw := io.Pipe()
	go func() {
		// A slow client: three pieces, 100 ms apart (300 ms in all).
		for i := range 3 {
			if i > 0 {
				time.Sleep(100 * time.Millisecond)
			}
			if _, err := pw.Write(bytes.Repeat([]byte{'a' + byte(i)}, 1<<10)); err != nil {
				return
			}
		}
		pw.Close()
	}()
	t0 := time.Now()
	if err := s.disk.Put(context.Background(), "slow", storage.Sized(pr, 3<<10), ""); err != nil {
		t.Fatalf("a slow upload: %v", err)
	}
	if el := time.Since(t0); el < 150*time.Millisecond {
		t.Fatalf("the upload took %s: it did not outlast timeout, the test proves nothing", el)
	}
	got, _ := readAll(t, s.disk, "slow")
	if len(got) != 3<<10 || got[0] != 'a' || got[len(got)-1] != 'c' {
		t.Fatalf("stored %d bytes", len(got))
	}
}

// A Get holds a place of max_concurrent until its body is done. A body the
// caller drops without closing it gives the place back when the garbage
// collector finds it, so a forgotten Close does not end, after
// max_concurrent of them, with every operation on the disk refused.
func TestS3DroppedBodyGivesItsPlaceBack(t *testing.T) {
	t.Parallel()
	s, _ := startFault(t, `max_concurrent = 1`)
	ctx := context.Background()
	if err := s.disk.Put(ctx, "k", strings.NewReader("v"), ""); err != nil {
		t.Fatal(err)
	}
	obj, err := s.disk.Get(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	_, err = s.disk.Stat(short, "k")
	cancel()
	if err == nil {
		t.Fatal("a Stat while the body holds the only place succeeded: the Get did not hold it")
	}
	// The body is dropped here, never closed: kept alive until now, so that
	// no collection (another test's allocations start them at any moment)
	// could find it before the Stat above.
	runtime.KeepAlive(obj)
	// The place comes back once a collection has found the body: wait for
	// that event, collecting, within a bound that is not the test's subject.
	deadline := time.Now().Add(10 * time.Second)
	for {
		runtime.GC()
		short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		_, err = s.disk.Stat(short, "k")
		cancel()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the dropped body's place never came back: %v", err)
		}
	}
	if st := s.disk.Breaker().Snapshot(); st.State != resilience.StateClosed || st.WindowFailures != 0 {
		t.Fatalf("breaker after a dropped body = %+v, want closed with no failure (a dropped body is no evidence)", st)
	}
}

// An operation the policy refuses with no I/O is counted in the words every
// client plugin uses for that refusal (here bulkhead_full, the open
// breaker's circuit_open in
// TestS3PausedServerDeadlineThenBreakerThenRecovery), in the storage
// family and the shared one alike; the breaker's state is the shared gauge
// alone.
func TestS3RefusalsAreCountedInTheSharedWords(t *testing.T) {
	t.Parallel()
	s, _ := startFault(t, `max_concurrent = 1`, `bulkhead_wait = "500ms"`)
	ctx := context.Background()
	if err := s.disk.Put(ctx, "k", strings.NewReader("v"), ""); err != nil {
		t.Fatal(err)
	}
	obj, err := s.disk.Get(ctx, "k") // holds the only place until closed
	if err != nil {
		t.Fatal(err)
	}
	defer obj.Close()

	waiting := s.clock.Waiters()
	statErr := make(chan error, 1)
	go func() {
		_, err := s.disk.Stat(ctx, "k")
		statErr <- err
	}()
	s.clock.BlockUntil(waiting + 1) // the Stat waits for a place
	s.clock.Advance(500 * time.Millisecond)
	if p, ok := problem.As(<-statErr); !ok || p.Status != 503 {
		t.Fatalf("a Stat refused after bulkhead_wait = %+v, want a 503", p)
	}

	for _, name := range []string{"jfast_storage_operations_total", "jfast_client_calls_total"} {
		if n := counter(t, s, name, "outcome", "bulkhead_full"); n != 1 {
			t.Errorf("%s{outcome=bulkhead_full} = %v, want 1", name, n)
		}
		if n := counter(t, s, name, "outcome", "rejected"); n != 0 {
			t.Errorf("%s{outcome=rejected} = %v, want none: the refusal has the shared word", name, n)
		}
	}
	if n := counter(t, s, "jfast_client_bulkhead_rejections_total", "plugin", "storage"); n != 1 {
		t.Errorf("jfast_client_bulkhead_rejections_total = %v, want 1", n)
	}
	mfs, err := s.svc.App.Metrics().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "jfast_storage_breaker_state" {
			t.Error("jfast_storage_breaker_state is registered beside jfast_client_breaker_state{plugin=\"storage\"}")
		}
	}
	if g := gauge(t, s, "jfast_client_breaker_state", "plugin", "storage"); g != 0 {
		t.Errorf("jfast_client_breaker_state{plugin=storage} = %v, want 0 (closed)", g)
	}
}
