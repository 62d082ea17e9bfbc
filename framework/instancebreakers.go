package framework

import (
	"sync"

	"github.com/jfastframework/jfast/framework/resilience"
)

// InstanceBreakers feeds one dependency's breaker metrics from the breakers
// of its instances: an upstream with instances (the http and grpc
// plugins') admits its calls without its own breaker, and each instance's
// breaker decides for that instance alone.
//
// jfast_client_breaker_transitions_total counts every transition of every
// instance's breaker under the dependency, with no instance label (instances
// come and go with a deployment; the status page and /ready name them).
// jfast_client_breaker_state is the dependency's state as a call meets it:
//
//   - 0 (closed) while some instance's breaker is closed (an instance not
//     called yet has a closed one): a call finds an instance to take it;
//   - 2 (half_open) when none is closed and some is half-open: only the
//     probes go through, the other calls are refused;
//   - 1 (open) when every instance's breaker is open, or there is no
//     instance (a discovered name not resolved yet): every call is refused.
//
// The state is worked out again at every transition of an instance's
// breaker and at every [InstanceBreakers.Refresh], from the states the
// breakers reported: it asks no breaker (asking an open breaker whose
// cool-down ended turns it half-open), so such a breaker counts as open
// until something asks it, as the gauge of a single breaker does.
type InstanceBreakers struct {
	dep      *DependencyMetrics
	breakers func() []*resilience.Breaker

	mu     sync.Mutex
	states map[*resilience.Breaker]resilience.State // the last state each breaker reported; none is closed
}

// InstanceBreakers returns the feed of d's breaker metrics from the
// breakers of its instances. breakers returns each current instance's
// breaker, nil for one not made yet (closed); it is called with no lock of
// a breaker held, and must not ask a breaker anything. The state gauge is
// set at once (open with no instance).
func (d *DependencyMetrics) InstanceBreakers(breakers func() []*resilience.Breaker) *InstanceBreakers {
	s := &InstanceBreakers{dep: d, breakers: breakers, states: map[*resilience.Breaker]resilience.State{}}
	s.Refresh()
	return s
}

// Transition counts c, a transition of br (one instance's breaker), and
// sets the state gauge: br's OnStateChange hook, which needs br itself
// because a breaker replaced by a fresh one keeps its name.
func (s *InstanceBreakers) Transition(br *resilience.Breaker, c resilience.StateChange) {
	s.dep.TransitionOnly(c)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.states[br] = c.To
	s.setLocked()
}

// Refresh sets the state gauge again, for a change no transition reports:
// the instances changed, or an instance's breaker was replaced by a fresh
// one.
func (s *InstanceBreakers) Refresh() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.setLocked()
}

func (s *InstanceBreakers) setLocked() {
	current := s.breakers()
	state := resilience.StateOpen
	kept := make(map[*resilience.Breaker]bool, len(current))
	for _, br := range current {
		kept[br] = true
		switch s.states[br] { // a breaker not made yet, or that reported nothing, is closed
		case resilience.StateClosed:
			state = resilience.StateClosed
		case resilience.StateHalfOpen:
			if state == resilience.StateOpen {
				state = resilience.StateHalfOpen
			}
		}
	}
	for br := range s.states {
		if !kept[br] { // replaced, or its instance left
			delete(s.states, br)
		}
	}
	s.dep.state.Set(float64(state))
}
