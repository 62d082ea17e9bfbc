package db

import (
	"github.com/prometheus/client_golang/prometheus"
)

// registerMetrics exposes the main pool's statistics and held (its
// acquisition time, see heldTracer) as jfast_db_* series. The gauges and
// counters are read at scrape time. The pool's breaker is not here: it is in
// the jfast_client_breaker_* families every plugin that calls out shares
// (see Start).
func registerMetrics(reg *prometheus.Registry, d *DB, held prometheus.Histogram) error {
	gauge := func(name, help string, f func() float64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, f)
	}
	counter := func(name, help string, f func() float64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, f)
	}
	cs := []prometheus.Collector{
		gauge("jfast_db_pool_acquired_connections", "Connections of the db pool in use.", func() float64 { return float64(d.pool.Stat().AcquiredConns()) }),
		gauge("jfast_db_pool_idle_connections", "Idle connections of the db pool.", func() float64 { return float64(d.pool.Stat().IdleConns()) }),
		gauge("jfast_db_pool_total_connections", "Open connections of the db pool, in use, idle or being opened.", func() float64 { return float64(d.pool.Stat().TotalConns()) }),
		gauge("jfast_db_pool_max_connections", "pool_size of the db pool.", func() float64 { return float64(d.pool.Stat().MaxConns()) }),
		counter("jfast_db_pool_acquires_total", "Successful connection acquisitions from the db pool.", func() float64 { return float64(d.pool.Stat().AcquireCount()) }),
		counter("jfast_db_pool_empty_acquires_total", "Acquisitions that found no idle connection and waited for one.", func() float64 { return float64(d.pool.Stat().EmptyAcquireCount()) }),
		counter("jfast_db_pool_new_connections_total", "Connections the db pool opened.", func() float64 { return float64(d.pool.Stat().NewConnsCount()) }),
		counter("jfast_db_acquisitions_total", "Connections asked for through the plugin (a statement's, a transaction's, Acquire's), those the open breaker refused included.", func() float64 { return float64(d.gate.calls.Load()) }),
		counter("jfast_db_acquisition_attempts_total", "Attempts to get a connection the breaker let through: the first, and one more when a pooled connection's ping got no answer.", func() float64 { return float64(d.gate.attempts.Load()) }),
		counter("jfast_db_ping_terminations_total", "Idle connections terminated because the bounded ping failed or did not answer within ping_timeout.", func() float64 { return float64(d.gate.pingTerminations.Load()) }),
		counter("jfast_db_liveness_checks_total", "Liveness checks (SELECT 1 on the watchdog's own connection) made because a connection was in use for ping_timeout / 2 or more.", func() float64 { return float64(d.gate.watch.checks.Load()) }),
		counter("jfast_db_liveness_trips_total", "Liveness checks that got no answer within ping_timeout: the breaker opened and the statements in flight were cut.", func() float64 { return float64(d.gate.watch.trips.Load()) }),
	}
	if held != nil {
		cs = append(cs, held)
	}
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}
