package resilience

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
)

// script is an Attempter that plays a list of verdicts, moving the test clock
// by took during each attempt, and keeps the records the loop reports.
type script struct {
	clock    *TestClock
	took     time.Duration
	verdicts []Verdict
	records  []AttemptRecord
}

func (s *script) Attempt(_ context.Context, n int) Verdict {
	s.clock.Advance(s.took)
	return s.verdicts[min(n, len(s.verdicts))-1]
}

func (s *script) Report(rec AttemptRecord) { s.records = append(s.records, rec) }

func (s *script) stops() []Stop {
	var out []Stop
	for _, r := range s.records {
		out = append(out, r.Stop)
	}
	return out
}

type policyBundle struct {
	clock *TestClock
	p     *Policy
}

// setupPolicy returns a policy on an auto-advancing test clock: waits move
// the clock and return at once.
func setupPolicy(t *testing.T, attempts int, timeout time.Duration, edit func(*PolicyConfig)) policyBundle {
	t.Helper()
	clock := NewTestClock(epoch)
	clock.SetAutoAdvance(true)
	cfg := DefaultPolicyConfig()
	cfg.Attempts, cfg.Timeout = attempts, timeout
	if edit != nil {
		edit(&cfg)
	}
	return policyBundle{clock: clock, p: NewPolicy(PolicyOpts{Name: "billing", Config: cfg, Clock: clock})}
}

// withBucket gives a call its retries: a full token bucket of 10.
func withBucket(c *PolicyConfig) { c.RetryBudget = BudgetBucket }

var (
	errRefused = errors.New("connection refused")
	failed     = Verdict{Err: errRefused, Outcome: Failure, Retry: true}
	answered   = Verdict{Outcome: Success}
)

func TestRunRetriesUntilAnswer(t *testing.T) {
	t.Parallel()
	s := setupPolicy(t, 3, 10*time.Second, withBucket)
	r := new(Run)
	err := s.p.Begin(t.Context(), r, RunOpts{})
	if err != nil {
		t.Fatal(err)
	}
	a := &script{clock: s.clock, verdicts: []Verdict{failed, failed, answered}}
	if v := r.Attempts(a); v.Err != nil || r.Made() != 3 || r.Outcome() != Success {
		t.Fatalf("verdict %+v after %d attempts, outcome %s; want the third attempt's answer", v, r.Made(), r.Outcome())
	}
	r.End(r.Outcome())
	if got, want := a.stops(), []Stop{StopNone, StopNone, StopFinal}; !slices.Equal(got, want) {
		t.Fatalf("stops = %v, want %v", got, want)
	}
	// Full jitter: wait n is at most the backoff ceiling of n.
	sleeps := s.clock.Sleeps()
	if len(sleeps) != 2 {
		t.Fatalf("sleeps = %v, want 2", sleeps)
	}
	for i, d := range sleeps {
		if c := s.p.backoff.Ceiling(i + 1); d < 0 || d > c || d != a.records[i].Wait {
			t.Fatalf("wait %d = %s (reported %s), want within [0, %s]", i+1, d, a.records[i].Wait, c)
		}
	}
	// One ticket per call: the breaker saw one call, a success.
	if snap := s.p.Breaker().Snapshot(); snap.WindowCalls != 1 || snap.WindowFailures != 0 {
		t.Fatalf("breaker = %+v, want 1 call, 0 failures", snap)
	}
	if b := s.p.Budget().Snapshot(); b.Calls != 1 || b.Retries != 2 {
		t.Fatalf("budget = %+v, want 1 call and 2 retries", b)
	}
	if s.p.Bulkhead().InFlight() != 0 {
		t.Fatal("the bulkhead place was not freed")
	}
}

