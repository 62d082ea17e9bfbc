package jfasttest_test

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/jfastframework/jfast/jfasttest"
)

// Metric finds the series by its labels, whatever the family's type, and
// reads 0 for a series or a family that is not there.
func TestMetric(t *testing.T) {
	reg := prometheus.NewRegistry()
	calls := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "calls_total"}, []string{"plugin", "outcome"})
	state := prometheus.NewGauge(prometheus.GaugeOpts{Name: "state"})
	took := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "took_seconds"})
	reg.MustRegister(calls, state, took)
	calls.WithLabelValues("http", "response").Add(3)
	calls.WithLabelValues("http", "timeout").Add(2)
	state.Set(2)
	took.Observe(0.1)
	took.Observe(0.2)
	for _, tc := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"calls_total", []string{"outcome", "timeout"}, 2},
		{"calls_total", []string{"plugin", "http", "outcome", "response"}, 3},
		{"calls_total", []string{"plugin", "grpc"}, 0},
		{"state", nil, 2},
		{"took_seconds", nil, 2},
		{"absent_total", nil, 0},
	} {
		if got := jfasttest.Metric(t, reg, tc.name, tc.labels...); got != tc.want {
			t.Errorf("%s%v = %v, want %v", tc.name, tc.labels, got, tc.want)
		}
	}
}
