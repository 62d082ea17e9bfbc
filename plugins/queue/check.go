package queue

import (
	"context"
	"fmt"

	"github.com/jfastframework/jfast/framework/resilience"
	"github.com/jfastframework/jfast/readiness"
)

// Check implements framework.Checker: queue depth per queue, dead-letter count,
// worker state and the enqueue breaker. While the breaker is open it reports
// from the breaker, with no I/O. A broker that does not answer and an open
// breaker (opened by such failures) are both unreachable, so the verdict
// holds for the whole outage (it takes the replica out of rotation only when
// [plugin.queue] critical = true). The counts are read through the breaker
// of the plugin the backend uses (db or cache), so they too answer at once
// while that breaker is open.
func (p *Plugin) Check(ctx context.Context) readiness.Report {
	snap := p.breaker.Snapshot()
	workers, failed := p.workerState()
	meta := map[string]any{"backend": p.cfg.Backend, "workers": workers, "breaker": snap.Meta()}
	if snap.State == resilience.StateOpen {
		return readiness.Unreachable(fmt.Sprintf("queue (%s) unreachable: enqueues are suspended for %.1fs", p.cfg.Backend, snap.RetryAfter.Seconds()), meta)
	}
	stats, err := p.backend.Stats(ctx)
	if err != nil {
		return readiness.Unreachable(fmt.Sprintf("queue (%s) unreachable: %v", p.cfg.Backend, redactErr(err)), meta)
	}
	meta["depth"] = stats.Depth
	meta["dead"] = stats.Dead
	if failed != nil {
		// Enqueues work, nothing runs them: degraded, never critical.
		return readiness.Impaired(fmt.Sprintf("queue workers did not start: %s", redactErr(failed)), meta)
	}
	detail := fmt.Sprintf("%s reachable; %d dead jobs", p.cfg.Backend, stats.Dead)
	if snap.State == resilience.StateHalfOpen {
		detail += "; the breaker is half-open: the next enqueue probes"
	}
	return readiness.Passed(detail, meta)
}

// workerState is /ready's word for the workers: running, starting (a
// backend that starts them in the background, River while the database
// is down, has not yet), failed (they could not start: the log and the
// check's detail say why), none (no handler registered: none start),
// stopped or off (workers = false); and, when they failed, why.
func (p *Plugin) workerState() (string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.workerStateLocked(), p.workersFailed
}

// workerStateLocked is workerState's word, with p.mu held.
func (p *Plugin) workerStateLocked() string {
	switch {
	case p.workersFailed != nil:
		return "failed"
	case p.workersRunning:
		if s, ok := p.backend.(interface{ WorkersStarted() bool }); ok && !s.WorkersStarted() {
			return "starting"
		}
		return "running"
	case p.stopped:
		return "stopped"
	case p.cfg.Workers && len(p.handlers) == 0:
		return "none"
	case p.cfg.Workers:
		return "starting"
	}
	return "off"
}

// redactErr keeps an error's message out of /ready when it may carry a DSN.
func redactErr(err error) string {
	s := err.Error()
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}
