package resilience

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

type breakerBundle struct {
	clock   *TestClock
	br      *Breaker
	mu      sync.Mutex
	changes []StateChange
}

func (s *breakerBundle) Changes() []StateChange {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]StateChange(nil), s.changes...)
}

func setupBreaker(t *testing.T, o BreakerOpts) *breakerBundle {
	t.Helper()
	s := &breakerBundle{clock: NewTestClock(epoch)}
	o.Clock = s.clock
	if o.Name == "" {
		o.Name = "billing"
	}
	o.OnStateChange = func(c StateChange) {
		s.mu.Lock()
		s.changes = append(s.changes, c)
		s.mu.Unlock()
	}
	s.br = NewBreaker(o)
	return s
}

// call makes one call with outcome o and fails the test if it was refused.
func (s *breakerBundle) call(t *testing.T, o Outcome) {
	t.Helper()
	tk, err := s.br.Allow()
	if err != nil {
		t.Fatalf("Allow refused a call in state %s: %v", s.br.Snapshot().State, err)
	}
	tk.Done(o)
}

func (s *breakerBundle) state() State { return s.br.Snapshot().State }

func TestBreakerFourFailuresThenSuccessStaysClosed(t *testing.T) {
	t.Parallel()
	s := setupBreaker(t, BreakerOpts{})
	for range 4 {
		s.call(t, Failure)
	}
	s.call(t, Success)
	for range 4 {
		s.call(t, Failure)
	}
	if got := s.state(); got != StateClosed {
		t.Fatalf("state = %s, want closed", got)
	}
	if snap := s.br.Snapshot(); snap.Consecutive != 4 || snap.WindowCalls != 9 || snap.WindowFailures != 8 {
		t.Fatalf("snapshot = %+v, want consecutive 4, window 8/9", snap)
	}
}

func TestBreakerFiveConsecutiveFailuresOpen(t *testing.T) {
	t.Parallel()
	s := setupBreaker(t, BreakerOpts{})
	for range 5 {
		s.call(t, Failure)
	}
	snap := s.br.Snapshot()
	if snap.State != StateOpen || snap.RetryAfter != 15*time.Second || snap.Opens != 1 {
		t.Fatalf("snapshot = %+v, want open with 15s left", snap)
	}
	_, err := s.br.Allow()
	var oe *OpenError
	if !errors.As(err, &oe) || !errors.Is(err, ErrOpen) {
		t.Fatalf("Allow while open = %v, want *OpenError matching ErrOpen", err)
	}
	if got, want := err.Error(), "calls to 'billing' are suspended for 15.0s"; got != want {
		t.Fatalf("error = %q, want %q", got, want)
	}
	s.clock.Advance(11800 * time.Millisecond)
	if got, want := err.Error(), "calls to 'billing' are suspended for 3.2s"; got != want {
		t.Fatalf("error after 11.8s = %q, want %q", got, want)
	}
	var ra RetryAfterError
	if !errors.As(err, &ra) || ra.RetryAfter() != 3200*time.Millisecond {
		t.Fatalf("RetryAfter = %v, want 3.2s", ra)
	}
	ch := s.Changes()
	if len(ch) != 1 || ch[0].From != StateClosed || ch[0].To != StateOpen || ch[0].Consecutive != 5 ||
		ch[0].WindowCalls != 5 || ch[0].WindowFailures != 5 || ch[0].Name != "billing" || !ch[0].At.Equal(epoch) {
		t.Fatalf("changes = %+v, want one closed->open with counts 5, 5/5", ch)
	}
}

