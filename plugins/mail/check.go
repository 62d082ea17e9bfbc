package mail

import (
	"context"
	"fmt"
	"sync"

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
// the check (see deadCounts.count).
func (p *Plugin) Check(ctx context.Context) readiness.Report {
	meta := map[string]any{"transport": p.cfg.Transport}
	if p.cfg.Transport == "smtp" {
		meta["server"] = p.sender.addr()
	}
	deadDetail := ""
	if dc, ok := p.jobs.(framework.DeadJobCounter); ok {
		n, err := p.dead.count(ctx, dc)
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

// deadCounts runs the checks' dead-letter counts, one at a time.
type deadCounts struct {
	mu      sync.Mutex
	running *deadCount // the count in flight; nil when none is
}

// deadCount is one count; done is closed once n and err are set.
type deadCount struct {
	done chan struct{}
	n    int
	err  error
}

// count asks dc for the number of dead mail jobs and waits for it until
// framework.CheckPart's deadline, not after: the count is extra information, and a
// check that waited for a late queue would answer late, which /ready reports
// as a timeout — unhealthy, and critical with critical = true — whatever the
// last delivery was. The count's context is not enough to bound the wait: a
// count can return well after its context ends (a driver that notices it
// late, a backend that read its rows in time and decodes them after), so the
// count runs on a goroutine of its own and the check gives up on it ("dead
// letter unknown") at the deadline.
//
// A count still running when another check comes is shared, not started
// again: a queue whose counts outlive their deadlines has one in flight at a
// time, not one more for every /ready.
func (c *deadCounts) count(ctx context.Context, dc framework.DeadJobCounter) (int, error) {
	cctx, cancel := framework.CheckPart(ctx)
	c.mu.Lock()
	r := c.running
	if r == nil {
		r = &deadCount{done: make(chan struct{})}
		c.running = r
		go func() {
			// The count's context ends at its deadline or when it
			// returns, not when this check does.
			defer cancel()
			r.n, r.err = dc.CountDeadJobs(cctx, JobKind)
			c.mu.Lock()
			c.running = nil
			c.mu.Unlock()
			close(r.done)
		}()
	} else {
		defer cancel()
	}
	c.mu.Unlock()
	select {
	case <-r.done:
		return r.n, r.err
	case <-cctx.Done():
		return 0, cctx.Err()
	}
}
