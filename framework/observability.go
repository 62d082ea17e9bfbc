package framework

import (
	"context"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

const observabilityName = "observability"

// ObservabilityConfig is the [plugin.observability] table.
type ObservabilityConfig struct {
	// MetricsPath is where the Prometheus text metrics are served.
	// Defaults to "/metrics".
	MetricsPath string `koanf:"metrics_path"`

	// RuntimeMetrics adds the Go runtime and process collectors (goroutines, GC,
	// memory, file descriptors). Defaults to true.
	RuntimeMetrics bool `koanf:"runtime_metrics"`
}

// Observability is the built-in plugin behind /metrics: request count and latency
// by method, chi route template and status, plus the Go runtime. It is compiled into
// every service and enabled by default.
//
// Metrics use prometheus/client_golang directly rather than OpenTelemetry's metric
// API with its Prometheus exporter: /metrics is Prometheus text either way, and the
// direct client is one layer less on every request's path and has the Go runtime
// collector built in. Traces are OpenTelemetry's (the telemetry plugin).
type Observability struct {
	cfg      ObservabilityConfig
	registry *prometheus.Registry
	// runtime holds the Go runtime and process collectors, apart from the
	// App's registry: /metrics serves both, while a reading of the App's
	// registry (the status page's every 10 s) skips their cost, about 80 %
	// of a Gather.
	runtime  *prometheus.Registry
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
	series   sync.Map // seriesKey → *series: label lookups once per route, not per request
}

type seriesKey struct {
	method, route string
	status        int
}

type series struct {
	requests prometheus.Counter
	duration prometheus.Observer
}

// Name implements Plugin.
func (o *Observability) Name() string { return observabilityName }

// Config implements Configurable.
func (o *Observability) Config() any {
	o.cfg = ObservabilityConfig{MetricsPath: "/metrics", RuntimeMetrics: true}
	return &o.cfg
}

// Validate implements Validator.
func (o *Observability) Validate(v *Validation) {
	if len(o.cfg.MetricsPath) == 0 || o.cfg.MetricsPath[0] != '/' {
		v.Error("metrics_path", "must be a path starting with /", `set metrics_path = "/metrics"`)
	}
}

// Start implements Starter: it registers the collectors.
func (o *Observability) Start(_ context.Context, app *App) error {
	o.registry = app.Metrics()
	o.requests = NewCounterVec("http_server_requests_total", "HTTP requests served, by method, route template and status.", "method", "route", "status")
	o.duration = NewHistogramVec("http_server_request_duration_seconds", "Time to serve an HTTP request, by method, route template and status.", LatencyBuckets, "method", "route", "status")
	if err := RegisterAll(o.registry, o.requests, o.duration); err != nil {
		return err
	}
	o.runtime = prometheus.NewRegistry()
	if o.cfg.RuntimeMetrics {
		o.runtime.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}
	return nil
}

// MountAdminRoutes implements AdminRouteMounter: /metrics is for operators,
// on app.admin_listen when it is set.
func (o *Observability) MountAdminRoutes(r chi.Router) {
	r.Method(http.MethodGet, o.cfg.MetricsPath, promhttp.HandlerFor(prometheus.Gatherers{o.registry, o.runtime}, promhttp.HandlerOpts{}))
}

// Middleware implements Middlewarer: it counts and times every request.
func (o *Observability) Middleware() func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			rec, ok := w.(*ResponseRecorder)
			var start time.Time
			if ok {
				start = rec.StartTime() // the request's whole time in jfast, read once
			} else {
				start = time.Now()
			}
			// Deferred, so a request whose handler panicked is counted too,
			// with the status the recovery (further out) answers it with.
			defer func() {
				v := recover()
				status := http.StatusOK
				if ok {
					status = rec.answered(v)
				}
				s := o.seriesFor(metricMethod(r.Method), metricRoute(w, r), status)
				s.requests.Inc()
				s.duration.Observe(time.Since(start).Seconds())
				if v != nil {
					panic(v)
				}
			}()
			next.ServeHTTP(w, r)
		})
	}
}

func (o *Observability) seriesFor(method, route string, status int) *series {
	key := seriesKey{method, route, status}
	if s, ok := o.series.Load(key); ok {
		return s.(*series)
	}
	code := strconv.Itoa(status)
	s := &series{
		requests: o.requests.WithLabelValues(method, route, code),
		duration: o.duration.WithLabelValues(method, route, code),
	}
	actual, _ := o.series.LoadOrStore(key, s)
	return actual.(*series)
}

// metricRoute is the chi route template, never the raw path: a path can carry an
// id per request and would make a series per id.
func metricRoute(w http.ResponseWriter, r *http.Request) string {
	if p := RouteTemplate(w, r); p != "" {
		return p
	}
	return "unmatched"
}

func metricMethod(m string) string {
	if StandardMethod(m) {
		return m
	}
	return "OTHER"
}

// StandardMethod reports whether m is one of the nine methods of RFC 9110 and
// RFC 5789 (GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS, CONNECT, TRACE). A
// client may send any token as a method; metric labels and span names use
// this to stay among a few values.
func StandardMethod(m string) bool {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodOptions, http.MethodConnect, http.MethodTrace:
		return true
	}
	return false
}

var (
	_ Configurable      = (*Observability)(nil)
	_ Validator         = (*Observability)(nil)
	_ Starter           = (*Observability)(nil)
	_ AdminRouteMounter = (*Observability)(nil)
	_ Middlewarer       = (*Observability)(nil)
)