func TestRunStops(t *testing.T) {
	t.Parallel()
	notRetried := Verdict{Err: errRefused, Outcome: Failure}
	for _, tc := range []struct {
		name     string
		attempts int
		timeout  time.Duration
		took     time.Duration
		edit     func(*PolicyConfig)
		verdicts []Verdict
		opts     RunOpts
		want     []Stop
	}{
		{name: "attempts", attempts: 3, timeout: time.Minute, edit: withBucket, verdicts: []Verdict{failed}, want: []Stop{StopNone, StopNone, StopAttempts}},
		{name: "one attempt for a call not safe to repeat", attempts: 3, timeout: time.Minute, verdicts: []Verdict{failed}, opts: RunOpts{Attempts: 1}, want: []Stop{StopAttempts}},
		{name: "final", attempts: 3, timeout: time.Minute, verdicts: []Verdict{notRetried}, want: []Stop{StopFinal}},
		// The attempt took 600 ms of a 1 s timeout: the wait and another
		// 600 ms cannot fit in the 400 ms left.
		{name: "deadline", attempts: 3, timeout: time.Second, took: 600 * time.Millisecond, verdicts: []Verdict{failed}, want: []Stop{StopDeadline}},
		// A hang whose retry goes to another instance (NoBreaker: the
		// instances' breakers are the plugin's): its 600 ms are the cut
		// that ended it, so only the wait must fit in the 400 ms left.
		{
			name: "hang retried elsewhere", attempts: 3, timeout: time.Second, took: 600 * time.Millisecond, edit: withBucket, opts: RunOpts{NoBreaker: true},
			verdicts: []Verdict{{Err: errRefused, Outcome: Hang, Retry: true, Elsewhere: true}, answered}, want: []Stop{StopNone, StopFinal},
		},
		{
			name: "hang retried on the same instance", attempts: 3, timeout: time.Second, took: 600 * time.Millisecond, edit: withBucket, opts: RunOpts{NoBreaker: true},
			verdicts: []Verdict{{Err: errRefused, Outcome: Hang, Retry: true}, answered}, want: []Stop{StopDeadline},
		},
		{
			name: "asked wait past the deadline", attempts: 3, timeout: time.Second,
			verdicts: []Verdict{{Err: errRefused, Outcome: Failure, Retry: true, Wait: time.Second, Asked: true}}, want: []Stop{StopDeadline},
		},
		{
			name: "budget", attempts: 3, timeout: time.Minute, verdicts: []Verdict{failed}, want: []Stop{StopNone, StopBudget},
			edit: func(c *PolicyConfig) { c.RetryBudget, c.RetryBudgetMaxTokens = BudgetBucket, 1 },
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := setupPolicy(t, tc.attempts, tc.timeout, tc.edit)
			r := new(Run)
			err := s.p.Begin(t.Context(), r, tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			a := &script{clock: s.clock, took: tc.took, verdicts: tc.verdicts}
			r.Attempts(a)
			r.End(r.Outcome())
			if got := a.stops(); !slices.Equal(got, tc.want) {
				t.Fatalf("stops = %v, want %v", got, tc.want)
			}
			if r.Stopped() != tc.want[len(tc.want)-1] {
				t.Fatalf("Stopped = %s", r.Stopped())
			}
		})
	}
}

func TestPolicyOnAttemptHearsEveryAttempt(t *testing.T) {
	t.Parallel()
	clock := NewTestClock(epoch)
	clock.SetAutoAdvance(true)
	cfg := DefaultPolicyConfig()
	cfg.RetryBudget = BudgetBucket
	var heard []AttemptRecord
	p := NewPolicy(PolicyOpts{Config: cfg, Clock: clock, OnAttempt: func(rec AttemptRecord) { heard = append(heard, rec) }})
	r := new(Run)
	if err := p.Begin(t.Context(), r, RunOpts{}); err != nil {
		t.Fatal(err)
	}
	a := &script{clock: clock, verdicts: []Verdict{failed, answered}}
	r.Attempts(a)
	r.End(r.Outcome())
	if len(heard) != 2 || !slices.Equal(heard, a.records) {
		t.Fatalf("OnAttempt heard %+v, want what Report heard: %+v", heard, a.records)
	}
}

