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
		policy:     framework.NewClientMetrics(),
		calls:      framework.NewCounterVec("jfast_llm_calls_total", "Calls to a model provider by model and outcome (ok, or the error kind: status, rate_limited, timeout, unavailable, circuit_open, bulkhead_full, throttled, cancelled, closed).", "provider", "model", "outcome"),
		attempts:   framework.NewCounterVec("jfast_llm_attempts_total", "Requests sent to a model provider by result: the HTTP status, or timeout, unavailable, cancelled for an attempt that got none.", "provider", "result"),
		firstToken: framework.NewHistogramVec("jfast_llm_first_token_seconds", "Time from the call to its first chunk reaching the caller (streamed calls), retries and waits included.", latencyBuckets, "provider", "model"),
		duration:   framework.NewHistogramVec("jfast_llm_call_duration_seconds", "Time of a whole call to a model provider, retries and waits included (for a stream: until its end).", latencyBuckets, "provider", "model"),
		tokens:     framework.NewCounterVec("jfast_llm_tokens_total", "Tokens a model provider reported using, by direction: in (the prompt) and out (the answer).", "provider", "model", "direction"),
		fallbacks:  framework.NewCounterVec("jfast_llm_fallbacks_total", "Calls a provider refused at once (open breaker, full bulkhead, the throttle) that went to its fallback.", "provider", "fallback"),
	}
}

// Register registers every collector in reg; a collector already registered
// there (by another client) is reused.
func (m *metricSet) Register(reg prometheus.Registerer) error {
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
