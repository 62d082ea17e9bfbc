package framework

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/jfastframework/jfast/requestid"
)

// The request context must behave as context.WithTimeout(parent, timeout) with a
// deferred cancel at the request's end, whichever of its methods is called
// first. These tests drive it with deadlines already past (start an hour ago) or
// far away, so none waits on a clock except the one that watches a real timer
// fire.

const far = time.Hour

func newCtx(t *testing.T, parent context.Context, start time.Time, timeout time.Duration) *requestContext {
	t.Helper()
	return newRequestContext(parent, "", http.Header{}, start, timeout, nil)
}

func wantDone(t *testing.T, ctx context.Context, err, cause error) {
	t.Helper()
	select {
	case <-ctx.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("Done not closed within 5s")
	}
	if got := ctx.Err(); got != err {
		t.Fatalf("Err() = %v, want %v", got, err)
	}
	if got := context.Cause(ctx); got != cause {
		t.Fatalf("Cause() = %v, want %v", got, cause)
	}
}

func wantLive(t *testing.T, ctx context.Context) {
	t.Helper()
	if err := ctx.Err(); err != nil {
		t.Fatalf("Err() = %v, want nil", err)
	}
	if c := context.Cause(ctx); c != nil {
		t.Fatalf("Cause() = %v, want nil", c)
	}
}

func TestRequestContextIDAndHeader(t *testing.T) {
	h := http.Header{}
	ctx := newRequestContext(context.Background(), "abc-123", h, time.Now(), far, nil)
	if got := requestid.FromContext(ctx); got != "abc-123" {
		t.Fatalf("FromContext = %q, want the valid inbound ID", got)
	}
	if got := h.Get(requestid.Header); got != "abc-123" {
		t.Fatalf("response header = %q, want abc-123", got)
	}

	h = http.Header{}
	ctx = newRequestContext(context.Background(), "bad id\n", h, time.Now(), far, nil)
	id := requestid.FromContext(ctx)
	if len(id) != requestid.Len || id == "bad id\n" || h.Get(requestid.Header) != id {
		t.Fatalf("invalid inbound ID: context %q, header %q; want a fresh %d-character ID in both", id, h.Get(requestid.Header), requestid.Len)
	}
	// Derived contexts still find it, and other keys reach the parent.
	type key struct{}
	parent := context.WithValue(context.Background(), key{}, "v")
	ctx = newCtx(t, parent, time.Now(), far)
	child, cancel := context.WithCancel(ctx)
	defer cancel()
	if requestid.FromContext(child) != ctx.id || child.Value(key{}) != "v" {
		t.Fatalf("derived context: id %q value %v", requestid.FromContext(child), child.Value(key{}))
	}
}

func TestRequestContextDeadline(t *testing.T) {
	start := time.Now()
	ctx := newCtx(t, context.Background(), start, 30*time.Second)
	if d, ok := ctx.Deadline(); !ok || !d.Equal(start.Add(30*time.Second)) {
		t.Fatalf("Deadline() = %v, %v; want start+30s", d, ok)
	}
	// A parent with an earlier deadline keeps it, as WithTimeout does.
	parent, cancel := context.WithDeadline(context.Background(), start.Add(time.Second))
	defer cancel()
	ctx = newCtx(t, parent, start, 30*time.Second)
	if d, _ := ctx.Deadline(); !d.Equal(start.Add(time.Second)) {
		t.Fatalf("Deadline() = %v, want the parent's earlier %v", d, start.Add(time.Second))
	}
}

func TestRequestContextLiveThenEnd(t *testing.T) {
	for _, built := range []bool{false, true} {
		ctx := newCtx(t, context.Background(), time.Now(), far)
		if built {
			_ = ctx.Done()
		}
		wantLive(t, ctx)
		ctx.end()
		wantDone(t, ctx, context.Canceled, context.Canceled)
		ctx.end() // a second end changes nothing
		wantDone(t, ctx, context.Canceled, context.Canceled)
	}
}