func TestRunAskedWaitIsExact(t *testing.T) {
	t.Parallel()
	s := setupPolicy(t, 2, time.Minute, nil)
	r := new(Run)
	err := s.p.Begin(t.Context(), r, RunOpts{})
	if err != nil {
		t.Fatal(err)
	}
	asked := Verdict{Err: errRefused, Outcome: Failure, Retry: true, Wait: 3 * time.Second, Asked: true}
	r.Attempts(&script{clock: s.clock, verdicts: []Verdict{asked, answered}})
	r.End(r.Outcome())
	if got := s.clock.Sleeps(); !slices.Equal(got, []time.Duration{3 * time.Second}) {
		t.Fatalf("sleeps = %v, want the asked 3s", got)
	}
}

func TestRunCutByCallerIsNoEvidence(t *testing.T) {
	t.Parallel()
	s := setupPolicy(t, 3, time.Minute, func(c *PolicyConfig) { c.BreakerFailures = 1 })
	ctx, cancel := context.WithCancel(t.Context())
	r := new(Run)
	err := s.p.Begin(ctx, r, RunOpts{})
	if err != nil {
		t.Fatal(err)
	}
	cancel() // the caller gives up during the attempt
	a := &script{clock: s.clock, verdicts: []Verdict{failed}}
	r.Attempts(a)
	r.End(r.Outcome())
	if r.Outcome() != Ignore || a.records[0].Stop != StopEnded {
		t.Fatalf("outcome %s, stop %s; want ignore, ended", r.Outcome(), a.records[0].Stop)
	}
	if st := s.p.Breaker().Snapshot().State; st != StateClosed {
		t.Fatalf("breaker %s after a call its caller cut, want closed", st)
	}
}

func TestRunWaitCutByContext(t *testing.T) {
	t.Parallel()
	clock := NewTestClock(epoch) // not auto-advancing: the wait blocks
	cfg := DefaultPolicyConfig()
	cfg.Attempts, cfg.Timeout = 2, time.Minute
	p := NewPolicy(PolicyOpts{Config: cfg, Clock: clock})
	ctx, cancel := context.WithCancel(t.Context())
	r := new(Run)
	err := p.Begin(ctx, r, RunOpts{})
	if err != nil {
		t.Fatal(err)
	}
	a := &script{clock: clock, verdicts: []Verdict{{Err: errRefused, Outcome: Failure, Retry: true, Wait: time.Second, Asked: true}}}
	go func() {
		clock.BlockUntil(1)
		cancel()
	}()
	r.Attempts(a)
	r.End(r.Outcome())
	if r.Stopped() != StopWaitCut || r.Made() != 1 || r.Outcome() != Failure {
		t.Fatalf("stopped %s after %d attempts, outcome %s; want wait_cut after 1, a failure (decided before the wait)", r.Stopped(), r.Made(), r.Outcome())
	}
}

func TestPolicyBeginRefuses(t *testing.T) {
	t.Parallel()
	clock := NewTestClock(epoch)
	cfg := DefaultPolicyConfig()
	cfg.BreakerFailures, cfg.MaxConcurrent, cfg.Attempts, cfg.Timeout = 1, 1, 1, time.Minute
	p := NewPolicy(PolicyOpts{Config: cfg, Clock: clock})
	s := policyBundle{clock: clock, p: p}
	r := new(Run)
	err := s.p.Begin(t.Context(), r, RunOpts{})
	if err != nil {
		t.Fatal(err)
	}
	refused := make(chan error)
	go func() {
		refused <- s.p.Begin(t.Context(), new(Run), RunOpts{})
	}()
	clock.BlockUntil(1) // the second call waits for the place
	clock.Advance(cfg.BulkheadWait)
	if err := <-refused; !errors.Is(err, ErrBulkheadFull) {
		t.Fatalf("second call with the only place held = %v, want ErrBulkheadFull", err)
	}
	r.Attempts(&script{clock: s.clock, verdicts: []Verdict{failed}})
	r.End(r.Outcome())
	if err := s.p.Begin(t.Context(), new(Run), RunOpts{}); !errors.Is(err, ErrOpen) {
		t.Fatalf("call after a failure of a 1-failure breaker = %v, want ErrOpen", err)
	}
	if s.p.Bulkhead().InFlight() != 0 {
		t.Fatal("a refused call holds a bulkhead place")
	}
}

