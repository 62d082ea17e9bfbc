package telemetry

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

type metrics struct {
	exported prometheus.Counter
	failed   prometheus.Counter
	dropped  prometheus.Counter
}

func newMetrics() *metrics {
	return &metrics{
		exported: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "jfast_telemetry_spans_exported_total",
			Help: "Spans the exporter accepted.",
		}),
		failed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "jfast_telemetry_spans_export_failed_total",
			Help: "Spans lost because their export failed or timed out (collector unreachable, hanging or refusing).",
		}),
		dropped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "jfast_telemetry_spans_dropped_total",
			Help: "Spans dropped without an export attempt because the export queue was full, or left when the shutdown deadline passed.",
		}),
	}
}

func (m *metrics) register(reg prometheus.Registerer) error {
	for _, c := range []prometheus.Collector{m.exported, m.failed, m.dropped} {
		if err := reg.Register(c); err != nil {
			return fmt.Errorf("telemetry: registering metrics: %w", err)
		}
	}
	return nil
}
