package mail

import (
	"context"
	"fmt"
	"time"

	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/readiness"
)

// Check implements framework.Checker: the last delivery result in this process
// and the number of dead deliveries. It opens no SMTP connection (a probe would
// tell less than the last real delivery, and some providers count logins).
// Only a last attempt that failed transiently (refused, timeout, 4xx) is a
// failure — the server was not taking mail; a permanent rejection is a
// message's fault and reported as passed. The failure is critical only when
// [plugin.mail] critical = true (default false): mail waits in the queue. There
// is no breaker: mail is sent from the queue, so a down server costs job
// retries with backoff, never request latency. The dead letter is counted
// through the queue, whose breakers (its own, and the db or cache plugin's
// its backend goes through) answer at once while open, so this check never
// waits on a broker known to be down, and a queue that is slow to answer
// (its tables being migrated at boot, a busy database) costs the count, not
// the check (see countContext).
func (p *Plugin) Check(ctx context.Context) readiness.Report {
	meta := map[string]any{"transport": p.cfg.Transport}
	if p.cfg.Transport == "smtp" {
		meta["server"] = p.sender.addr()
	}
	deadDetail := ""
	if dc, ok := p.jobs.(framework.DeadJobCounter); ok {
		cctx, cancel := countContext(ctx)
		n, err := dc.CountDeadJobs(cctx, JobKind)
		cancel()
		if err != nil {
			deadDetail = "; dead letter unknown: the queue did not answer"
		} else {
			meta["dead"] = n
			deadDetail = fmt.Sprintf("; %d in the dead letter", n)
		}
	}
	last, ok := p.LastDelivery()
	if !ok {
		return readiness.Passed("no delivery attempted yet"+deadDetail, meta)
	}
	meta["last_delivery"] = last
	switch last.Result {
	case "transient":
		return readiness.Unreachable("last delivery failed: "+last.Error+deadDetail, meta)
	case "permanent":
		return readiness.Passed("last delivery rejected by the server (dead letter): "+last.Error+deadDetail, meta)
	}
	return readiness.Passed("last delivery sent"+deadDetail, meta)
}

// countContext is ctx for the dead-letter count: it ends a third of the
// check's remaining time early (267 ms of the default readiness_timeout of
// 800 ms). The count is extra information. Given the check's whole deadline,
// a queue that answers late makes the check answer late, and /ready reports a
// late check as a timeout — unhealthy, and critical with critical = true —
// whatever the last delivery was. Ended early, the count gives up ("dead
// letter unknown") and the check still answers in time. The third is for
// the giving up: with both cores of a 2-core machine busy and the race
// detector on, a count returned up to 126 ms after its deadline (a query in
// flight notices late); the slow counts that answered there took 300–450 ms,
// a few at boot longer (waiting for the migration or a new connection).
func countContext(ctx context.Context) (context.Context, context.CancelFunc) {
	dl, ok := ctx.Deadline()
	if !ok {
		return context.WithCancel(ctx)
	}
	return context.WithDeadline(ctx, dl.Add(-time.Until(dl)/3))
}
