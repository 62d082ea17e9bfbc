package channels

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the plugin's Prometheus collectors. Channels are declared in
// the config, so every series is made at Start and a publish only increments
// a counter it already holds.
type metrics struct {
	published *prometheus.CounterVec
	// publishDur times each publish sent to Redis.
	publishDur *prometheus.HistogramVec
	handledV   *prometheus.CounterVec
	duration   *prometheus.HistogramVec
	claimedV   *prometheus.CounterVec
	deadV      *prometheus.CounterVec
	sseOpen    *prometheus.GaugeVec
	sseClose   *prometheus.CounterVec
	sseRefuse  *prometheus.CounterVec
	p          *Plugin
}

// publishCounters are one channel's publish outcomes.
type publishCounters struct {
	ok, failed, tooLarge prometheus.Counter
	took                 prometheus.Observer // of a publish sent to Redis
}

func newMetrics(p *Plugin) (*metrics, error) {
	m := &metrics{
		p: p,
		published: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "jfast_channels_published_total",
			Help: "Publish calls by channel and outcome (ok; unavailable: redis did not take it; too_large: over max_payload_bytes).",
		}, []string{"channel", "outcome"}),
		publishDur: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "jfast_channels_publish_duration_seconds",
			Help:    "Time of a publish sent to Redis (ok or unavailable), by channel: one command on the cache plugin's client.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5},
		}, []string{"channel"}),
		handledV: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "jfast_channels_handled_total",
			Help: "Handler runs by channel and outcome (ok, error, permanent, timeout, panic; dropped: a broadcast message the handler's buffer had no room for).",
		}, []string{"channel", "outcome"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "jfast_channels_handler_duration_seconds",
			Help:    "Duration of handler runs by channel.",
			Buckets: []float64{.001, .005, .01, .05, .1, .5, 1, 5, 10, 30},
		}, []string{"channel"}),
		claimedV: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "jfast_channels_claimed_total",
			Help: "Durable messages this process claimed after visibility_timeout (their consumer died or its handler failed).",
		}, []string{"channel"}),
		deadV: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "jfast_channels_dead_lettered_total",
			Help: "Durable messages moved to the dead letter stream.",
		}, []string{"channel"}),
		sseOpen: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "jfast_channels_sse_clients",
			Help: "Server-sent events streams open now, by channel.",
		}, []string{"channel"}),
		sseClose: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "jfast_channels_sse_closed_total",
			Help: "Server-sent events streams ended, by channel and reason (client_gone, slow_client, write_failed, shutdown, catch_up_failed).",
		}, []string{"channel", "reason"}),
		sseRefuse: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "jfast_channels_sse_refused_total",
			Help: "Server-sent events requests answered 503, by channel and reason (process_limit: sse_max_streams; client_limit: sse_max_streams_per_client).",
		}, []string{"channel", "reason"}),
	}
	for _, c := range p.chans {
		c.pub = &publishCounters{
			ok:       m.published.WithLabelValues(c.name, "ok"),
			failed:   m.published.WithLabelValues(c.name, "unavailable"),
			tooLarge: m.published.WithLabelValues(c.name, "too_large"),
			took:     m.publishDur.WithLabelValues(c.name),
		}
	}
	return m, nil
}

func (m *metrics) register(reg *prometheus.Registry) error {
	for _, c := range []prometheus.Collector{m.published, m.publishDur, m.handledV, m.duration, m.claimedV, m.deadV, m.sseOpen, m.sseClose, m.sseRefuse} {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}

func (m *metrics) handled(c *channel, outcome string, d time.Duration) {
	m.handledV.WithLabelValues(c.name, outcome).Inc()
	if outcome != "dropped" {
		m.duration.WithLabelValues(c.name).Observe(d.Seconds())
	}
}

func (m *metrics) claimed(c *channel) { m.claimedV.WithLabelValues(c.name).Inc() }
func (m *metrics) dead(c *channel)    { m.deadV.WithLabelValues(c.name).Inc() }

func (m *metrics) sseOpened(c *channel) { m.sseOpen.WithLabelValues(c.name).Inc() }

func (m *metrics) sseClosed(c *channel, reason string) {
	m.sseOpen.WithLabelValues(c.name).Dec()
	m.sseClose.WithLabelValues(c.name, reason).Inc()
}

func (m *metrics) sseRefused(c *channel, reason string) {
	m.sseRefuse.WithLabelValues(c.name, reason).Inc()
}

// sseClientsNow is the number of open streams, for /ready.
func (m *metrics) sseClientsNow() int {
	n := 0
	for _, c := range m.p.chans {
		c.mu.Lock()
		if c.hub != nil {
			n += c.hub.clients()
		}
		c.mu.Unlock()
	}
	return n
}