// NoBulkhead: every call has a place, max_concurrent is not read.
// WithDeadline: the call's context is the hook's, with the deadline the
// policy's timeout gives, and the call's end ends it.
func TestPolicyNoBulkheadAndWithDeadline(t *testing.T) {
	t.Parallel()
	cfg := DefaultPolicyConfig()
	cfg.MaxConcurrent, cfg.Timeout = 1, time.Minute
	type made struct {
		deadline time.Time
		ended    bool
	}
	var got []*made
	p := NewPolicy(PolicyOpts{Config: cfg, NoBulkhead: true,
		WithDeadline: func(ctx context.Context, d time.Time) (context.Context, context.CancelFunc) {
			m := &made{deadline: d}
			got = append(got, m)
			return ctx, func() { m.ended = true }
		}})
	if p.Bulkhead() != nil {
		t.Fatal("a policy without a bulkhead returns one")
	}
	runs := make([]Run, 3)
	for i := range runs {
		before := time.Now()
		if err := p.Begin(t.Context(), &runs[i], RunOpts{}); err != nil {
			t.Fatalf("call %d of 3 with max_concurrent = 1 and no bulkhead: %v", i+1, err)
		}
		if d := got[i].deadline; d.Before(before.Add(cfg.Timeout)) || d.After(time.Now().Add(cfg.Timeout)) {
			t.Fatalf("deadline given to WithDeadline = %v, want the call's start + %s", d, cfg.Timeout)
		}
		if runs[i].Context() != t.Context() {
			t.Fatal("the call's context is not the one WithDeadline returned")
		}
	}
	runs[0].End(Success)
	if !got[0].ended || got[1].ended {
		t.Fatal("End did not end its own call's context (only)")
	}
	// An open-ended call keeps its own timer.
	var r Run
	if err := p.Begin(t.Context(), &r, RunOpts{OpenEnded: true}); err != nil {
		t.Fatal(err)
	}
	defer r.End(Ignore)
	if len(got) != 3 {
		t.Fatal("WithDeadline was asked for an open-ended call")
	}
}

func TestRunOpenEndedTimeout(t *testing.T) {
	t.Parallel()
	cause := errors.New("headers too late")
	cfg := DefaultPolicyConfig()
	cfg.Timeout = time.Millisecond
	p := NewPolicy(PolicyOpts{Config: cfg})
	r := new(Run)
	err := p.Begin(t.Context(), r, RunOpts{OpenEnded: true, TimeoutCause: cause})
	if err != nil {
		t.Fatal(err)
	}
	defer r.End(Ignore)
	if _, ok := r.Context().Deadline(); ok {
		t.Fatal("an open-ended call's context has a deadline")
	}
	<-r.Context().Done()
	if !errors.Is(context.Cause(r.Context()), cause) {
		t.Fatalf("cause = %v, want the timeout's", context.Cause(r.Context()))
	}
}

type problems []string

func (p *problems) Error(key, problem, _ string) { *p = append(*p, key+": "+problem) }
func (p *problems) Positive(key string, n int)   { checkPositive(p, key, n) }
func (p *problems) Deadline(key string, d time.Duration) {
	if d <= 0 {
		p.Error(key, "must be positive", "")
	}
}

func checkPositive(p *problems, key string, n int) {
	if n <= 0 {
		p.Error(key, "must be positive", "")
	}
}

