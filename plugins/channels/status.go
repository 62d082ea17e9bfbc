package channels

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/framework/resilience"
	"github.com/jfastframework/jfast/readiness"
)

// loop is the health of one reading loop (the pub/sub connection, a durable
// channel's consumer, a durable channel's SSE tail), for /ready. Its times are
// on the App's clock, which Check reads too.
type loop struct {
	name  string
	clock resilience.Clock

	mu        sync.Mutex
	up        bool
	wasUp     bool      // it has read at least once
	since     time.Time // of the current state
	err       string    // why it is down
	reconnect int       // times it came back
}

func newLoop(name string, clock resilience.Clock) *loop {
	return &loop{name: name, clock: clock, since: clock.Now(), err: "connecting"}
}

// setUp records that the loop reads again; it reports whether it was down.
func (l *loop) setUp() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.up {
		return false
	}
	l.up, l.wasUp, l.since, l.err = true, true, l.clock.Now(), ""
	return true
}

// setDown records that the loop cannot read; it reports whether it was up.
func (l *loop) setDown(err error) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.err = framework.MaskSecrets(err.Error())
	if !l.up {
		return false
	}
	l.up, l.since = false, l.clock.Now()
	l.reconnect++
	return true
}

func (l *loop) errText() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

func (l *loop) reconnects() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.reconnect
}

func (l *loop) snapshot() (up, wasUp bool, since time.Time, err string, reconnects int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.up, l.wasUp, l.since, l.err, l.reconnect
}

// loops returns every loop running now, in a stable order.
func (p *Plugin) allLoops() []*loop {
	var ls []*loop
	p.mu.Lock()
	if p.bcast != nil {
		ls = append(ls, p.bcast.state)
	}
	p.mu.Unlock()
	for _, c := range p.chans {
		c.mu.Lock()
		if c.loop != nil {
			ls = append(ls, c.loop)
		}
		if c.hub != nil && c.hub.tail != nil {
			ls = append(ls, c.hub.tail)
		}
		c.mu.Unlock()
	}
	slices.SortFunc(ls, func(a, b *loop) int {
		switch {
		case a.name < b.name:
			return -1
		case a.name > b.name:
			return 1
		}
		return 0
	})
	return ls
}

// Check implements framework.Checker. It does no I/O: it reports whether
// every subscription is reading (a subscription notices a paused or dead Redis
// within health_check_interval plus command_timeout) and the state of the
// cache plugin's breaker, which publishes go through. Anything down is
// reported degraded, never critical: a restart does not bring Redis back.
func (p *Plugin) Check(context.Context) readiness.Report {
	subs := map[string]any{}
	var down []string
	now := p.clock.Now()
	// A subscription that has not connected yet is given the time a
	// failure takes to show (on the App's clock), so /ready is not degraded
	// at every boot.
	grace := p.cfg.HealthCheckInterval + p.cmdTimeout
	for _, l := range p.allLoops() {
		up, wasUp, since, err, reconnects := l.snapshot()
		entry := map[string]any{"state": "up", "since": since.UTC().Format(time.RFC3339), "reconnects": reconnects}
		switch {
		case !up && !wasUp && now.Sub(since) < grace:
			entry["state"] = "connecting"
		case !up:
			entry["state"] = "down"
			entry["error"] = err
			down = append(down, fmt.Sprintf("%s down for %s (%s)", l.name, now.Sub(since).Round(100*time.Millisecond), err))
		}
		subs[l.name] = entry
	}
	snap := p.breaker.Snapshot()
	meta := map[string]any{
		"subscriptions": subs,
		"sse_clients":   p.metrics.sseClientsNow(),
		"breaker":       snap.Meta(),
	}
	switch {
	case len(down) > 0:
		detail := "channels: subscription " + down[0]
		if len(down) > 1 {
			detail += fmt.Sprintf(" and %d more", len(down)-1)
		}
		return readiness.Impaired(detail, meta)
	case snap.State == resilience.StateOpen:
		// Opened by failures to reach Redis: unreachable, as the cache's own
		// check reports it (critical only with [plugin.channels] critical).
		return readiness.Unreachable(fmt.Sprintf("channels: redis unreachable: publishes refused for %.1fs: the cache plugin's redis breaker is open", snap.RetryAfter.Seconds()), meta)
	case snap.State != resilience.StateClosed:
		return readiness.Impaired("channels: publishes refused: the cache plugin's redis breaker is "+snap.State.String(), meta)
	}
	return readiness.Passed(fmt.Sprintf("channels: %d subscriptions, none down", len(subs)), meta)
}
