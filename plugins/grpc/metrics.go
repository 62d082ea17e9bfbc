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
)

var latencyBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}

// metricSet is the jfast_grpc_client_* collectors, shared by every upstream
// of a registry.
type metricSet struct {
	calls       *prometheus.CounterVec
	attempts    *prometheus.CounterVec
	duration    *prometheus.HistogramVec
	retries     *prometheus.CounterVec
	refusals    *prometheus.CounterVec
	transitions *prometheus.CounterVec
	state       *prometheus.GaugeVec
}

func newMetricSet() *metricSet {
	up := []string{"upstream"}
	return &metricSet{
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "jfast_grpc_client_calls_total",
			Help: "Calls to a gRPC upstream by method and final code (the gRPC code name, or circuit_open / bulkhead_full for a call refused before any attempt).",
		}, []string{"upstream", "method", "code"}),
		attempts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "jfast_grpc_client_attempts_total",
			Help: "Attempts sent to a gRPC upstream (first attempts, retries and stream restarts) by method and code.",
		}, []string{"upstream", "method", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "jfast_grpc_client_call_duration_seconds",
			Help:    "Time of a whole call to a gRPC upstream, retries and waits included (for a stream: until its last message).",
			Buckets: latencyBuckets,
		}, []string{"upstream", "method"}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "jfast_grpc_client_retries_total",
			Help: "Retries (and stream restarts) started to a gRPC upstream.",
		}, up),
		refusals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "jfast_grpc_client_retry_budget_refusals_total",
			Help: "Retries the retry budget refused: the failure went back to the caller instead.",
		}, up),
		transitions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "jfast_grpc_client_breaker_transitions_total",
			Help: "Breaker state changes of a gRPC upstream, by from and to state.",
		}, []string{"upstream", "from", "to"}),
		state: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "jfast_grpc_client_breaker_state",
			Help: "Breaker state of a gRPC upstream: 0 closed, 1 open, 2 half_open.",
		}, up),
	}
}

// register registers every collector in reg; a collector already registered
// there (by another client) is reused.
func (m *metricSet) register(reg prometheus.Registerer) error {
	return errors.Join(
		framework.RegisterOrReuse(reg, &m.calls),
		framework.RegisterOrReuse(reg, &m.attempts),
		framework.RegisterOrReuse(reg, &m.retries),
		framework.RegisterOrReuse(reg, &m.refusals),
		framework.RegisterOrReuse(reg, &m.transitions),
		framework.RegisterOrReuse(reg, &m.duration),
		framework.RegisterOrReuse(reg, &m.state),
	)
}

// upstreamMetrics are one upstream's series. The per-method series are made
// on first use and kept, so a call pays a map lookup, not a label hash.
type upstreamMetrics struct {
	set                *metricSet
	name               string
	retries, refusals  prometheus.Counter
	state              prometheus.Gauge
	open, bulkheadFull sync.Map // method → prometheus.Counter
	methods            sync.Map // method → *methodMetrics
}

// methodMetrics are one method's series of one upstream.
type methodMetrics struct {
	duration prometheus.Observer
	mu       sync.Mutex
	calls    [codes.Unauthenticated + 1]prometheus.Counter
	attempts [codes.Unauthenticated + 1]prometheus.Counter
}

func (m *metricSet) forUpstream(name string) *upstreamMetrics {
	return &upstreamMetrics{
		set:      m,
		name:     name,
		retries:  m.retries.WithLabelValues(name),
		refusals: m.refusals.WithLabelValues(name),
		state:    m.state.WithLabelValues(name),
	}
}

func (u *upstreamMetrics) transition(c resilience.StateChange) {
	u.set.transitions.WithLabelValues(u.name, c.From.String(), c.To.String()).Inc()
	u.state.Set(float64(c.To))
}

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
}

// attempt counts an attempt that ended with code.
func (u *upstreamMetrics) attempt(m *methodMetrics, method string, code codes.Code) {
	m.counter(&m.attempts, u.set.attempts, u.name, method, code).Inc()
}

// refused counts a call refused before any attempt, under label.
func (u *upstreamMetrics) refused(method, label string) {
	cache := &u.open
	if label == labelBulkheadFull {
		cache = &u.bulkheadFull
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