func TestPolicyConfigValidate(t *testing.T) {
	t.Parallel()
	var ok problems
	DefaultPolicyConfig().Validate(&ok)
	if len(ok) != 0 {
		t.Fatalf("the defaults are refused: %v", ok)
	}
	c := DefaultPolicyConfig()
	c.Attempts = 0
	c.BackoffMax = c.BackoffBase / 2
	c.BackoffJitter = "some"
	c.RetryBudget = "bank"
	c.RetryBudgetRatio = 0
	c.RetryBudgetMaxTokens = 0.5
	c.MaxConcurrent = 0
	c.BreakerCoolDown = 0
	var got problems
	c.Validate(&got)
	want := []string{"attempts", "backoff_max", "backoff_jitter", "retry_budget:", "retry_budget_ratio", "retry_budget_max_tokens", "max_concurrent", "breaker_cool_down"}
	if len(got) != len(want) {
		t.Fatalf("problems = %q, want one per key of %q", got, want)
	}
	for i, k := range want {
		if !strings.HasPrefix(got[i], k) {
			t.Fatalf("problem %d = %q, want key %s", i, got[i], k)
		}
	}
}

func TestPolicyConfigFillZero(t *testing.T) {
	t.Parallel()
	c := PolicyConfig{MaxConcurrent: 7}
	c.FillZero(DefaultPolicyConfig())
	d := DefaultPolicyConfig()
	d.MaxConcurrent = 7
	if c != d {
		t.Fatalf("filled = %+v, want the defaults but max_concurrent", c)
	}
}

// A verdict the plugin Judged itself keeps its outcome when the caller's
// context cut the attempt: storage counts a caller's deadline after
// connect_timeout of the disk's silence as a hang.
func TestRunJudgedVerdictKeepsItsOutcome(t *testing.T) {
	t.Parallel()
	s := setupPolicy(t, 3, time.Minute, func(c *PolicyConfig) { c.BreakerFailures = 1 })
	ctx, cancel := context.WithCancel(t.Context())
	r := new(Run)
	if err := s.p.Begin(ctx, r, RunOpts{}); err != nil {
		t.Fatal(err)
	}
	cancel()
	judged := failed
	judged.Judged = true
	a := &script{clock: s.clock, verdicts: []Verdict{judged}}
	r.Attempts(a)
	r.End(r.Outcome())
	if r.Outcome() != Failure || a.records[0].Stop != StopEnded {
		t.Fatalf("outcome %s, stop %s; want the plugin's failure, ended", r.Outcome(), a.records[0].Stop)
	}
	if st := s.p.Breaker().Snapshot().State; st != StateOpen {
		t.Fatalf("breaker %s after a judged failure with breaker_failures = 1, want open", st)
	}
}

// beginProbe opens s's breaker (breaker_failures = 1), lets its cool-down
// pass and begins the call that is its probe.
func beginProbe(t *testing.T, s policyBundle) (*Breaker, *Run) {
	t.Helper()
	br := s.p.Breaker()
	tk, err := br.Allow()
	if err != nil {
		t.Fatal(err)
	}
	tk.Done(Failure) // open
	s.clock.Advance(DefaultBreakerCoolDown)
	r := new(Run)
	if err := s.p.Begin(t.Context(), r, RunOpts{}); err != nil {
		t.Fatal(err)
	}
	return br, r
}

// Settle counts the outcome at once and keeps the bulkhead place until End,
// which counts nothing more: a half-open probe settled at its headers frees
// the breaker for the next call while its body is still read.
func TestRunSettleCountsOnceAndKeepsThePlace(t *testing.T) {
	t.Parallel()
	s := setupPolicy(t, 1, time.Minute, func(c *PolicyConfig) {
		c.BreakerFailures, c.MaxConcurrent = 1, 1
	})
	br, r := beginProbe(t, s)
	if !r.Probe() {
		t.Fatal("the first call after the cool-down is not the probe")
	}
	r.Attempts(&script{clock: s.clock, verdicts: []Verdict{answered}})
	r.Settle(Success)
	if st := br.Snapshot().State; st != StateClosed {
		t.Fatalf("breaker %s after the probe settled a success, want closed", st)
	}
	if n := s.p.Bulkhead().InFlight(); n != 1 {
		t.Fatalf("%d in flight after Settle, want the settled call's place kept", n)
	}
	if r.Context().Err() != nil {
		t.Fatal("Settle ended the call's context")
	}
	r.End(Failure) // counts nothing: the ticket was settled
	if snap := br.Snapshot(); snap.State != StateClosed || snap.WindowFailures != 0 {
		t.Fatalf("breaker after End of a settled call = %+v, want closed with no failure", snap)
	}
	if n := s.p.Bulkhead().InFlight(); n != 0 || r.Context().Err() == nil {
		t.Fatalf("after End: %d in flight, context %v; want the place freed and the context ended", n, r.Context().Err())
	}
}

