package storage

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/jfastframework/jfast/framework"
)

// Operation outcomes, the "outcome" label.
const (
	outcomeOK       = "ok"
	outcomeNotFound = "not_found"
	outcomeError    = "error"
	outcomeRejected = "rejected" // refused by the open breaker, no I/O
)

type metrics struct {
	operations   *prometheus.CounterVec
	duration     *prometheus.HistogramVec
	breakerState *prometheus.GaugeVec
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		operations:   framework.NewCounterVec("jfast_storage_operations_total", "Storage operations by disk, operation and outcome (ok, not_found, error, rejected).", "disk", "operation", "outcome"),
		duration:     framework.NewHistogramVec("jfast_storage_operation_duration_seconds", "Time to the result of a storage operation (for get: to the response headers).", []float64{.001, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60}, "disk", "operation"),
		breakerState: framework.NewGaugeVec("jfast_storage_breaker_state", "State of an s3 disk's breaker: 0 closed, 1 open, 2 half-open.", "disk"),
	}
	if err := framework.RegisterAll(reg, m.operations, m.duration, m.breakerState); err != nil {
		return nil, err
	}
	return m, nil
}

func (m *metrics) observe(disk, op, outcome string, start time.Time) {
	if m == nil {
		return
	}
	m.operations.WithLabelValues(disk, op, outcome).Inc()
	m.duration.WithLabelValues(disk, op).Observe(time.Since(start).Seconds())
}
