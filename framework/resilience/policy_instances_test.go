package resilience

import (
	"errors"
	"testing"
	"time"
)

// A call admitted with NoBreaker is counted by no breaker of the policy's,
// and is admitted while the policy's breaker is open: the breakers of the
// instances its attempts went to count instead.
func TestRunNoBreaker(t *testing.T) {
	t.Parallel()
	s := setupPolicy(t, 1, 10*time.Second, func(c *PolicyConfig) { c.BreakerFailures = 1 })
	for range 3 {
		r := new(Run)
		if err := s.p.Begin(t.Context(), r, RunOpts{NoBreaker: true}); err != nil {
			t.Fatal(err)
		}
		r.Attempts(&script{clock: s.clock, verdicts: []Verdict{failed}})
		r.End(r.Outcome())
	}
	if st := s.p.Breaker().Snapshot().State; st != StateClosed {
		t.Fatalf("the policy's breaker is %s after calls admitted without it", st)
	}
	r := new(Run)
	if err := s.p.Begin(t.Context(), r, RunOpts{}); err != nil {
		t.Fatal(err)
	}
	r.End(Failure)
	var open *OpenError
	if err := s.p.Begin(t.Context(), new(Run), RunOpts{}); !errors.As(err, &open) {
		t.Fatalf("the policy's breaker did not open: %v", err)
	}
	r = new(Run)
	if err := s.p.Begin(t.Context(), r, RunOpts{NoBreaker: true}); err != nil {
		t.Fatalf("a call without the breaker was refused by it: %v", err)
	}
	r.End(Success)
}
