package http

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/framework/resilience"
)

// metricSet is the collectors of a registry's http clients: the policy
// metrics every plugin shares (framework.ClientMetrics, plugin "http",
// dependency the upstream) and the http client's own latency histograms,
// labelled by upstream.
type metricSet struct {
	policy   *framework.ClientMetrics
	latency  *prometheus.HistogramVec
	bodyRead *prometheus.HistogramVec
}

// Call results, the outcome label of jfast_client_calls_total{plugin="http"}.
const (
	resultResponse    = "response"
	resultTimeout     = "timeout"
	resultUnavailable = "unavailable"
	resultCircuitOpen = "circuit_open"
	resultBulkhead    = "bulkhead_full"
	resultThrottled   = "throttled"
	resultTooLarge    = "response_too_large"
)

func newMetricSet() *metricSet {
	up := []string{"upstream"}
	return &metricSet{
		policy:   framework.NewClientMetrics(),
		latency:  framework.NewHistogramVec("jfast_http_client_call_duration_seconds", "Time from the start of a call to the headers of the response it returned, retries and waits included.", framework.LatencyBuckets, up...),
		bodyRead: framework.NewHistogramVec("jfast_http_client_body_read_duration_seconds", "Time reading the body of the response a call returned.", framework.LatencyBuckets, up...),
	}
}

// register registers every collector in reg; a collector already registered
// there (by another client) is reused.
func (m *metricSet) register(reg prometheus.Registerer) error {
	return errors.Join(
		m.policy.Register(reg),
		framework.RegisterOrReuse(reg, &m.latency),
		framework.RegisterOrReuse(reg, &m.bodyRead),
	)
}

// upstreamMetrics are one upstream's series, looked up once.
type upstreamMetrics struct {
	dep                                                      *framework.DependencyMetrics
	response, timeout, unavailable, open, bulkhead, tooLarge prometheus.Counter
	throttled                                                prometheus.Counter
	latency, bodyRead                                        prometheus.Observer
	// instances feeds the breaker metrics from the instances' breakers, for
	// an upstream with instances (newInstances); nil otherwise.
	instances *framework.InstanceBreakers
}

func (m *metricSet) forUpstream(name string) *upstreamMetrics {
	dep := m.policy.For("http", name)
	return &upstreamMetrics{
		dep:         dep,
		response:    dep.Calls(resultResponse),
		timeout:     dep.Calls(resultTimeout),
		unavailable: dep.Calls(resultUnavailable),
		open:        dep.Calls(resultCircuitOpen),
		bulkhead:    dep.Calls(resultBulkhead),
		tooLarge:    dep.Calls(resultTooLarge),
		throttled:   dep.Calls(resultThrottled),
		latency:     m.latency.WithLabelValues(name),
		bodyRead:    m.bodyRead.WithLabelValues(name),
	}
}

// transitionOnly counts a transition of one of many breakers (per origin or
// route), whose states one gauge cannot show.
func (u *upstreamMetrics) transitionOnly(c resilience.StateChange) { u.dep.TransitionOnly(c) }

func (u *upstreamMetrics) transition(c resilience.StateChange) { u.dep.Transition(c) }
