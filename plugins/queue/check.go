package queue

import (
	"context"
	"fmt"

	"github.com/jfastframework/jfast/readiness"
)

// Check implements framework.Checker: queue depth per queue, dead-letter count,
// worker state and the enqueue breaker. A broker that does not answer is a
// failure (critical only when [plugin.queue] critical = true); an open breaker
// is degraded, never critical.
func (p *Plugin) Check(ctx context.Context) readiness.Report {
	snap := p.breaker.Snapshot()
	meta := map[string]any{"backend": p.cfg.Backend, "workers": p.workerState(), "breaker": snap.Meta()}
	stats, err := p.backend.Stats(ctx)
	if err != nil {
		return readiness.Failed(fmt.Sprintf("queue (%s) unreachable: %v", p.cfg.Backend, redactErr(err)), snap.State.String() == "closed", meta)
	}
	meta["depth"] = stats.Depth
	meta["dead"] = stats.Dead
	if snap.State.String() != "closed" {
		return readiness.Failed(fmt.Sprintf("queue enqueues suspended: breaker %s", snap.State), false, meta)
	}
	return readiness.Passed(fmt.Sprintf("%s reachable; %d dead jobs", p.cfg.Backend, stats.Dead), meta)
}

func (p *Plugin) workerState() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case p.workersRunning:
		return "running"
	case p.stopped:
		return "stopped"
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
