package telemetry

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/jfastframework/jfast/framework"
)

type metrics struct {
	exported prometheus.Counter
	failed   prometheus.Counter
	dropped  prometheus.Counter
}

func newMetrics() *metrics {
	return &metrics{
		exported: framework.NewCounter("jfast_telemetry_spans_exported_total", "Spans the exporter accepted."),
		failed:   framework.NewCounter("jfast_telemetry_spans_export_failed_total", "Spans lost because their export failed or timed out (collector unreachable, hanging or refusing)."),
		dropped:  framework.NewCounter("jfast_telemetry_spans_dropped_total", "Spans dropped without an export attempt because the export queue was full, or left when the shutdown deadline passed."),
	}
}

func (m *metrics) register(reg prometheus.Registerer) error {
	if err := framework.RegisterAll(reg, m.exported, m.failed, m.dropped); err != nil {
		return fmt.Errorf("telemetry: registering metrics: %w", err)
	}
	return nil
}
