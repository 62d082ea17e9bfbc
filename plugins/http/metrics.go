package http

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/framework/resilience"
)

// metricSet is the jfast_http_client_* collectors, shared by every upstream of
// a registry and labelled by upstream.
type metricSet struct {
	calls       *prometheus.CounterVec
	attempts    *prometheus.CounterVec
	retries     *prometheus.CounterVec
	refusals    *prometheus.CounterVec
	rejections  *prometheus.CounterVec
	transitions *prometheus.CounterVec
	state       *prometheus.GaugeVec
	latency     *prometheus.HistogramVec
	bodyRead    *prometheus.HistogramVec
}

// Call results, the "result" label of jfast_http_client_calls_total.
const (
	resultResponse    = "response"
	resultTimeout     = "timeout"
	resultUnavailable = "unavailable"
	resultCircuitOpen = "circuit_open"
	resultBulkhead    = "bulkhead_full"
	resultTooLarge    = "response_too_large"
)

var latencyBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}

func newMetricSet() *metricSet {
	up := []string{"upstream"}
	return &metricSet{
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "jfast_http_client_calls_total",
			Help: "Calls to an upstream, by result: response (any status), timeout, unavailable, circuit_open, bulkhead_full, response_too_large.",
		}, []string{"upstream", "result"}),
		attempts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "jfast_http_client_attempts_total",
			Help: "Requests sent to an upstream: first attempts and retries.",
		}, up),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "jfast_http_client_retries_total",
			Help: "Retries started to an upstream.",
		}, up),
		refusals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "jfast_http_client_retry_budget_refusals_total",
			Help: "Retries the retry budget refused: the failure went back to the caller instead.",
		}, up),
		rejections: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "jfast_http_client_bulkhead_rejections_total",
			Help: "Calls rejected because max_concurrent calls were in flight for bulkhead_wait.",
		}, up),
		transitions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "jfast_http_client_breaker_transitions_total",
			Help: "Breaker state changes of an upstream, by from and to state.",
		}, []string{"upstream", "from", "to"}),
		state: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "jfast_http_client_breaker_state",
			Help: "Breaker state of an upstream: 0 closed, 1 open, 2 half_open.",
		}, up),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "jfast_http_client_call_duration_seconds",
			Help:    "Time from the start of a call to the headers of the response it returned, retries and waits included.",
			Buckets: latencyBuckets,
		}, up),
		bodyRead: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "jfast_http_client_body_read_duration_seconds",
			Help:    "Time reading the body of the response a call returned.",
			Buckets: latencyBuckets,
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
		framework.RegisterOrReuse(reg, &m.rejections),
		framework.RegisterOrReuse(reg, &m.transitions),
		framework.RegisterOrReuse(reg, &m.state),
		framework.RegisterOrReuse(reg, &m.latency),
		framework.RegisterOrReuse(reg, &m.bodyRead),
	)
}

// upstreamMetrics are one upstream's series, looked up once.
type upstreamMetrics struct {
	set                                                      *metricSet
	name                                                     string
	response, timeout, unavailable, open, bulkhead, tooLarge prometheus.Counter
	attempts, retries, refusals, rejections                  prometheus.Counter
	state                                                    prometheus.Gauge
	latency, bodyRead                                        prometheus.Observer
}

func (m *metricSet) forUpstream(name string) *upstreamMetrics {
	return &upstreamMetrics{
		set:         m,
		name:        name,
		response:    m.calls.WithLabelValues(name, resultResponse),
		timeout:     m.calls.WithLabelValues(name, resultTimeout),
		unavailable: m.calls.WithLabelValues(name, resultUnavailable),
		open:        m.calls.WithLabelValues(name, resultCircuitOpen),
		bulkhead:    m.calls.WithLabelValues(name, resultBulkhead),
		tooLarge:    m.calls.WithLabelValues(name, resultTooLarge),
		attempts:    m.attempts.WithLabelValues(name),
		retries:     m.retries.WithLabelValues(name),
		refusals:    m.refusals.WithLabelValues(name),
		rejections:  m.rejections.WithLabelValues(name),
		state:       m.state.WithLabelValues(name),
		latency:     m.latency.WithLabelValues(name),
		bodyRead:    m.bodyRead.WithLabelValues(name),
	}
}

// transitionOnly counts a transition of one of many breakers (per origin or
// route), whose states one gauge cannot show.
func (u *upstreamMetrics) transitionOnly(c resilience.StateChange) {
	u.set.transitions.WithLabelValues(u.name, c.From.String(), c.To.String()).Inc()
}

func (u *upstreamMetrics) transition(c resilience.StateChange) {
	u.set.transitions.WithLabelValues(u.name, c.From.String(), c.To.String()).Inc()
	u.state.Set(float64(c.To))
}
