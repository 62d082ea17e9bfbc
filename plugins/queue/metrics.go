package queue

import (
	"maps"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/jfastframework/jfast/framework"
)

type metrics struct {
	enq    *prometheus.CounterVec
	enqDur prometheus.Histogram // one series: no label lookup per enqueue
	jobs   *prometheus.CounterVec
	dur    *prometheus.HistogramVec

	// enqOK is enq's "ok" counter of each kind enqueued so far, so that a
	// successful enqueue does not hash its labels and look them up in enq
	// (about 100 ns against 20). Copied on write (a new kind), read without
	// a lock; never nil.
	enqOK   atomic.Pointer[map[string]prometheus.Counter]
	enqOKMu sync.Mutex
}

func newMetrics(reg *prometheus.Registry) (*metrics, error) {
	m := &metrics{
		enq:    framework.NewCounterVec("jfast_queue_enqueued_total", "Enqueue calls by job kind and outcome (ok; error: not enqueued; invalid: refused at the call, a bad kind, payload or option, nothing sent; unconfirmed: may have been enqueued; circuit_open; cancelled; retried: a second attempt made).", "kind", "outcome"),
		enqDur: framework.NewHistogram("jfast_queue_enqueue_duration_seconds", "Time of an enqueue that reached the broker, its retry included, to the broker's answer or enqueue_timeout.", []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}),
		jobs:   framework.NewCounterVec("jfast_queue_attempts_total", "Job attempts by kind and outcome (done, failed, permanent, interrupted, unknown_kind).", "kind", "outcome"),
		dur:    framework.NewHistogramVec("jfast_queue_attempt_duration_seconds", "Duration of job attempts by kind.", []float64{.001, .005, .01, .05, .1, .5, 1, 5, 10, 30, 60, 300}, "kind"),
	}
	m.enqOK.Store(&map[string]prometheus.Counter{})
	if reg != nil {
		if err := framework.RegisterAll(reg, m.enq, m.enqDur, m.jobs, m.dur); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func (m *metrics) enqueued(kind, outcome string) { m.enq.WithLabelValues(kind, outcome).Inc() }

// enqueuedOK counts a successful enqueue: enqueued(kind, "ok").
func (m *metrics) enqueuedOK(kind string) {
	if c, ok := (*m.enqOK.Load())[kind]; ok {
		c.Inc()
		return
	}
	m.enqOKMu.Lock()
	defer m.enqOKMu.Unlock()
	old := *m.enqOK.Load()
	c, ok := old[kind]
	if !ok {
		c = m.enq.WithLabelValues(kind, "ok")
		next := maps.Clone(old)
		next[kind] = c
		m.enqOK.Store(&next)
	}
	c.Inc()
}

func (m *metrics) observe(kind, outcome string, d time.Duration) {
	m.jobs.WithLabelValues(kind, outcome).Inc()
	if outcome != "unknown_kind" {
		m.dur.WithLabelValues(kind).Observe(d.Seconds())
	}
}
