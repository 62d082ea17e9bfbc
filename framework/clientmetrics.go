package framework

import (
	"errors"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/jfastframework/jfast/framework/resilience"
)

// ClientMetrics is the one set of outbound-policy metrics, the same for every
// plugin that calls out (http, grpc, llm, storage; db, cache and auth feed
// only their breakers into it, as dependencies "db", "redis" and "jwks"),
// labelled by plugin and dependency (docs/status.md, "Metrics"):
//
//   - jfast_client_calls_total{plugin,dependency,outcome}: calls by how they
//     ended, in the plugin's words (its page lists them).
//   - jfast_client_attempts_total{plugin,dependency}: requests sent, first
//     attempts and retries.
//   - jfast_client_retries_total{plugin,dependency}: retries sent.
//   - jfast_client_retry_budget_refusals_total{plugin,dependency}: retries
//     the budget refused.
//   - jfast_client_bulkhead_rejections_total{plugin,dependency}: calls
//     refused after bulkhead_wait.
//   - jfast_client_throttled_retries_total{plugin,dependency}: retries the
//     adaptive throttle dropped (a dropped call is a calls_total outcome).
//   - jfast_client_hedges_total{plugin,dependency}: hedges sent (each is
//     also an attempt).
//   - jfast_client_breaker_transitions_total{plugin,dependency,from,to} and
//     jfast_client_breaker_state{plugin,dependency} (0 closed, 1 open, 2
//     half_open).
//
// A plugin makes one with [NewClientMetrics], registers it in the App's
// registry with [ClientMetrics.Register] (a family another plugin registered
// first is reused) and takes one [DependencyMetrics] per dependency.
type ClientMetrics struct {
	calls       *prometheus.CounterVec
	attempts    *prometheus.CounterVec
	retries     *prometheus.CounterVec
	refusals    *prometheus.CounterVec
	rejections  *prometheus.CounterVec
	throttled   *prometheus.CounterVec
	hedges      *prometheus.CounterVec
	transitions *prometheus.CounterVec
	state       *breakerStates
}

// breakerStates is jfast_client_breaker_state. Before each scrape it reads
// the breaker each dependency follows (DependencyMetrics.Follow): an open
// breaker whose cool-down has ended becomes half-open when read, as /ready
// shows it, so the gauge says so on a service that makes no call.
type breakerStates struct {
	*prometheus.GaugeVec
	mu       sync.Mutex
	breakers map[[2]string]*resilience.Breaker // by plugin and dependency
}

// Collect implements prometheus.Collector.
func (s *breakerStates) Collect(ch chan<- prometheus.Metric) {
	s.mu.Lock()
	bs := make([]*resilience.Breaker, 0, len(s.breakers))
	for _, b := range s.breakers {
		bs = append(bs, b)
	}
	s.mu.Unlock()
	for _, b := range bs {
		b.Snapshot() // a change it makes sets the gauge (Transition)
	}
	s.GaugeVec.Collect(ch)
}

// NewClientMetrics returns the collectors, registered nowhere yet.
func NewClientMetrics() *ClientMetrics {
	dep := []string{"plugin", "dependency"}
	counter := func(name, help string, labels ...string) *prometheus.CounterVec {
		return NewCounterVec(name, help, append(dep, labels...)...)
	}
	return &ClientMetrics{
		calls:      counter("jfast_client_calls_total", "Outbound calls by outcome, in the words of the plugin that made them.", "outcome"),
		attempts:   counter("jfast_client_attempts_total", "Outbound requests sent: first attempts and retries."),
		retries:    counter("jfast_client_retries_total", "Outbound retries sent."),
		refusals:   counter("jfast_client_retry_budget_refusals_total", "Retries the retry budget refused: the failure went back to the caller instead."),
		rejections: counter("jfast_client_bulkhead_rejections_total", "Calls refused because max_concurrent calls were in flight for bulkhead_wait."),
		throttled:  counter("jfast_client_throttled_retries_total", "Retries the adaptive throttle dropped: the last answer went back to the caller instead."),
		hedges:     counter("jfast_client_hedges_total", "Hedges sent: attempts started beside another of the same call still in flight."),
		transitions: counter("jfast_client_breaker_transitions_total",
			"Breaker state changes of a dependency, by from and to state.", "from", "to"),
		state: &breakerStates{GaugeVec: NewGaugeVec("jfast_client_breaker_state", "Breaker state of a dependency: 0 closed, 1 open, 2 half_open.", dep...),
			breakers: map[[2]string]*resilience.Breaker{}},
	}
}

// Register registers every collector in reg; one already registered there
// (by another plugin or client) is reused, so every client of a registry
// counts in the same families.
func (m *ClientMetrics) Register(reg prometheus.Registerer) error {
	return errors.Join(
		RegisterOrReuse(reg, &m.calls),
		RegisterOrReuse(reg, &m.attempts),
		RegisterOrReuse(reg, &m.retries),
		RegisterOrReuse(reg, &m.refusals),
		RegisterOrReuse(reg, &m.rejections),
		RegisterOrReuse(reg, &m.throttled),
		RegisterOrReuse(reg, &m.hedges),
		RegisterOrReuse(reg, &m.transitions),
		RegisterOrReuse(reg, &m.state),
	)
}

