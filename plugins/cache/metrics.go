package cache

import (
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/jfastframework/jfast/framework"
)

// component names what failed open, in the fail-open metric and log.
type component int

const (
	componentRemember component = iota
	componentRateLimit
	numComponents
)

func (c component) String() string {
	if c == componentRateLimit {
		return "ratelimit"
	}
	return "remember"
}

// metrics are the plugin's Prometheus collectors.
type metrics struct {
	commands   commandMetrics
	failOpen   [numComponents]prometheus.Counter
	limited    *prometheus.CounterVec
	collectors []prometheus.Collector
}

// commandMetrics count and time the commands (and pipelines) the hook sees,
// each series resolved once: a command touches a counter and a histogram
// and allocates nothing for it.
type commandMetrics struct {
	ok, failed, refused prometheus.Counter
	took                prometheus.Observer
}

// commandBuckets run from 100 µs (a GET on loopback is tens of µs) to
// 5 s (command_timeout's default is 1 s; a blocking command may wait longer).
var commandBuckets = []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5}

func newCommandMetrics() (commandMetrics, []prometheus.Collector) {
	commands := framework.NewCounterVec("jfast_cache_commands_total", "Redis commands (a pipeline or MULTI/EXEC counts once) by outcome: ok (Redis answered, a miss or an error reply included), error (no answer, or a reply saying it cannot serve now), circuit_open (the open breaker refused it, nothing sent: the word every client plugin uses).", "outcome")
	duration := framework.NewHistogramVec("jfast_cache_command_duration_seconds", "Time of a Redis command (or pipeline) the breaker admitted, from admission to its answer or error.", commandBuckets)
	return commandMetrics{
		ok:      commands.WithLabelValues("ok"),
		failed:  commands.WithLabelValues("error"),
		refused: commands.WithLabelValues("circuit_open"),
		took:    duration.WithLabelValues(),
	}, []prometheus.Collector{commands, duration}
}

func newMetrics(p *Plugin) *metrics {
	failOpen := framework.NewCounterVec("jfast_cache_fail_open_total", "Calls that went on without Redis because it did not answer, by component (remember, ratelimit).", "component")
	limited := framework.NewCounterVec("jfast_cache_rate_limited_total", "Requests refused with 429 by a rate limiter, by limiter name.", "limiter")
	m := &metrics{limited: limited}
	var commands []prometheus.Collector
	m.commands, commands = newCommandMetrics()
	for c := component(0); c < numComponents; c++ {
		m.failOpen[c] = failOpen.WithLabelValues(c.String())
	}
	m.collectors = append(commands, failOpen, limited)
	// The pool's series are read when scraped. The breaker is not here: it
	// is in the jfast_client_breaker_* families (see Start).
	for _, s := range []struct {
		name, help string
		counter    bool
		value      func() float64
	}{
		{"jfast_cache_pool_connections", "Connections in the Redis pool.", false, func() float64 { return float64(p.client.PoolStats().TotalConns) }},
		{"jfast_cache_pool_idle_connections", "Idle connections in the Redis pool.", false, func() float64 { return float64(p.client.PoolStats().IdleConns) }},
		{"jfast_cache_pool_timeouts_total", "Times a command waited for a pooled connection longer than command_timeout.", true, func() float64 { return float64(p.client.PoolStats().Timeouts) }},
	} {
		if s.counter {
			m.collectors = append(m.collectors, prometheus.NewCounterFunc(prometheus.CounterOpts{Name: s.name, Help: s.help}, s.value))
		} else {
			m.collectors = append(m.collectors, prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: s.name, Help: s.help}, s.value))
		}
	}
	return m
}

func (m *metrics) register(r *prometheus.Registry) error {
	return framework.RegisterAll(r, m.collectors...)
}

// failOpen counts a call that went on without Redis and logs it once per
// breaker opening (and once before the first opening) per component.
func (p *Plugin) failOpen(c component, err error) {
	p.metrics.failOpen[c].Inc()
	mark := p.breaker.Snapshot().Opens + 1
	for {
		last := p.loggedOpens[c].Load()
		if last == mark {
			return
		}
		if p.loggedOpens[c].CompareAndSwap(last, mark) {
			p.log.Warn("redis unreachable: "+c.String()+" fails open until it is back (logged once per breaker opening)",
				slog.String("component", c.String()), slog.String("error", err.Error()))
			return
		}
	}
}
