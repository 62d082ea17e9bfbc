package queue

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

type metrics struct {
	enq  *prometheus.CounterVec
	jobs *prometheus.CounterVec
	dur  *prometheus.HistogramVec
}

func newMetrics(reg *prometheus.Registry) (*metrics, error) {
	m := &metrics{
		enq: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "jfast_queue_enqueued_total",
			Help: "Enqueue calls by job kind and outcome (ok; error: not enqueued; unconfirmed: may have been enqueued; breaker_open; cancelled; retried: a second attempt made).",
		}, []string{"kind", "outcome"}),
		jobs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "jfast_queue_attempts_total",
			Help: "Job attempts by kind and outcome (done, failed, permanent, interrupted, unknown_kind).",
		}, []string{"kind", "outcome"}),
		dur: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "jfast_queue_attempt_duration_seconds",
			Help:    "Duration of job attempts by kind.",
			Buckets: []float64{.001, .005, .01, .05, .1, .5, 1, 5, 10, 30, 60, 300},
		}, []string{"kind"}),
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{m.enq, m.jobs, m.dur} {
			if err := reg.Register(c); err != nil {
				return nil, err
			}
		}
	}
	return m, nil
}

func (m *metrics) enqueued(kind, outcome string) { m.enq.WithLabelValues(kind, outcome).Inc() }

func (m *metrics) observe(kind, outcome string, d time.Duration) {
	m.jobs.WithLabelValues(kind, outcome).Inc()
	if outcome != "unknown_kind" {
		m.dur.WithLabelValues(kind).Observe(d.Seconds())
	}
}