func TestBreakerConsecutiveRuleDoesNotDecayWithWindow(t *testing.T) {
	t.Parallel()
	s := setupBreaker(t, BreakerOpts{Failures: 12})
	// Twelve consecutive failures, one every 10 s: 110 s, far longer than
	// the 30 s window. A windowed count would never see more than 3.
	for i := range 12 {
		if i > 0 {
			s.clock.Advance(10 * time.Second)
		}
		if got := s.state(); got != StateClosed {
			t.Fatalf("state after %d failures = %s, want closed", i, got)
		}
		s.call(t, Failure)
	}
	if got := s.state(); got != StateOpen {
		t.Fatalf("state = %s, want open", got)
	}
	if ch := s.Changes(); ch[0].Consecutive != 12 || ch[0].WindowFailures > 3 {
		t.Fatalf("change = %+v, want consecutive 12 and at most 3 failures in the window", ch[0])
	}
}

// alternate makes calls S F S F ... (n calls, failures on odd positions),
// so the consecutive rule never fires.
func alternate(t *testing.T, s *breakerBundle, n int) {
	t.Helper()
	for i := range n {
		if i%2 == 0 {
			s.call(t, Success)
		} else {
			s.call(t, Failure)
		}
	}
}

func TestBreakerFailureRate(t *testing.T) {
	t.Parallel()
	t.Run("10 of 20 opens", func(t *testing.T) {
		t.Parallel()
		s := setupBreaker(t, BreakerOpts{})
		alternate(t, s, 20)
		if got := s.state(); got != StateOpen {
			t.Fatalf("state = %s, want open", got)
		}
		if ch := s.Changes(); len(ch) != 1 || ch[0].WindowCalls != 20 || ch[0].WindowFailures != 10 || ch[0].Consecutive != 1 {
			t.Fatalf("changes = %+v, want one change with 10/20 and consecutive 1", ch)
		}
	})
	t.Run("10 of 19 does not", func(t *testing.T) {
		t.Parallel()
		s := setupBreaker(t, BreakerOpts{})
		s.call(t, Failure)
		for range 9 {
			s.call(t, Success)
			s.call(t, Failure)
		}
		snap := s.br.Snapshot()
		if snap.State != StateClosed || snap.WindowCalls != 19 || snap.WindowFailures != 10 {
			t.Fatalf("snapshot = %+v, want closed with 10/19", snap)
		}
	})
	t.Run("9 of 20 does not", func(t *testing.T) {
		t.Parallel()
		s := setupBreaker(t, BreakerOpts{})
		s.call(t, Success)
		s.call(t, Success)
		for range 9 {
			s.call(t, Failure)
			s.call(t, Success)
		}
		if snap := s.br.Snapshot(); snap.State != StateClosed || snap.WindowCalls != 20 || snap.WindowFailures != 9 {
			t.Fatalf("snapshot = %+v, want closed with 9/20", snap)
		}
	})
	t.Run("old failures slide out", func(t *testing.T) {
		t.Parallel()
		s := setupBreaker(t, BreakerOpts{})
		// 10 failures among 19 calls, then 31 s later one more failure: the
		// old calls have left the 30 s window, so 1/1 is under the minimum.
		alternate(t, s, 19)
		s.clock.Advance(31 * time.Second)
		s.call(t, Failure)
		snap := s.br.Snapshot()
		if snap.State != StateClosed || snap.WindowCalls != 1 || snap.WindowFailures != 1 {
			t.Fatalf("snapshot = %+v, want closed with 1/1 in the window", snap)
		}
	})
	t.Run("within the window they count", func(t *testing.T) {
		t.Parallel()
		s := setupBreaker(t, BreakerOpts{})
		alternate(t, s, 19)
		s.clock.Advance(28 * time.Second)
		s.call(t, Failure)
		if got := s.state(); got != StateOpen {
			t.Fatalf("state = %s, want open (11/20 within 28 s)", got)
		}
	})
	t.Run("ignored outcomes do not count", func(t *testing.T) {
		t.Parallel()
		s := setupBreaker(t, BreakerOpts{})
		for range 50 {
			s.call(t, Ignore)
		}
		for range 4 {
			s.call(t, Failure)
			s.call(t, Ignore)
		}
		snap := s.br.Snapshot()
		if snap.State != StateClosed || snap.WindowCalls != 4 || snap.Consecutive != 4 {
			t.Fatalf("snapshot = %+v, want closed, 4 calls, 4 consecutive", snap)
		}
		s.call(t, Failure)
		if got := s.state(); got != StateOpen {
			t.Fatalf("state = %s, want open after the 5th failure", got)
		}
	})
}

