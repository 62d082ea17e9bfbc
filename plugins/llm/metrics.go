package llm

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/jfastframework/jfast/framework"
)

// A model call lasts from a fraction of a second (a short answer from a
// small model) to minutes (a long one from a large model).
var latencyBuckets = []float64{.1, .25, .5, 1, 2.5, 5, 10, 20, 30, 60, 120}

// metricSet is the collectors of a registry's providers: the policy metrics
// every plugin shares (framework.ClientMetrics, plugin "llm", dependency the
// provider, outcome ok or the error kind) and the jfast_llm_* series by
// model. A call costs a few label lookups, nothing next to a model's answer.
type metricSet struct {
	policy     *framework.ClientMetrics
	calls      *prometheus.CounterVec
	attempts   *prometheus.CounterVec
	firstToken *prometheus.HistogramVec
	duration   *prometheus.HistogramVec
	tokens     *prometheus.CounterVec
	fallbacks  *prometheus.CounterVec
}

func newMetricSet() *metricSet {
	return &metricSet{
		policy: framework.NewClientMetrics(),
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "jfast_llm_calls_total",
			Help: "Calls to a model provider by model and outcome (ok, or the error kind: status, rate_limited, timeout, unavailable, circuit_open, bulkhead_full, cancelled, closed).",
		}, []string{"provider", "model", "outcome"}),
		attempts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "jfast_llm_attempts_total",
			Help: "Requests sent to a model provider by result: the HTTP status, or timeout, unavailable, cancelled for an attempt that got none.",
		}, []string{"provider", "result"}),
		firstToken: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "jfast_llm_first_token_seconds",
			Help:    "Time from the call to its first chunk reaching the caller (streamed calls), retries and waits included.",
			Buckets: latencyBuckets,
		}, []string{"provider", "model"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "jfast_llm_call_duration_seconds",
			Help:    "Time of a whole call to a model provider, retries and waits included (for a stream: until its end).",
			Buckets: latencyBuckets,
		}, []string{"provider", "model"}),
		tokens: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "jfast_llm_tokens_total",
			Help: "Tokens a model provider reported using, by direction: in (the prompt) and out (the answer).",
		}, []string{"provider", "model", "direction"}),
		fallbacks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "jfast_llm_fallbacks_total",
			Help: "Calls a provider refused at once (open breaker, full bulkhead) that went to its fallback.",
		}, []string{"provider", "fallback"}),
	}
}

// register registers every collector in reg; a collector already registered
// there (by another client) is reused.
func (m *metricSet) register(reg prometheus.Registerer) error {
	return errors.Join(
		m.policy.Register(reg),
		framework.RegisterOrReuse(reg, &m.calls),
		framework.RegisterOrReuse(reg, &m.attempts),
		framework.RegisterOrReuse(reg, &m.tokens),
		framework.RegisterOrReuse(reg, &m.fallbacks),
		framework.RegisterOrReuse(reg, &m.firstToken),
		framework.RegisterOrReuse(reg, &m.duration),
	)
}
