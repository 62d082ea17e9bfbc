package egress_test

import (
	"fmt"
	"testing"

	"github.com/jfastframework/jfast/framework/egress"
)

// staticSet returns a static set of n instances, 10.0.0.1:8000 and up, and
// them in address order.
func staticSet(t testing.TB, n int) (*egress.Instances, []*egress.Instance) {
	t.Helper()
	urls := make([]string, n)
	for i := range urls {
		urls[i] = fmt.Sprintf("http://10.0.0.%d:8000", i+1)
	}
	s, err := egress.NewInstances(egress.InstancesOpts{Name: "orders", Static: urls})
	if err != nil {
		t.Fatal(err)
	}
	return s, s.List()
}

// hold picks in n times without Done, so it has n outstanding attempts.
func hold(t *testing.T, s *egress.Instances, in *egress.Instance, n int) {
	t.Helper()
	only := func(c *egress.Instance) bool { return c == in }
	for range n {
		if got := s.Pick(nil, only); got != in {
			t.Fatalf("picked %v, want %s", got, in.Addr())
		}
	}
}

// Of two instances, the one with fewer outstanding attempts is always
// chosen: both are drawn.
func TestPickFewerOutstanding(t *testing.T) {
	t.Parallel()
	s, l := staticSet(t, 2)
	hold(t, s, l[0], 1)
	for range 200 {
		in := s.Pick(nil, nil)
		if in != l[1] {
			t.Fatalf("picked %s with %d outstanding over %s with %d", in.Addr(), in.Outstanding()-1, l[1].Addr(), l[1].Outstanding())
		}
		in.Done()
	}
}

// Of three, the most loaded is never chosen: whichever two are drawn, it
// loses to the other.
func TestPickNeverTheMostLoaded(t *testing.T) {
	t.Parallel()
	s, l := staticSet(t, 3)
	hold(t, s, l[0], 2)
	hold(t, s, l[1], 1)
	seen := map[string]int{}
	for range 600 {
		in := s.Pick(nil, nil)
		seen[in.Addr()]++
		in.Done()
	}
	if seen[l[0].Addr()] != 0 || seen[l[2].Addr()] == 0 {
		t.Fatalf("picks %v: the most loaded %s was chosen, or the idle one never", seen, l[0].Addr())
	}
}

// Idle instances share the picks evenly: 30000 picks over three, each
// drawn uniformly, put each share within 30 standard deviations of a
// third, far beyond any chance failure.
func TestPickSpreadsEvenly(t *testing.T) {
	t.Parallel()
	s, _ := staticSet(t, 3)
	seen := map[string]int{}
	for range 30000 {
		in := s.Pick(nil, nil)
		seen[in.Addr()]++
		in.Done()
	}
	for addr, n := range seen {
		if n < 7500 || n > 12500 {
			t.Errorf("%s got %d of 30000 picks: %v", addr, n, seen)
		}
	}
	if len(seen) != 3 {
		t.Fatalf("picks %v", seen)
	}
}

// Pick counts an attempt outstanding until Done.
func TestPickCountsOutstanding(t *testing.T) {
	t.Parallel()
	s, l := staticSet(t, 1)
	a, b := s.Pick(nil, nil), s.Pick(nil, nil)
	if a != l[0] || b != l[0] || l[0].Outstanding() != 2 {
		t.Fatalf("outstanding %d after two picks", l[0].Outstanding())
	}
	a.Done()
	b.Done()
	if l[0].Outstanding() != 0 {
		t.Fatalf("outstanding %d after both were done", l[0].Outstanding())
	}
}

// An instance usable refuses (its breaker open) is skipped; none usable is
// nil: the upstream is unavailable only then.
func TestPickSkipsUnusable(t *testing.T) {
	t.Parallel()
	s, l := staticSet(t, 3)
	open := map[*egress.Instance]bool{l[1]: true}
	usable := func(in *egress.Instance) bool { return !open[in] }
	for range 300 {
		in := s.Pick(nil, usable)
		if in == l[1] {
			t.Fatalf("picked %s, whose breaker is open", in.Addr())
		}
		in.Done()
	}
	open[l[0]], open[l[2]] = true, true
	if in := s.Pick(nil, usable); in != nil {
		t.Fatalf("picked %s with every breaker open", in.Addr())
	}
}

// A retry goes to an instance the call has not tried, even a busier one,
// and to a tried one only when every usable instance was tried.
func TestPickRetryGoesElsewhere(t *testing.T) {
	t.Parallel()
	s, l := staticSet(t, 3)
	hold(t, s, l[2], 5)
	for range 200 {
		in := s.Pick([]*egress.Instance{l[0], l[1]}, nil)
		if in != l[2] {
			t.Fatalf("retry went to %s, already tried, over %s", in.Addr(), l[2].Addr())
		}
		in.Done()
	}
	// l[2]'s breaker is open: of the usable, both were tried, so one of them.
	usable := func(in *egress.Instance) bool { return in != l[2] }
	if in := s.Pick([]*egress.Instance{l[0], l[1]}, usable); in != l[0] && in != l[1] {
		t.Fatalf("retry went to %v", in)
	} else {
		in.Done()
	}
	one, only := staticSet(t, 1)
	if in := one.Pick(only, nil); in != only[0] {
		t.Fatalf("the only instance was not chosen again: %v", in)
	}
}

// The hot path allocates nothing: no candidate list, no closure.
func TestPickDoesNotAllocate(t *testing.T) {
	s, l := staticSet(t, 16)
	usable := func(in *egress.Instance) bool { return in != l[3] }
	tried := []*egress.Instance{l[0]}
	if n := testing.AllocsPerRun(1000, func() { s.Pick(tried, usable).Done() }); n != 0 {
		t.Fatalf("Pick allocates %v times", n)
	}
}

// BenchmarkPick: one pick and its Done, over 3 and 16 instances, with a
// breaker-like predicate and one tried instance (a retry's pick).
func BenchmarkPick(b *testing.B) {
	for _, n := range []int{3, 16} {
		b.Run(fmt.Sprintf("instances=%d", n), func(b *testing.B) {
			s, l := staticSet(b, n)
			usable := func(in *egress.Instance) bool { return in.Outstanding() < 1<<20 }
			tried := []*egress.Instance{l[0]}
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					s.Pick(tried, usable).Done()
				}
			})
		})
	}
}