// openBreaker returns a breaker just opened by 5 failures.
func openBreaker(t *testing.T) *breakerBundle {
	t.Helper()
	s := setupBreaker(t, BreakerOpts{})
	for range 5 {
		s.call(t, Failure)
	}
	return s
}

func TestBreakerCoolDownAndProbe(t *testing.T) {
	t.Parallel()
	t.Run("open refuses until the cool-down ends", func(t *testing.T) {
		t.Parallel()
		s := openBreaker(t)
		s.clock.Advance(15*time.Second - time.Nanosecond)
		if _, err := s.br.Allow(); !errors.Is(err, ErrOpen) {
			t.Fatalf("Allow 1ns before the cool-down ends = %v, want ErrOpen", err)
		}
		s.clock.Advance(time.Nanosecond)
		tk, err := s.br.Allow()
		if err != nil || !tk.Probe() {
			t.Fatalf("Allow at the end of the cool-down = %v, probe %v; want the probe", err, tk.Probe())
		}
		_, err = s.br.Allow()
		var oe *OpenError
		if !errors.As(err, &oe) || oe.RetryAfter() != 0 || !oe.Until.IsZero() || !errors.Is(err, ErrOpen) {
			t.Fatalf("second caller in half-open = %v, want *OpenError with no wait", err)
		}
		if got, want := err.Error(), "calls to 'billing' are suspended while a probe call is in flight"; got != want {
			t.Fatalf("error = %q, want %q", got, want)
		}
		if s.br.Name() != "billing" {
			t.Fatalf("Name = %q", s.br.Name())
		}
		if got := s.state(); got != StateHalfOpen {
			t.Fatalf("state = %s, want half_open", got)
		}
		tk.Done(Success)
	})
	t.Run("probe success closes and resets", func(t *testing.T) {
		t.Parallel()
		s := openBreaker(t)
		s.clock.Advance(15 * time.Second)
		tk, _ := s.br.Allow()
		tk.Done(Success)
		snap := s.br.Snapshot()
		if snap.State != StateClosed || snap.Consecutive != 0 || snap.WindowCalls != 0 {
			t.Fatalf("snapshot = %+v, want closed with counts reset", snap)
		}
		ch := s.Changes()
		want := []State{StateClosed, StateOpen, StateHalfOpen, StateClosed}
		if len(ch) != 3 {
			t.Fatalf("changes = %+v, want 3", ch)
		}
		for i, c := range ch {
			if c.From != want[i] || c.To != want[i+1] {
				t.Fatalf("change %d = %s->%s, want %s->%s", i, c.From, c.To, want[i], want[i+1])
			}
		}
		// 4 failures after closing must not reopen: the counts were reset.
		for range 4 {
			s.call(t, Failure)
		}
		if got := s.state(); got != StateClosed {
			t.Fatalf("state = %s, want closed", got)
		}
	})
	t.Run("probe failure reopens for a full cool-down", func(t *testing.T) {
		t.Parallel()
		s := openBreaker(t)
		s.clock.Advance(20 * time.Second)
		tk, _ := s.br.Allow()
		s.clock.Advance(2 * time.Second)
		tk.Done(Failure)
		snap := s.br.Snapshot()
		if snap.State != StateOpen || snap.RetryAfter != 15*time.Second || snap.Opens != 2 {
			t.Fatalf("snapshot = %+v, want open for a full 15s, 2 opens", snap)
		}
	})
	for _, o := range []Outcome{Ignore} {
		t.Run(fmt.Sprintf("probe %s releases the slot", o), func(t *testing.T) {
			t.Parallel()
			s := openBreaker(t)
			s.clock.Advance(15 * time.Second)
			tk, _ := s.br.Allow()
			tk.Done(o)
			if got := s.state(); got != StateHalfOpen {
				t.Fatalf("state = %s, want half_open", got)
			}
			tk2, err := s.br.Allow()
			if err != nil || !tk2.Probe() {
				t.Fatalf("next caller = %v, want a new probe", err)
			}
			// The released ticket's late report must not decide anything.
			tk.Done(Success)
			if got := s.state(); got != StateHalfOpen {
				t.Fatalf("stale ticket changed state to %s", got)
			}
			tk2.Done(Success)
			if got := s.state(); got != StateClosed {
				t.Fatalf("state = %s, want closed", got)
			}
		})
	}
}

