package gateway

import (
	"errors"
	"strconv"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/jfastframework/jfast/framework"
)

// metrics are the jfast_gateway_* collectors, labelled by route.
type metrics struct {
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
	retries  *prometheus.CounterVec
	refusals *prometheus.CounterVec
	gone     *prometheus.CounterVec
	tunnels  *prometheus.GaugeVec
	idle     *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		requests: framework.NewCounterVec("jfast_gateway_requests_total", "Requests a gateway route answered, by route and status (the upstream's, or the gateway's own problem).", "route", "status"),
		latency:  framework.NewHistogramVec("jfast_gateway_upstream_duration_seconds", "Time from a proxied request's start to the upstream's response headers, retries included.", framework.LatencyBuckets, "route"),
		retries:  framework.NewCounterVec("jfast_gateway_retries_total", "Attempts a route's requests made past their first (retries within the upstream's rules and budget).", "route"),
		refusals: framework.NewCounterVec("jfast_gateway_breaker_refusals_total", "Requests a route answered with 503 at once because its upstream's breaker was open.", "route"),
		gone:     framework.NewCounterVec("jfast_gateway_client_gone_total", "Proxied requests ended by their client going away (or the service draining) before the response was complete: no upstream failure.", "route"),
		tunnels:  framework.NewGaugeVec("jfast_gateway_tunnels", "WebSocket (upgraded) connections open through a route; each holds a place in its upstream's max_concurrent.", "route"),
		idle:     framework.NewCounterVec("jfast_gateway_tunnels_idle_closed_total", "Tunnels closed after tunnel_idle_timeout without a byte either way.", "route"),
	}
	var errs []error
	for _, c := range []prometheus.Collector{m.requests, m.latency, m.retries, m.refusals, m.gone, m.tunnels, m.idle} {
		errs = append(errs, reg.Register(c))
	}
	return m, errors.Join(errs...)
}

// routeMetrics are one route's series, looked up once.
type routeMetrics struct {
	requests    *prometheus.CounterVec
	name        string
	byStatus    [600]atomic.Pointer[prometheus.Counter] // looked up on first use of each status
	latency     prometheus.Observer
	retries     prometheus.Counter
	refusals    prometheus.Counter
	clientGone  prometheus.Counter
	tunnels     prometheus.Gauge
	tunnelsIdle prometheus.Counter
}

func (m *metrics) forRoute(name string) *routeMetrics {
	return &routeMetrics{
		requests:    m.requests,
		name:        name,
		latency:     m.latency.WithLabelValues(name),
		retries:     m.retries.WithLabelValues(name),
		refusals:    m.refusals.WithLabelValues(name),
		clientGone:  m.gone.WithLabelValues(name),
		tunnels:     m.tunnels.WithLabelValues(name),
		tunnelsIdle: m.idle.WithLabelValues(name),
	}
}

// request counts one answered request.
func (r *routeMetrics) request(status int) {
	if status < 100 || status >= len(r.byStatus) {
		r.requests.WithLabelValues(r.name, strconv.Itoa(status)).Inc()
		return
	}
	// Racing first uses look the same series up twice, which is harmless.
	c := r.byStatus[status].Load()
	if c == nil {
		v := r.requests.WithLabelValues(r.name, strconv.Itoa(status))
		c = &v
		r.byStatus[status].Store(c)
	}
	(*c).Inc()
}