func TestRequestContextDeadlinePassed(t *testing.T) {
	// Err first, without Done: the deadline is reported from the clock, and
	// the context built afterwards agrees, even after the request ends.
	ctx := newCtx(t, context.Background(), time.Now().Add(-far), time.Second)
	if err := ctx.Err(); err != context.DeadlineExceeded {
		t.Fatalf("Err() = %v, want DeadlineExceeded", err)
	}
	ctx.end()
	wantDone(t, ctx, context.DeadlineExceeded, context.DeadlineExceeded)

	// Done first.
	ctx = newCtx(t, context.Background(), time.Now().Add(-far), time.Second)
	wantDone(t, ctx, context.DeadlineExceeded, context.DeadlineExceeded)
	ctx.end()
	wantDone(t, ctx, context.DeadlineExceeded, context.DeadlineExceeded)
}

func TestRequestContextTimerFires(t *testing.T) {
	// The one real wait: a built context's timer closes Done at the deadline.
	start := time.Now()
	ctx := newCtx(t, context.Background(), start, 20*time.Millisecond)
	defer ctx.end()
	wantDone(t, ctx, context.DeadlineExceeded, context.DeadlineExceeded)
	if time.Since(start) < 20*time.Millisecond {
		t.Fatalf("Done closed after %v, before the 20ms deadline", time.Since(start))
	}
}

func TestRequestContextParentCancelled(t *testing.T) {
	why := errors.New("client went away")
	for _, built := range []bool{false, true} {
		parent, cancel := context.WithCancelCause(context.Background())
		ctx := newCtx(t, parent, time.Now(), far)
		if built {
			_ = ctx.Done()
		}
		cancel(why)
		wantDone(t, ctx, context.Canceled, why)
		ctx.end()
		wantDone(t, ctx, context.Canceled, why)
	}
}

func TestRequestContextSettledErrorHolds(t *testing.T) {
	// Err reported DeadlineExceeded; the parent's later cancellation must not
	// turn it into Canceled when the context is built.
	parent, cancel := context.WithCancelCause(context.Background())
	ctx := newCtx(t, parent, time.Now().Add(-far), time.Second)
	if err := ctx.Err(); err != context.DeadlineExceeded {
		t.Fatalf("Err() = %v, want DeadlineExceeded", err)
	}
	cancel(errors.New("later"))
	wantDone(t, ctx, context.DeadlineExceeded, context.DeadlineExceeded)

	// Ended (Canceled) before the deadline; built after the deadline passed
	// would say DeadlineExceeded if it were built from the clock.
	ctx = newCtx(t, context.Background(), time.Now(), far)
	ctx.end()
	ctx.deadline = time.Now().Add(-time.Second) // the deadline passes after the end
	wantDone(t, ctx, context.Canceled, context.Canceled)
}

func TestRequestContextDerivedAndAfterFunc(t *testing.T) {
	ctx := newCtx(t, context.Background(), time.Now(), far)
	child, cancelChild := context.WithCancel(context.WithValue(ctx, struct{}{}, 1))
	defer cancelChild()
	timed, cancelTimed := context.WithTimeout(ctx, far)
	defer cancelTimed()
	ran := make(chan struct{})
	context.AfterFunc(ctx, func() { close(ran) })
	wantLive(t, child)
	ctx.end()
	wantDone(t, child, context.Canceled, context.Canceled)
	wantDone(t, timed, context.Canceled, context.Canceled)
	select {
	case <-ran:
	case <-time.After(5 * time.Second):
		t.Fatal("AfterFunc did not run after the request ended")
	}
}

func TestRequestContextConcurrent(t *testing.T) {
	// For the race detector: every method at once with the request's end.
	ctx := newCtx(t, context.Background(), time.Now(), far)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			_ = ctx.Err()
			<-ctx.Done()
			_ = context.Cause(ctx)
			_ = requestid.FromContext(ctx)
		})
	}
	wg.Go(ctx.end)
	wg.Wait()
	wantDone(t, ctx, context.Canceled, context.Canceled)
}

func TestRequestContextAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector's instrumentation allocates")
	}
	h := http.Header{}
	start := time.Now()
	route := chi.NewRouteContext()
	n := testing.AllocsPerRun(100, func() {
		ctx := newRequestContext(context.Background(), "", h, start, far, route)
		_ = chi.RouteContext(ctx)
		_, _ = ctx.Deadline()
		_ = ctx.Err()
		_ = requestid.FromContext(ctx)
		ctx.end()
	})
	if n > 1 {
		t.Fatalf("a request context whose Done is never called allocates %.0f times; want 1", n)
	}
}