// EndTransfer after Settle counts a failure or a hang of the transfer on a
// ticket of its own (the probe's was spent at its answer), and nothing for
// any other outcome; without Settle it is End.
func TestRunEndTransferCountsAFailureSinceTheSettle(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name   string
		settle bool
		end    Outcome
		opens  bool // breaker_failures = 1: one counted failure opens it
	}{
		{"settled, transfer failed", true, Failure, true},
		{"settled, transfer hung", true, Hang, true},
		{"settled, transfer ended", true, Success, false},
		{"settled, caller left", true, Ignore, false},
		{"not settled, failed", false, Failure, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			s := setupPolicy(t, 1, time.Minute, func(pc *PolicyConfig) { pc.BreakerFailures = 1 })
			br, r := beginProbe(t, s)
			r.Attempts(&script{clock: s.clock, verdicts: []Verdict{answered}})
			if c.settle {
				r.Settle(Success)
				if st := br.Snapshot().State; st != StateClosed {
					t.Fatalf("breaker %s after the probe settled, want closed", st)
				}
			}
			r.EndTransfer(c.end)
			snap := br.Snapshot()
			if (snap.State == StateOpen) != c.opens {
				t.Fatalf("breaker %s after EndTransfer(%s), want open: %v", snap.State, c.end, c.opens)
			}
			if !c.opens && snap.State != StateClosed {
				t.Fatalf("breaker %s after EndTransfer(%s), want closed", snap.State, c.end)
			}
			if n := s.p.Bulkhead().InFlight(); n != 0 || r.Context().Err() == nil {
				t.Fatalf("after EndTransfer: %d in flight, context %v; want the call ended", n, r.Context().Err())
			}
		})
	}
}

func TestPolicyKeysAreTheConfigsTags(t *testing.T) {
	t.Parallel()
	keys := PolicyKeys()
	for _, k := range []string{"attempts", "timeout", "backoff_base", "retry_budget_ratio", "max_concurrent", "throttle_k", "hedge_after", "breaker_failures", "breaker_cool_down"} {
		if !slices.Contains(keys, k) {
			t.Errorf("PolicyKeys() lacks %q: %v", k, keys)
		}
	}
	if slices.Contains(keys, "") || slices.Contains(keys, ",squash") {
		t.Errorf("PolicyKeys() holds a squashed struct's tag: %v", keys)
	}
	keys[0] = "changed"
	if PolicyKeys()[0] == "changed" {
		t.Error("PolicyKeys() returns its own slice: a caller can change it")
	}
}

func TestValidateUnhedgedNamesWhatIsSet(t *testing.T) {
	t.Parallel()
	var none problems
	DefaultPolicyConfig().ValidateUnhedged(&none, "why", "fix")
	if len(none) != 0 {
		t.Fatalf("the defaults were refused: %v", none)
	}
	c := DefaultPolicyConfig()
	c.HedgeAfter, c.MaxHedges = "p95", 2
	var both problems
	c.ValidateUnhedged(&both, "why", "fix")
	if len(both) != 2 || !strings.HasPrefix(both[0], "hedge_after: why") || !strings.HasPrefix(both[1], "max_hedges: why") {
		t.Fatalf("refused %v, want hedge_after and max_hedges", both)
	}
}

// setProblems is problems that knows which keys the configuration set, as
// framework.Validation does.
type setProblems struct {
	problems
	set []string
}

