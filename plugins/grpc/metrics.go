package grpc

import (
	"errors"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"

	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/framework/resilience"
)

// Values of the "code" label for calls that never reached the upstream.
const (
	labelCircuitOpen  = "circuit_open"
	labelBulkheadFull = "bulkhead_full"
	labelThrottled    = "throttled"
)

// metricSet is the collectors of a registry's grpc clients: the policy
// metrics every plugin shares (framework.ClientMetrics, plugin "grpc",
// dependency the upstream, outcome the final code's name or circuit_open /
// bulkhead_full / throttled), and the grpc client's own series by method.
type metricSet struct {
	policy   *framework.ClientMetrics
	calls    *prometheus.CounterVec
	attempts *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

func newMetricSet() *metricSet {
	return &metricSet{
		policy:   framework.NewClientMetrics(),
		calls:    framework.NewCounterVec("jfast_grpc_client_calls_total", "Calls to a gRPC upstream by method and final code (the gRPC code name, or circuit_open / bulkhead_full / throttled for a call refused before any attempt).", "upstream", "method", "code"),
		attempts: framework.NewCounterVec("jfast_grpc_client_attempts_total", "Attempts sent to a gRPC upstream (first attempts, retries and stream restarts) by method and code.", "upstream", "method", "code"),
		duration: framework.NewHistogramVec("jfast_grpc_client_call_duration_seconds", "Time of a whole call to a gRPC upstream, retries and waits included (for a stream: until its last message).", framework.LatencyBuckets, "upstream", "method"),
	}
}

// Register registers every collector in reg; a collector already registered
// there (by another client) is reused.
func (m *metricSet) Register(reg prometheus.Registerer) error {
	return errors.Join(
		m.policy.Register(reg),
		framework.RegisterOrReuse(reg, &m.calls),
		framework.RegisterOrReuse(reg, &m.attempts),
		framework.RegisterOrReuse(reg, &m.duration),
	)
}

// upstreamMetrics are one upstream's series. The per-method series are made
// on first use and kept, so a call pays a map lookup, not a label hash.
type upstreamMetrics struct {
	set                           *metricSet
	name                          string
	dep                           *framework.DependencyMetrics
	depMu                         sync.Mutex
	depCalls                      [codes.Unauthenticated + 1]prometheus.Counter // by final code
	open, bulkheadFull, throttled sync.Map                                      // method → prometheus.Counter
	methods                       sync.Map                                      // method → *methodMetrics
	// instances feeds the breaker metrics from the instances' breakers, for
	// an upstream with instances (newInstances, discover); nil otherwise.
	instances *framework.InstanceBreakers
}

// methodMetrics are one method's series of one upstream.
type methodMetrics struct {
	duration prometheus.Observer
	mu       sync.Mutex
	calls    [codes.Unauthenticated + 1]prometheus.Counter
	attempts [codes.Unauthenticated + 1]prometheus.Counter
}

func (m *metricSet) forUpstream(name string) *upstreamMetrics {
	return &upstreamMetrics{set: m, name: name, dep: m.policy.For("grpc", name)}
}

func (u *upstreamMetrics) transition(c resilience.StateChange) { u.dep.Transition(c) }

func (u *upstreamMetrics) method(method string) *methodMetrics {
	if m, ok := u.methods.Load(method); ok {
		return m.(*methodMetrics)
	}
	m, _ := u.methods.LoadOrStore(method, &methodMetrics{duration: u.set.duration.WithLabelValues(u.name, method)})
	return m.(*methodMetrics)
}

// call counts a call that ended with code.
func (u *upstreamMetrics) call(m *methodMetrics, method string, code codes.Code) {
	m.counter(&m.calls, u.set.calls, u.name, method, code).Inc()
	if code > codes.Unauthenticated {
		u.dep.Calls(codeName(code)).Inc()
		return
	}
	u.depMu.Lock()
	c := u.depCalls[code]
	if c == nil {
		c = u.dep.Calls(codeName(code))
		u.depCalls[code] = c
	}
	u.depMu.Unlock()
	c.Inc()
}

// attempt counts an attempt that ended with code in the method's series;
// the policy metrics count it when the loop reports it
// (PolicyOpts.OnAttempt).
func (u *upstreamMetrics) attempt(m *methodMetrics, method string, code codes.Code) {
	m.counter(&m.attempts, u.set.attempts, u.name, method, code).Inc()
}

// refused counts a call refused before any attempt, under label.
func (u *upstreamMetrics) refused(method, label string) {
	u.dep.Calls(label).Inc()
	cache := &u.open
	switch label {
	case labelBulkheadFull:
		cache = &u.bulkheadFull
		u.dep.Rejected()
	case labelThrottled:
		cache = &u.throttled
	}
	if c, ok := cache.Load(method); ok {
		c.(prometheus.Counter).Inc()
		return
	}
	c, _ := cache.LoadOrStore(method, u.set.calls.WithLabelValues(u.name, method, label))
	c.(prometheus.Counter).Inc()
}

func (m *methodMetrics) counter(arr *[codes.Unauthenticated + 1]prometheus.Counter, vec *prometheus.CounterVec, upstream, method string, code codes.Code) prometheus.Counter {
	if code > codes.Unauthenticated {
		return vec.WithLabelValues(upstream, method, codeName(code))
	}
	m.mu.Lock()
	c := arr[code]
	if c == nil {
		c = vec.WithLabelValues(upstream, method, codeName(code))
		arr[code] = c
	}
	m.mu.Unlock()
	return c
}
