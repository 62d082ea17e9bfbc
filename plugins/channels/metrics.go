package channels

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/jfastframework/jfast/framework"
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
	sseGaps    *prometheus.CounterVec
	p          *Plugin
}

// publishCounters are one channel's publish outcomes.
type publishCounters struct {
	ok, failed, refused, tooLarge prometheus.Counter
	took                          prometheus.Observer // of a publish sent to Redis
}

func newMetrics(p *Plugin) (*metrics, error) {
	m := &metrics{
		p:          p,
		published:  framework.NewCounterVec("jfast_channels_published_total", "Publish calls by channel and outcome (ok; unavailable: redis did not take it: no answer, a refused or broken connection, an error reply; circuit_open: the cache's open breaker refused it, nothing sent; too_large: over max_payload_bytes, nothing sent).", "channel", "outcome"),
		publishDur: framework.NewHistogramVec("jfast_channels_publish_duration_seconds", "Time of a publish sent to Redis (ok or unavailable; not circuit_open or too_large, which sent nothing), by channel: one command on the cache plugin's client.", []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5}, "channel"),
		handledV:   framework.NewCounterVec("jfast_channels_handled_total", "Handler runs by channel and outcome (ok, error, permanent, timeout, panic; dropped: a broadcast message the handler's buffer had no room for).", "channel", "outcome"),
		duration:   framework.NewHistogramVec("jfast_channels_handler_duration_seconds", "Duration of handler runs by channel.", []float64{.001, .005, .01, .05, .1, .5, 1, 5, 10, 30}, "channel"),
		claimedV:   framework.NewCounterVec("jfast_channels_claimed_total", "Durable messages this process claimed after visibility_timeout (their consumer died or its handler failed).", "channel"),
		deadV:      framework.NewCounterVec("jfast_channels_dead_lettered_total", "Durable messages moved to the dead letter stream.", "channel"),
		sseOpen:    framework.NewGaugeVec("jfast_channels_sse_clients", "Server-sent events streams open now, by channel.", "channel"),
		sseClose:   framework.NewCounterVec("jfast_channels_sse_closed_total", "Server-sent events streams ended, by channel and reason (client_gone, slow_client, write_failed, shutdown, catch_up_failed).", "channel", "reason"),
		sseRefuse:  framework.NewCounterVec("jfast_channels_sse_refused_total", "Server-sent events requests answered 503, by channel and reason (process_limit: sse_max_streams; client_limit: sse_max_streams_per_client).", "channel", "reason"),
		sseGaps:    framework.NewCounterVec("jfast_channels_sse_gaps_total", "Gap events sent to server-sent events streams: durable entries trimmed (max_len) before the stream sent them, by channel and reason (reader_behind: the process's reader fell more than max_len entries behind; catch_up: a Last-Event-ID older than the stream keeps, or a catch-up outrun).", "channel", "reason"),
	}
	for _, c := range p.chans {
		c.pub = &publishCounters{
			ok:       m.published.WithLabelValues(c.name, "ok"),
			failed:   m.published.WithLabelValues(c.name, "unavailable"),
			refused:  m.published.WithLabelValues(c.name, "circuit_open"),
			tooLarge: m.published.WithLabelValues(c.name, "too_large"),
			took:     m.publishDur.WithLabelValues(c.name),
		}
	}
	return m, nil
}

func (m *metrics) register(reg *prometheus.Registry) error {
	return framework.RegisterAll(reg, m.published, m.publishDur, m.handledV, m.duration, m.claimedV, m.deadV, m.sseOpen, m.sseClose, m.sseRefuse, m.sseGaps)
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

func (m *metrics) sseGap(c *channel, reason string) {
	m.sseGaps.WithLabelValues(c.name, reason).Inc()
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