func (p *setProblems) IsSet(key string) bool { return slices.Contains(p.set, key) }

// A validator that can say what was set has hedge_after and max_hedges
// refused whenever they are set, at their default value too.
func TestValidateUnhedgedRefusesSetDefaults(t *testing.T) {
	t.Parallel()
	var none setProblems
	DefaultPolicyConfig().ValidateUnhedged(&none, "why", "fix")
	if len(none.problems) != 0 {
		t.Fatalf("the defaults, not set, were refused: %v", none.problems)
	}
	both := setProblems{set: []string{"hedge_after", "max_hedges"}}
	DefaultPolicyConfig().ValidateUnhedged(&both, "why", "fix")
	if p := both.problems; len(p) != 2 || !strings.HasPrefix(p[0], "hedge_after: why") || !strings.HasPrefix(p[1], "max_hedges: why") {
		t.Fatalf("refused %v, want hedge_after and max_hedges, set to their defaults", p)
	}
}

// An unhedged dependency's hedge keys get the refusal alone: no second
// problem saying how to write a valid value of a key it then refuses.
func TestValidateUnhedgedSaysOneThingPerKey(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		hedgeAfter string
		maxHedges  int
	}{{"p100", 1}, {"0s", 1}, {"", 0}, {"p95", -1}} {
		c := DefaultPolicyConfig()
		c.HedgeAfter, c.MaxHedges = tc.hedgeAfter, tc.maxHedges
		var got problems
		c.ValidateUnhedged(&got, "why", "fix")
		for _, p := range got {
			if !strings.Contains(p, ": why") {
				t.Errorf("hedge_after %q, max_hedges %d: %q is not the refusal", tc.hedgeAfter, tc.maxHedges, p)
			}
		}
		if want := btoi(tc.hedgeAfter != "") + btoi(tc.maxHedges != DefaultMaxHedges); len(got) != want {
			t.Errorf("hedge_after %q, max_hedges %d: %d problems %v, want %d", tc.hedgeAfter, tc.maxHedges, len(got), got, want)
		}
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// Spans of time that are not deadlines (windows, cool-downs, waits) are
// refused at zero with a fix of their own, not as deadlines (whose fix says
// they cannot be switched off).
func TestSpansAreNotCalledDeadlines(t *testing.T) {
	t.Parallel()
	c := DefaultPolicyConfig()
	c.BreakerWindow, c.BreakerCoolDown, c.BackoffBase, c.BackoffMax, c.BulkheadWait, c.ThrottleWindow = -1, -1, -1, -1, -1, -1
	var got withFixes
	c.Validate(&got)
	for _, k := range []string{"breaker_window", "breaker_cool_down", "backoff_base", "backoff_max", "bulkhead_wait", "throttle_window"} {
		want := k + `: must be a positive duration, got -1ns; fix: set a duration such as "`
		if !slices.ContainsFunc(got, func(p string) bool { return strings.HasPrefix(p, want) }) {
			t.Errorf("%s = -1: no problem %q…; got %v", k, want, got)
		}
	}
}

// withFixes records each problem with its fix, and a deadline's as such.
type withFixes []string

func (p *withFixes) Error(key, problem, fix string) { *p = append(*p, key+": "+problem+"; fix: "+fix) }
func (p *withFixes) Positive(key string, n int) {
	if n <= 0 {
		*p = append(*p, key+": not positive")
	}
}
func (p *withFixes) Deadline(key string, d time.Duration) {
	if d <= 0 {
		*p = append(*p, key+": a deadline")
	}
}

// EndAnswered counts the call's outcome at its last attempt's end, which
// the loop read; End counts it when it is called.
func TestRunEndAnsweredCountsAtTheLastAttemptsEnd(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		end  func(*Run)
		want time.Time
	}{
		{"EndAnswered", func(r *Run) { r.EndAnswered(r.Outcome()) }, epoch.Add(time.Second)},
		{"End", func(r *Run) { r.End(r.Outcome()) }, epoch.Add(time.Second + time.Minute)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := NewTestClock(epoch)
			cfg := DefaultPolicyConfig()
			cfg.Attempts, cfg.Timeout, cfg.BreakerFailures = 1, time.Hour, 1
			var opened []time.Time
			p := NewPolicy(PolicyOpts{Name: "billing", Config: cfg, Clock: clock,
				OnStateChange: func(c StateChange) { opened = append(opened, c.At) }})
			var r Run
			if err := p.Begin(context.Background(), &r, RunOpts{}); err != nil {
				t.Fatal(err)
			}
			r.Attempts(&script{clock: clock, took: time.Second, verdicts: []Verdict{failed}})
			clock.Advance(time.Minute)
			tc.end(&r)
			if len(opened) != 1 || !opened[0].Equal(tc.want) {
				t.Fatalf("the breaker opened at %v, want once at %v", opened, tc.want)
			}
		})
	}
}

