package llm

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/framework/resilience"
)

// A model call lasts from a fraction of a second (a short answer from a
// small model) to minutes (a long one from a large model).
var latencyBuckets = []float64{.1, .25, .5, 1, 2.5, 5, 10, 20, 30, 60, 120}

// metricSet is the jfast_llm_* collectors, shared by every provider of a
// registry. A call costs a few label lookups, nothing next to a model's
// answer.
type metricSet struct {
	calls       *prometheus.CounterVec
	attempts    *prometheus.CounterVec
	firstToken  *prometheus.HistogramVec
	duration    *prometheus.HistogramVec
	tokens      *prometheus.CounterVec
	retries     *prometheus.CounterVec
	refusals    *prometheus.CounterVec
	fallbacks   *prometheus.CounterVec
	transitions *prometheus.CounterVec
	state       *prometheus.GaugeVec
}

func newMetricSet() *metricSet {
	return &metricSet{
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
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "jfast_llm_retries_total",
			Help: "Retries started to a model provider (after a 5xx, a failure to connect, a silent stream, or a rate-limit wait).",
		}, []string{"provider"}),
		refusals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "jfast_llm_retry_budget_refusals_total",
			Help: "Retries the retry budget refused: the failure went back to the caller instead.",
		}, []string{"provider"}),
		fallbacks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "jfast_llm_fallbacks_total",
			Help: "Calls a provider refused at once (open breaker, full bulkhead) that went to its fallback.",
		}, []string{"provider", "fallback"}),
		transitions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "jfast_llm_breaker_transitions_total",
			Help: "Breaker state changes of a model provider, by from and to state.",
		}, []string{"provider", "from", "to"}),
		state: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "jfast_llm_breaker_state",
			Help: "Breaker state of a model provider: 0 closed, 1 open, 2 half_open.",
		}, []string{"provider"}),
	}
}

// register registers every collector in reg; a collector already registered
// there (by another client) is reused.
func (m *metricSet) register(reg prometheus.Registerer) error {
	return errors.Join(
		framework.RegisterOrReuse(reg, &m.calls),
		framework.RegisterOrReuse(reg, &m.attempts),
		framework.RegisterOrReuse(reg, &m.tokens),
		framework.RegisterOrReuse(reg, &m.retries),
		framework.RegisterOrReuse(reg, &m.refusals),
		framework.RegisterOrReuse(reg, &m.fallbacks),
		framework.RegisterOrReuse(reg, &m.transitions),
		framework.RegisterOrReuse(reg, &m.firstToken),
		framework.RegisterOrReuse(reg, &m.duration),
		framework.RegisterOrReuse(reg, &m.state),
	)
}

// transition records a breaker change of provider.
func (m *metricSet) transition(provider string, c resilience.StateChange) {
	m.transitions.WithLabelValues(provider, c.From.String(), c.To.String()).Inc()
	m.state.WithLabelValues(provider).Set(float64(c.To))
}