func TestBreakerStaleTicketCannotDecide(t *testing.T) {
	t.Parallel()
	s := setupBreaker(t, BreakerOpts{})
	slow, _ := s.br.Allow() // admitted while closed, finishes much later
	for range 5 {
		s.call(t, Failure)
	}
	s.clock.Advance(15 * time.Second)
	probe, err := s.br.Allow()
	if err != nil || !probe.Probe() {
		t.Fatalf("probe: %v", err)
	}
	slow.Done(Success) // stale: must not close while the probe is in flight
	if got := s.state(); got != StateHalfOpen {
		t.Fatalf("stale success moved the breaker to %s", got)
	}
	probe.Done(Failure)
	if got := s.state(); got != StateOpen {
		t.Fatalf("state = %s, want open", got)
	}
}

func TestBreakerSingleProbeUnderConcurrency(t *testing.T) {
	t.Parallel()
	s := openBreaker(t)
	s.clock.Advance(15 * time.Second)
	const callers = 100
	var admitted, refused atomic.Int32
	tickets := make(chan Ticket, callers)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for range callers {
		wg.Go(func() {
			<-start
			tk, err := s.br.Allow()
			if err != nil {
				if !errors.Is(err, ErrOpen) {
					t.Errorf("unexpected error %v", err)
				}
				refused.Add(1)
				return
			}
			admitted.Add(1)
			tickets <- tk
		})
	}
	close(start)
	wg.Wait()
	if admitted.Load() != 1 || refused.Load() != callers-1 {
		t.Fatalf("admitted %d, refused %d; want exactly 1 probe", admitted.Load(), refused.Load())
	}
	(<-tickets).Done(Success)
	if got := s.state(); got != StateClosed {
		t.Fatalf("state = %s, want closed", got)
	}
}

func TestBreakerNilAndZeroValues(t *testing.T) {
	t.Parallel()
	var br *Breaker
	tk, err := br.Allow()
	if err != nil {
		t.Fatalf("nil breaker refused: %v", err)
	}
	tk.Done(Failure) // must not panic
	Ticket{}.Done(Success)
}

func TestNewBreakerPanicsOnNonsense(t *testing.T) {
	t.Parallel()
	for _, o := range []BreakerOpts{
		{Failures: -1}, {FailureRate: 1.5}, {FailureRate: -0.1}, {Window: -time.Second},
		{MinimumCalls: -3}, {CoolDown: -time.Second},
	} {
		func() {
			defer func() {
				r := recover()
				if msg, _ := r.(string); len(msg) < 11 || msg[:11] != "resilience:" {
					t.Errorf("NewBreaker(%+v) panic = %v, want a 'resilience:' message", o, r)
				}
			}()
			NewBreaker(o)
		}()
	}
}

func TestStringers(t *testing.T) {
	t.Parallel()
	for v, want := range map[fmt.Stringer]string{
		StateClosed: "closed", StateOpen: "open", StateHalfOpen: "half_open", State(9): "State(9)",
		Success: "success", Failure: "failure", Ignore: "ignore", Hang: "hang", Outcome(7): "Outcome(7)",
		StopNone: "retry", StopWaitCut: "wait_cut", StopOpen: "open", Stop(10): "Stop(10)",
		JitterFull: "full", JitterProportional: "proportional", Jitter(2): "Jitter(2)",
	} {
		if got := v.String(); got != want {
			t.Errorf("String() = %q, want %q", got, want)
		}
	}
}