// DependencyMetrics are one dependency's series, looked up once.
type DependencyMetrics struct {
	m                    *ClientMetrics
	plugin, dependency   string
	attempts, retries    prometheus.Counter
	refusals, rejections prometheus.Counter
	throttled, hedges    prometheus.Counter
	state                prometheus.Gauge
}

// For returns the series of plugin's dependency.
func (m *ClientMetrics) For(plugin, dependency string) *DependencyMetrics {
	return &DependencyMetrics{
		m: m, plugin: plugin, dependency: dependency,
		attempts:   m.attempts.WithLabelValues(plugin, dependency),
		retries:    m.retries.WithLabelValues(plugin, dependency),
		refusals:   m.refusals.WithLabelValues(plugin, dependency),
		rejections: m.rejections.WithLabelValues(plugin, dependency),
		throttled:  m.throttled.WithLabelValues(plugin, dependency),
		hedges:     m.hedges.WithLabelValues(plugin, dependency),
		state:      m.state.WithLabelValues(plugin, dependency),
	}
}

// BreakerFor returns the breaker series alone of plugin's dependency, for a
// plugin whose breaker is all it has of the policy (db, cache and auth count
// their calls in families of their own): the other series would show it at
// 0 for ever. Only Transition and TransitionOnly may be called on it.
func (m *ClientMetrics) BreakerFor(plugin, dependency string) *DependencyMetrics {
	return &DependencyMetrics{m: m, plugin: plugin, dependency: dependency,
		state: m.state.WithLabelValues(plugin, dependency)}
}

// Calls returns the calls counter of one outcome, for a plugin to look up
// once per outcome.
func (d *DependencyMetrics) Calls(outcome string) prometheus.Counter {
	return d.m.calls.WithLabelValues(d.plugin, d.dependency, outcome)
}

// Attempt counts one attempt the policy's loop made and sent, as a retry
// or a hedge when it was one (not one that found no instance to take it,
// Verdict.Unsent: such a retry or hedge sent nothing), and the budget
// refusal or throttle drop that stopped the call after it: a
// resilience.PolicyOpts OnAttempt hook.
func (d *DependencyMetrics) Attempt(rec resilience.AttemptRecord) {
	d.HedgeRefused(rec.Stop) // a retry refused, as a hedge is
	if rec.Verdict.Unsent {
		return
	}
	d.Sent()
	switch {
	case rec.Hedge:
		d.Hedged()
	case rec.N > 1:
		d.Retried()
	}
}

// HedgeRefused counts a retry, or a hedge, the retry budget refused
// (StopBudget) or the adaptive throttle dropped (StopThrottled); any other
// stop counts nothing. It is a resilience.PolicyOpts OnHedgeRefused hook.
func (d *DependencyMetrics) HedgeRefused(stop resilience.Stop) {
	switch stop {
	case resilience.StopBudget:
		d.BudgetRefused()
	case resilience.StopThrottled:
		d.ThrottledRetry()
	}
}

// Sent counts an attempt made outside the policy's loop (a stream's).
func (d *DependencyMetrics) Sent() { d.attempts.Inc() }

// Retried counts a retry started outside the policy's loop.
func (d *DependencyMetrics) Retried() { d.retries.Inc() }

// BudgetRefused counts a retry the budget refused outside the policy's loop.
func (d *DependencyMetrics) BudgetRefused() { d.refusals.Inc() }

// ThrottledRetry counts a retry the adaptive throttle dropped outside the
// policy's loop's hook.
func (d *DependencyMetrics) ThrottledRetry() { d.throttled.Inc() }

// Hedged counts a hedge started, for a plugin that counts its attempts
// itself.
func (d *DependencyMetrics) Hedged() { d.hedges.Inc() }

// Rejected counts a call the bulkhead refused.
func (d *DependencyMetrics) Rejected() { d.rejections.Inc() }

// Follow names the breaker whose changes Transition is given, for the
// state gauge to read it before each scrape (a breaker replaced is followed
// in the old one's place).
func (d *DependencyMetrics) Follow(b *resilience.Breaker) {
	s := d.m.state
	s.mu.Lock()
	s.breakers[[2]string{d.plugin, d.dependency}] = b
	s.mu.Unlock()
}

// Transition counts a breaker state change and sets the state gauge.
func (d *DependencyMetrics) Transition(c resilience.StateChange) {
	d.TransitionOnly(c)
	d.state.Set(float64(c.To))
}

// TransitionOnly counts a state change of one of a dependency's many
// breakers (per origin, per route), whose states one gauge cannot show.
func (d *DependencyMetrics) TransitionOnly(c resilience.StateChange) {
	d.m.transitions.WithLabelValues(d.plugin, d.dependency, c.From.String(), c.To.String()).Inc()
}
