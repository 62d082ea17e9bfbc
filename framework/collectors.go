package framework

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// RegisterOrReuse registers *c in reg. When reg already holds a collector
// equal to it (prometheus.AlreadyRegisteredError: same name, help and
// labels, registered by another client of the same registry), *c becomes
// that collector, so both count into the one set of series, and the error is
// nil. Any other refusal is returned and *c is left as it was.
//
// Use it where several clients built one after another share one Registerer
// (the upstream tables of the http, grpc and llm plugins); a plugin whose
// collectors are made once per App registers them with reg.Register, so a
// second registration stays the error it is.
func RegisterOrReuse[C prometheus.Collector](reg prometheus.Registerer, c *C) error {
	err := reg.Register(*c)
	var are prometheus.AlreadyRegisteredError
	if errors.As(err, &are) {
		if existing, ok := are.ExistingCollector.(C); ok {
			*c = existing
		}
		return nil
	}
	return err
}

// NewCounter, NewCounterVec, NewGauge, NewGaugeVec, NewHistogram and NewHistogramVec
// are prometheus's constructors with the only options jfast's collectors set:
// a name, its help, the labels of a vector and the buckets of a histogram.
// No label (a vector with none) is a nil label list, as prometheus has it.

// NewCounter returns a counter named name.
func NewCounter(name, help string) prometheus.Counter {
	return prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
}

// NewCounterVec returns a counter vector named name, by labels.
func NewCounterVec(name, help string, labels ...string) *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
}

// NewGauge returns a gauge named name.
func NewGauge(name, help string) prometheus.Gauge {
	return prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: help})
}

// NewGaugeVec returns a gauge vector named name, by labels.
func NewGaugeVec(name, help string, labels ...string) *prometheus.GaugeVec {
	return prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, labels)
}

// LatencyBuckets are the bounds, in seconds, of jfast's request and call
// duration histograms: the server's requests, the http and grpc clients'
// calls, the gRPC server's RPCs and the gateway's upstream latency. They run
// from 1 ms, a loopback call, to 30 s, the longest default deadline
// (app.request_timeout), so every series of one service can be read against
// the same bounds. Do not change the slice: the histograms share it.
var LatencyBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}

// NewHistogram returns a histogram named name with buckets.
func NewHistogram(name, help string, buckets []float64) prometheus.Histogram {
	return prometheus.NewHistogram(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets})
}

// NewHistogramVec returns a histogram vector named name with buckets, by
// labels.
func NewHistogramVec(name, help string, buckets []float64, labels ...string) *prometheus.HistogramVec {
	return prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets}, labels)
}

// RegisterAll registers every collector in reg, in order, and returns the
// first refusal (the collectors after it are not registered). It is for the
// collectors a plugin makes once per App: a second registration stays the
// error it is (see [RegisterOrReuse] for the shared ones).
func RegisterAll(reg prometheus.Registerer, collectors ...prometheus.Collector) error {
	for _, c := range collectors {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}
