package storage

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/jfastframework/jfast/framework"
)

// Operation outcomes, the "outcome" label of jfast_storage_operations_total
// and of jfast_client_calls_total{plugin="storage"}. An operation the
// policy refused with no I/O has the words the http, grpc and llm clients
// use for the same refusal.
const (
	outcomeOK          = "ok"
	outcomeNotFound    = "not_found"
	outcomeError       = "error"
	outcomeCircuitOpen = "circuit_open"  // refused by the open breaker
	outcomeBulkhead    = "bulkhead_full" // refused after bulkhead_wait
	outcomeThrottled   = "throttled"     // dropped by the adaptive throttle
)

// metrics are the storage plugin's own families, what the policy metrics
// every client plugin shares (framework.ClientMetrics) do not hold: every
// disk's operations by operation (a local disk's too, which has no policy)
// and their latency. An s3 disk's breaker state is the shared
// jfast_client_breaker_state alone.
type metrics struct {
	operations *prometheus.CounterVec
	duration   *prometheus.HistogramVec
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		operations: framework.NewCounterVec("jfast_storage_operations_total", "Storage operations by disk, operation and outcome (ok, not_found, error, circuit_open, bulkhead_full, throttled).", "disk", "operation", "outcome"),
		duration:   framework.NewHistogramVec("jfast_storage_operation_duration_seconds", "Time to the result of a storage operation (for get: to the response headers).", []float64{.001, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60}, "disk", "operation"),
	}
	if err := framework.RegisterAll(reg, m.operations, m.duration); err != nil {
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
