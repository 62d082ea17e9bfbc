package deadline

import (
	"context"
	"errors"
	"runtime"
	"testing"
	"time"
)

// A call's context answers as context.WithDeadline's would: Done closed
// and Err DeadlineExceeded at the deadline, Canceled when the call ends,
// the caller's error and cause when the caller's context ends first, the
// caller's deadline when it is sooner, and a context derived from it ends
// with it.
func TestContextLikeWithDeadline(t *testing.T) {
	t.Parallel()
	d := NewTimer()
	errGone := errors.New("the caller went away")
	cases := []struct {
		name     string
		deadline time.Duration
		end      func(cancelCall context.CancelFunc, cancelCaller context.CancelCauseFunc)
		err      error
		cause    error
	}{
		{"deadline", 20 * time.Millisecond, func(context.CancelFunc, context.CancelCauseFunc) {}, context.DeadlineExceeded, context.DeadlineExceeded},
		{"passed", -time.Second, func(context.CancelFunc, context.CancelCauseFunc) {}, context.DeadlineExceeded, context.DeadlineExceeded},
		{"call ends", time.Hour, func(c context.CancelFunc, _ context.CancelCauseFunc) { c() }, context.Canceled, context.Canceled},
		{"caller ends", time.Hour, func(_ context.CancelFunc, c context.CancelCauseFunc) { c(errGone) }, context.Canceled, errGone},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			caller, cancelCaller := context.WithCancelCause(context.WithValue(context.Background(), valueKey{}, "v"))
			defer cancelCaller(nil)
			at := time.Now().Add(tc.deadline)
			ctx, cancel := d.WithDeadline(caller, at)
			defer cancel()
			child, cancelChild := context.WithCancel(ctx)
			defer cancelChild()
			if got, ok := ctx.Deadline(); !ok || !got.Equal(at) {
				t.Fatalf("Deadline() = %v, %v; want %v", got, ok, at)
			}
			if ctx.Value(valueKey{}) != "v" {
				t.Fatal("the caller's value is not found")
			}
			if tc.deadline > 0 && ctx.Err() != nil {
				t.Fatalf("Err() = %v before the end", ctx.Err())
			}
			tc.end(cancel, cancelCaller)
			for _, c := range []context.Context{ctx, child} {
				select {
				case <-c.Done():
				case <-time.After(5 * time.Second):
					t.Fatal("not done")
				}
			}
			if !errors.Is(ctx.Err(), tc.err) || !errors.Is(child.Err(), tc.err) {
				t.Fatalf("Err() = %v, derived %v; want %v", ctx.Err(), child.Err(), tc.err)
			}
			if got := context.Cause(ctx); !errors.Is(got, tc.cause) {
				t.Fatalf("Cause() = %v, want %v", got, tc.cause)
			}
		})
	}

	caller, cancelCaller := context.WithDeadline(context.Background(), time.Now().Add(time.Minute))
	defer cancelCaller()
	ctx, cancel := d.WithDeadline(caller, time.Now().Add(time.Hour))
	defer cancel()
	if got, _ := ctx.Deadline(); got != func() time.Time { t, _ := caller.Deadline(); return t }() {
		t.Fatalf("Deadline() = %v under a caller's sooner deadline, want the caller's", got)
	}
}

type valueKey struct{}

// A context derived from a call's registers with it (AfterFunc) instead of
// being watched by a goroutine of its own, and is let go of when it ends
// first.
func TestDerivedWithoutGoroutines(t *testing.T) {
	d := NewTimer()
	ctx, cancel := d.WithDeadline(context.Background(), time.Now().Add(time.Hour))
	defer cancel()
	before := runtime.NumGoroutine()
	var cancels []context.CancelFunc
	for range 100 {
		_, c := context.WithCancel(ctx)
		cancels = append(cancels, c)
	}
	if n := runtime.NumGoroutine(); n > before+10 {
		t.Fatalf("%d goroutines after deriving 100 contexts, %d before", n, before)
	}
	for _, c := range cancels {
		c()
	}
	cc := ctx.(*Context)
	cc.mu.Lock()
	left := len(cc.afters)
	cc.mu.Unlock()
	if left != 0 {
		t.Fatalf("%d derived contexts still registered after they ended", left)
	}
}

// The calls of a client share one timer, set for the first deadline and
// not again for a later one, nor stopped when the calls end.
func TestCallsShareATimer(t *testing.T) {
	t.Parallel()
	d := NewTimer()
	first := time.Now().Add(time.Hour)
	for i := range 10 {
		_, cancel := d.WithDeadline(context.Background(), first.Add(time.Duration(i)*time.Millisecond))
		cancel()
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.armed || !d.due.Equal(first) || d.first != nil {
		t.Fatalf("armed %v for %v, list empty %v; want armed for the first deadline %v and an empty list", d.armed, d.due, d.first == nil, first)
	}
}

// A deadline sooner than the ones timed already goes first and is ended
// first, by the timer set again for it; the later ones end when their
// calls do.
func TestContextsEndInDeadlineOrder(t *testing.T) {
	t.Parallel()
	d := NewTimer()
	now := time.Now()
	late, cancelLate := d.WithDeadline(context.Background(), now.Add(time.Hour))
	soon, cancelSoon := d.WithDeadline(context.Background(), now.Add(20*time.Millisecond))
	defer cancelSoon()
	middle, cancelMiddle := d.WithDeadline(context.Background(), now.Add(30*time.Minute))
	d.mu.Lock()
	ordered := d.first == soon && soon.(*Context).next == middle && middle.(*Context).next == late && d.last == late
	d.mu.Unlock()
	if !ordered {
		t.Fatal("the list is not in deadline order")
	}
	select {
	case <-soon.Done():
	case <-time.After(30 * time.Second):
		t.Fatal("the soonest did not end")
	}
	if dl, _ := soon.Deadline(); time.Now().Before(dl) || !errors.Is(soon.Err(), context.DeadlineExceeded) {
		t.Fatalf("the soonest ended before its deadline %v, or with %v", dl, soon.Err())
	}
	if late.Err() != nil || middle.Err() != nil {
		t.Fatal("a later deadline ended with the sooner one")
	}
	cancelMiddle()
	cancelLate()
	if !errors.Is(middle.Err(), context.Canceled) || !errors.Is(late.Err(), context.Canceled) {
		t.Fatalf("Err after cancel: %v, %v", middle.Err(), late.Err())
	}
	if n := d.Timed(); n != 0 {
		t.Fatalf("%d contexts still timed after every call ended", n)
	}
}
