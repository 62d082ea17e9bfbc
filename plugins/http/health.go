package http

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/jfastframework/jfast/framework/egress"
	"github.com/jfastframework/jfast/framework/resilience"
	"github.com/jfastframework/jfast/internal/background"
)

// DefaultHealthEvery is the time between two active health checks of an
// upstream's instances: a Kubernetes readiness probe's usual period.
const DefaultHealthEvery = 5 * time.Second

// DefaultHealthTimeout bounds one health check. A jfast instance's /ready
// answers within its readiness_timeout (800 ms by default) plus the round
// trip, so 1 s, a Kubernetes probe's default, hears it.
const DefaultHealthTimeout = time.Second

// healthChecker asks every instance of an upstream for health_path every
// health_every, and marks the instances that do not answer 2xx unhealthy:
// Pick skips them before any call pays for finding out.
type healthChecker struct {
	set     *egress.Instances
	client  *http.Client
	host    string // base_url's host: the Host header every instance is asked for
	path    string
	every   time.Duration
	clock   resilience.Clock
	log     *slog.Logger // the client's, which names the upstream
	timeout time.Duration
	reset   func() // after an instance's breaker is forgotten: the breaker metrics see a closed one
	rounds  background.Task
}

// startHealth starts the health checks of c's instances when health_path
// is set; it returns nil otherwise.
func startHealth(c *ServiceClient) *healthChecker {
	u := c.up
	if u.HealthPath == "" || c.pol.instances == nil {
		return nil
	}
	base, _ := url.Parse(u.BaseURL) // checked by newClient
	h := &healthChecker{
		set:     c.pol.instances,
		client:  &http.Client{Transport: c.raw, CheckRedirect: noRedirects},
		host:    base.Host,
		path:    u.HealthPath,
		every:   u.HealthEvery,
		timeout: u.HealthTimeout,
		clock:   c.clock,
		log:     c.logger,
		reset:   c.metrics.instances.Refresh,
	}
	start := h.clock.Now()
	h.round(context.Background()) // the first round before the first call, within health_timeout
	h.rounds.Go(func(ctx context.Context) { h.loop(ctx, start) })
	return h
}

// loop starts a round every health_every, counted from the previous
// round's start rather than its end: a round lasts as long as its slowest
// check, and one hung instance (held up to health_timeout) must not delay
// the checks of the others. A round that outlasts health_every is followed
// at once by the next.
func (h *healthChecker) loop(ctx context.Context, last time.Time) {
	for {
		timer := h.clock.NewTimer(h.every - h.clock.Now().Sub(last))
		select {
		case <-timer.C():
		case <-ctx.Done():
			timer.Stop()
			return
		}
		last = h.clock.Now()
		h.round(ctx)
	}
}

// stop ends the checks and waits for the round in progress.
func (h *healthChecker) stop() {
	if h != nil {
		h.rounds.Stop()
	}
}

// round checks every current instance at once.
func (h *healthChecker) round(ctx context.Context) {
	var wg sync.WaitGroup
	for _, in := range h.set.List() {
		wg.Go(func() { h.check(ctx, in) })
	}
	wg.Wait()
}

// check asks one instance; a change of its health is logged.
func (h *healthChecker) check(ctx context.Context, in *egress.Instance) {
	ctx, cancel := context.WithTimeout(ctx, h.timeout)
	defer cancel()
	problem := ""
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, in.Base().Scheme+"://"+in.Addr()+h.path, nil)
	if err == nil {
		req.Host = h.host
		var resp *http.Response
		if resp, err = h.client.Do(req); err == nil {
			_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
			_ = resp.Body.Close()
			if resp.StatusCode < 200 || resp.StatusCode > 299 {
				problem = fmt.Sprintf("%s answered %d", h.path, resp.StatusCode)
			}
		}
	}
	if err != nil {
		if errors.Is(ctx.Err(), context.Canceled) {
			return // stopping
		}
		problem = fmt.Sprintf("%s: %v", h.path, err)
	}
	if problem == "" {
		// The instance answers its health check: if its breaker is open
		// (it failed while it restarted), it gets a fresh one rather than
		// waiting out the cool-down for a single probe.
		if br := in.CurrentBreaker(); br != nil && br.Snapshot().State != resilience.StateClosed && in.ResetBreaker(br) {
			h.reset()
			h.log.Info("upstream instance answers its health check: its breaker is closed again", slog.String("instance", in.Addr()))
		}
	}
	if old, checked := in.SetHealth(problem); !checked || old != problem {
		level, msg := slog.LevelInfo, "upstream instance healthy"
		if problem != "" {
			level, msg = slog.LevelWarn, "upstream instance unhealthy: skipped until it answers"
		}
		switch {
		case problem != "":
			h.log.Log(context.Background(), level, msg, slog.String("instance", in.Addr()), slog.String("problem", problem))
		case checked:
			h.log.Log(context.Background(), level, msg, slog.String("instance", in.Addr())) // no problem to name
		}
	}
}
