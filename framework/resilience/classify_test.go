package resilience

import (
	"context"
	"errors"
	"fmt"
	"net"
	"testing"
	"time"
)

// timeoutErr is an error that says it is a timeout, like a socket deadline's.
type timeoutErr struct{}

func (timeoutErr) Error() string   { return "i/o timeout" }
func (timeoutErr) Timeout() bool   { return true }
func (timeoutErr) Temporary() bool { return true }

func TestHTTPOutcome(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		status int
		err    error
		want   Outcome
	}{
		{200, nil, Success}, {201, nil, Success}, {304, nil, Success}, {400, nil, Success},
		{404, nil, Success}, {409, nil, Success}, {499, nil, Success}, {501, nil, Success},
		{500, nil, Success}, {429, nil, Success}, {401, nil, Success}, {505, nil, Success},
		{502, nil, Failure}, {503, nil, Failure}, {504, nil, Failure},
		{0, errors.New("dial tcp: connection refused"), Failure},
		{0, fmt.Errorf("read: %w", context.DeadlineExceeded), Hang},
		{0, &net.OpError{Op: "read", Net: "tcp", Err: timeoutErr{}}, Hang},
		{0, &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}, Failure},
		{0, fmt.Errorf("send: %w", context.Canceled), Ignore},
	} {
		if got := HTTPOutcome(tc.status, tc.err); got != tc.want {
			t.Errorf("HTTPOutcome(%d, %v) = %s, want %s", tc.status, tc.err, got, tc.want)
		}
	}
}

// An answer is evidence that the upstream is up: four 503s then a 500, a 429
// or a 400 leave a 5-failure breaker closed with the run reset, and a probe
// answered so closes an open breaker.
func TestHTTPOutcomeAnswersResetAndClose(t *testing.T) {
	t.Parallel()
	for _, answer := range []int{500, 429, 400} {
		s := setupBreaker(t, BreakerOpts{Failures: 5})
		for range 4 {
			s.call(t, HTTPOutcome(503, nil))
		}
		s.call(t, HTTPOutcome(answer, nil))
		if snap := s.br.Snapshot(); snap.State != StateClosed || snap.Consecutive != 0 {
			t.Errorf("four 503s then a %d: %+v, want closed with the run reset", answer, snap)
		}
		for range 5 {
			s.call(t, HTTPOutcome(503, nil))
		}
		if got := s.br.Snapshot().State; got != StateOpen {
			t.Fatalf("five 503s: %s, want open", got)
		}
		s.clock.Advance(DefaultBreakerCoolDown)
		tk, err := s.br.Allow()
		if err != nil || !tk.Probe() {
			t.Fatalf("after the cool-down: %v, probe %v", err, tk.Probe())
		}
		tk.Done(HTTPOutcome(answer, nil))
		if got := s.br.Snapshot().State; got != StateClosed {
			t.Errorf("a probe answered %d: %s, want closed", answer, got)
		}
	}
}

// withDeadline returns a context with deadline d (already ended when d has
// passed) and cancels it at the end of the test.
func withDeadline(t *testing.T, d time.Time) context.Context {
	ctx, cancel := context.WithDeadline(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func cancelled(parent context.Context) context.Context {
	ctx, cancel := context.WithCancel(parent)
	cancel()
	return ctx
}

// Whose deadline ended the call, decided from the contexts' own state: every
// deadline here is an hour in the past or an hour ahead, so the answer does
// not depend on how fast the test runs.
func TestCutByCaller(t *testing.T) {
	t.Parallel()
	now := time.Now()
	past, future := now.Add(-time.Hour), now.Add(time.Hour)
	for _, tc := range []struct {
		name string
		ctx  context.Context
		own  time.Time
		want bool
	}{
		{"caller running, no deadline", context.Background(), future, false},
		{"caller running, no deadline, no own deadline", context.Background(), time.Time{}, false},
		{"caller running, its deadline ahead and sooner than own", withDeadline(t, future), future.Add(time.Hour), false},
		{"caller cancelled", cancelled(context.Background()), future, true},
		{"caller cancelled, its deadline still ahead", cancelled(withDeadline(t, future)), future.Add(time.Hour), true},
		{"caller cancelled after own passed", cancelled(context.Background()), past, true},
		{"caller's deadline passed, sooner than own", withDeadline(t, past), past.Add(time.Second), true},
		{"caller's deadline passed, no own deadline (a gap)", withDeadline(t, past), time.Time{}, true},
		{"caller's deadline passed, own came first", withDeadline(t, past), past.Add(-time.Second), false},
		{"caller's deadline passed at the same instant as own", withDeadline(t, past), past, false},
	} {
		if got := CutByCaller(tc.ctx, tc.own); got != tc.want {
			t.Errorf("%s: CutByCaller = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// A socket deadline copied from the caller's context fires a moment before the
// context's own timer: the deadline counts as passed when the time reaches it,
// even while ctx.Err() is still nil. The caller's context here has a deadline
// an hour ahead (its timer never fires during the test) and the test clock
// stands for the time the failure returned.
func TestCutByCallerAtTheDeadline(t *testing.T) {
	t.Parallel()
	start := time.Now()
	deadline := start.Add(time.Hour)
	ctx := withDeadline(t, deadline)
	for _, tc := range []struct {
		name    string
		own     time.Time
		advance time.Duration // from start, on the test clock
		want    bool
	}{
		{"before the caller's deadline", deadline.Add(time.Minute), time.Hour - time.Nanosecond, false},
		{"at the caller's deadline, sooner than own", deadline.Add(time.Minute), time.Hour, true},
		{"past the caller's deadline, no own deadline", time.Time{}, time.Hour + time.Second, true},
		{"at the caller's deadline, own the same instant", deadline, time.Hour, false},
		{"at the caller's deadline, own a minute earlier", deadline.Add(-time.Minute), time.Hour, false},
	} {
		clk := NewTestClock(start)
		clk.Advance(tc.advance)
		if ctx.Err() != nil {
			t.Fatal("the caller's context ended: the test ran for an hour?")
		}
		if got := cutByCaller(ctx, tc.own, clk.Now()); got != tc.want {
			t.Errorf("%s: cutByCaller = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// Call applies the rule with no deadline of its own: failures that return
// after the caller's deadline passed leave the breaker closed however many
// there are; the same failure with the caller still waiting (fn's own
// deadline fired) counts, and five open the breaker.
func TestCallCallerDeadlineIsNoEvidence(t *testing.T) {
	t.Parallel()
	s := setupBreaker(t, BreakerOpts{})
	timeout := func(context.Context) (int, error) {
		return 0, fmt.Errorf("read: %w", context.DeadlineExceeded)
	}
	expired := withDeadline(t, time.Now().Add(-time.Second))
	for range 20 {
		if _, err := Call(expired, s.br, nil, nil, timeout); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("err = %v, want fn's timeout", err)
		}
	}
	if snap := s.br.Snapshot(); snap.State != StateClosed || snap.Consecutive != 0 || snap.WindowCalls != 0 {
		t.Fatalf("after 20 calls cut by the caller's deadline: %+v, want closed with nothing counted", snap)
	}
	waiting := withDeadline(t, time.Now().Add(time.Hour))
	for range 5 {
		_, _ = Call(waiting, s.br, nil, nil, timeout)
	}
	if got := s.state(); got != StateOpen {
		t.Fatalf("after 5 timeouts of fn's own: %s, want open", got)
	}
}