// A retry that sent nothing (no instance would take it) ends the call, as
// its verdict asks for no retry, gives back the budget it was granted, and
// is an attempt made, not one sent.
func TestUnsentRetryGivesItsBudgetBack(t *testing.T) {
	t.Parallel()
	b := setupPolicy(t, 3, time.Second, func(c *PolicyConfig) { c.RetryBudget = BudgetBucket })
	var run Run
	if err := b.p.Begin(context.Background(), &run, RunOpts{}); err != nil {
		t.Fatal(err)
	}
	refused := Verdict{Err: errors.New("connection refused"), Outcome: Failure, Retry: true}
	s := &script{clock: b.clock, verdicts: []Verdict{refused, {Err: errors.New("every instance refuses"), Outcome: Ignore, Unsent: true}}}
	run.Attempts(s)
	run.End(run.Outcome())
	if got := s.stops(); len(got) != 2 || got[0] != StopNone || got[1] != StopFinal {
		t.Fatalf("stops %v, want a retry, then the unsent one ending the call", got)
	}
	if snap := b.p.Budget().Snapshot(); snap.Retries != 0 || snap.Tokens != DefaultTokenBucketMaxTokens {
		t.Fatalf("budget %+v, want the unsent retry's token given back", snap)
	}
	if run.Made() != 2 || run.Sent() != 1 {
		t.Fatalf("made %d, sent %d; want 2 made, the first alone sent", run.Made(), run.Sent())
	}
}

// fixes records each problem with its fix.
type fixes []string

func (f *fixes) Error(key, problem, fix string) { *f = append(*f, key+": "+problem+"; fix: "+fix) }
func (f *fixes) Positive(string, int)           {}
func (f *fixes) Deadline(string, time.Duration) {}

// max_hedges a call can never reach (above attempts − 1: a hedge is an
// attempt) is refused, naming the key, the bound and both fixes; up to the
// bound, and the default 1 whatever attempts, it passes.
func TestMaxHedgesAboveAttemptsRefused(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		attempts, maxHedges int
		want                string
	}{
		{3, 1_000_000, "max_hedges: must not be above attempts − 1 (2): a hedge is an attempt, so a call never starts more, got 1000000; fix: set max_hedges ≤ 2 or raise attempts to 1000001"},
		{1, 2, "max_hedges: must not be above attempts − 1 (0): a hedge is an attempt, so a call never starts more, got 2; fix: leave max_hedges out (with attempts = 1 no call is hedged) or raise attempts to 3"},
		{3, 2, ""},
		{1, 1, ""},
	} {
		c := DefaultPolicyConfig()
		c.HedgeAfter, c.Attempts, c.MaxHedges = "20ms", tc.attempts, tc.maxHedges
		var got fixes
		c.Validate(&got)
		if tc.want == "" && len(got) != 0 || tc.want != "" && (len(got) != 1 || got[0] != tc.want) {
			t.Errorf("attempts %d, max_hedges %d: %q, want %q", tc.attempts, tc.maxHedges, got, tc.want)
		}
	}
}
