package framework_test

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/framework/resilience"
)

// The breakers of a dependency's instances feed its breaker metrics: every
// transition counted under the dependency, and one state for them all —
// closed while one is closed, half-open when none is closed and one is
// half-open, open when all are (or there is none). A breaker replaced by a
// fresh one counts as closed, and what the old one reports then is
// ignored.
func TestInstanceBreakersFeedTheDependencyMetrics(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	m := framework.NewClientMetrics()
	if err := m.Register(reg); err != nil {
		t.Fatal(err)
	}
	clock := resilience.NewTestClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	var mu sync.Mutex
	current := []*resilience.Breaker{nil, nil} // two instances, neither called yet
	feed := m.For("http", "orders").InstanceBreakers(func() []*resilience.Breaker {
		mu.Lock()
		defer mu.Unlock()
		return append([]*resilience.Breaker(nil), current...)
	})
	newBreaker := func(name string) *resilience.Breaker {
		var br *resilience.Breaker
		br = resilience.NewBreaker(resilience.BreakerOpts{Name: name, Failures: 1, CoolDown: time.Second, Clock: clock,
			OnStateChange: func(c resilience.StateChange) { feed.Transition(br, c) }})
		return br
	}
	set := func(list ...*resilience.Breaker) {
		mu.Lock()
		current = list
		mu.Unlock()
		feed.Refresh()
	}
	fail := func(br *resilience.Breaker) {
		if tk, err := br.Allow(); err == nil {
			tk.Done(resilience.Failure)
		}
	}
	check := func(step string, state float64, transitions map[string]float64) {
		t.Helper()
		got := gatherClientMetrics(t, reg)
		if s := got["jfast_client_breaker_state{dependency=orders,plugin=http}"]; s != state {
			t.Errorf("%s: state %v, want %v", step, s, state)
		}
		for fromTo, want := range transitions {
			from, to, _ := strings.Cut(fromTo, ">")
			series := "jfast_client_breaker_transitions_total{dependency=orders,from=" + from + ",plugin=http,to=" + to + "}"
			if got[series] != want {
				t.Errorf("%s: %s = %v, want %v", step, series, got[series], want)
			}
		}
	}

	check("no instance called yet", 0, nil)
	a, b := newBreaker("orders a"), newBreaker("orders b")
	set(a, b)
	fail(a)
	check("one instance open", 0, map[string]float64{"closed>open": 1})
	fail(b)
	check("every instance open", 1, map[string]float64{"closed>open": 2})
	clock.Advance(time.Second)
	a.Snapshot() // the cool-down ended: asked, a turns half-open
	check("one half-open, one open", 2, map[string]float64{"open>half_open": 1})
	b.Snapshot()
	check("every instance half-open", 2, map[string]float64{"open>half_open": 2})
	probe, err := a.Allow()
	if err != nil {
		t.Fatal(err)
	}
	probe.Done(resilience.Success)
	check("a probe closed one", 0, map[string]float64{"half_open>closed": 1})
	fail(a)
	check("open again beside a half-open one", 2, map[string]float64{"closed>open": 3})
	set(nil, b) // a's instance got a fresh breaker (its health check passed)
	check("a fresh breaker", 0, nil)
	clock.Advance(time.Second)
	a.Snapshot() // the forgotten breaker still reports
	check("the forgotten breaker's transition", 0, map[string]float64{"open>half_open": 3})
	set()
	check("no instance", 1, nil)
}

// gatherClientMetrics returns every series of reg by name and labels
// ("name{label=value,...}"), counters and gauges alike.
func gatherClientMetrics(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, f := range fams {
		for _, m := range f.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			got[f.GetName()+"{"+strings.Join(labels, ",")+"}"] = m.GetCounter().GetValue() + m.GetGauge().GetValue()
		}
	}
	return got
}
