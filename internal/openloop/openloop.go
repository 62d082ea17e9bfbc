// Package openloop offers a service load at a constant arrival rate, as the
// overload benchmark (bench/overload) and drill (drills/scenarios) do: each
// request is sent at its scheduled time whether or not the ones before it
// were answered (an open loop), and its latency counts from that time, so a
// server that falls behind cannot slow the load down and hide its queue, as
// a closed loop (N workers each waiting for its answer) would.
//
// It also holds the handler both use ([Work]: a fixed slice of CPU, then a
// wait standing for a dependency), a closed-loop [Saturate] to measure a
// handler's capacity, and a [Probe] that asks a health endpoint on a new
// connection every time, as an orchestrator's probe does.
package openloop

import (
	"context"
	"io"
	"net"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Work returns a handler that burns cpu of CPU time on its thread, then
// waits wait (a dependency's answer) or until its request's context ends,
// and answers 200 "ok".
func Work(cpu, wait time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		Burn(cpu)
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-r.Context().Done():
			t.Stop()
			return
		}
		_, _ = io.WriteString(w, "ok")
	})
}

// Load is an open-loop load: Rate requests a second for Duration.
type Load struct {
	URL      string
	Rate     float64
	Duration time.Duration
	// Timeout is the client's: a request unanswered after it is given up
	// (its connection closed). Defaults to 2s.
	Timeout time.Duration
	// Objective is the latency within which a 2xx counts as goodput.
	// Defaults to 500ms.
	Objective time.Duration
	// Client sends the requests. Defaults to one with keep-alive
	// connections, as many as needed.
	Client *http.Client
}

// Result is what a Load measured.
type Result struct {
	Offered  float64 // requests per second
	Duration time.Duration
	Sent     int
	OK       int // 2xx
	Good     int // 2xx within the objective
	Shed     int // 503 or 429
	Failed   int // anything else: other statuses, errors, timeouts
	// Admitted holds the latency of every 2xx, from its scheduled send.
	Admitted []time.Duration
}

// Goodput is the 2xx answers within the objective per second.
func (r Result) Goodput() float64 { return float64(r.Good) / r.Duration.Seconds() }

// ShedFraction is the share of requests answered 503 or 429.
func (r Result) ShedFraction() float64 {
	if r.Sent == 0 {
		return 0
	}
	return float64(r.Shed) / float64(r.Sent)
}

// Percentile returns the p-th percentile (0 < p ≤ 100) of the admitted
// latencies, or 0 without any.
func (r Result) Percentile(p float64) time.Duration {
	return Percentile(r.Admitted, p)
}

// Percentile returns the p-th percentile of ds (nearest rank), or 0.
func Percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(float64(len(s))*p/100+0.999999) - 1
	return s[min(max(i, 0), len(s)-1)]
}

// NewClient returns a client for a load: keep-alive connections without a
// cap, no compression.
func NewClient() *http.Client {
	return &http.Client{Transport: &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 2 * time.Second}).DialContext,
		MaxIdleConns:        10000,
		MaxIdleConnsPerHost: 10000,
		IdleConnTimeout:     30 * time.Second,
		DisableCompression:  true,
	}}
}

// Run offers the load and returns what it measured once every request has
// been answered or given up. ctx ends it early.
func Run(ctx context.Context, l Load) Result {
	timeout := l.Timeout
	if timeout <= 0 {
		timeout = 2 * time.Second
	}
	objective := l.Objective
	if objective <= 0 {
		objective = 500 * time.Millisecond
	}
	client := l.Client
	if client == nil {
		client = NewClient()
		defer client.CloseIdleConnections()
	}
	res := Result{Offered: l.Rate, Duration: l.Duration}
	var (
		mu sync.Mutex
		wg sync.WaitGroup
	)
	interval := time.Duration(float64(time.Second) / l.Rate)
	start := time.Now()
	n := int(l.Duration.Seconds() * l.Rate)
	for i := range n {
		at := start.Add(time.Duration(i) * interval)
		if d := time.Until(at); d > 0 {
			select {
			case <-time.After(d):
			case <-ctx.Done():
			}
		}
		if ctx.Err() != nil {
			break
		}
		res.Sent++
		wg.Go(func() {
			status, took := send(ctx, client, l.URL, at, timeout)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case status >= 200 && status < 300:
				res.OK++
				res.Admitted = append(res.Admitted, took)
				if took <= objective {
					res.Good++
				}
			case status == http.StatusServiceUnavailable || status == http.StatusTooManyRequests:
				res.Shed++
			default:
				res.Failed++
			}
		})
	}
	wg.Wait()
	return res
}

// send sends one GET scheduled at at and returns its status (0 when it
// failed) and its latency from at.
func send(ctx context.Context, c *http.Client, url string, at time.Time, timeout time.Duration) (int, time.Duration) {
	ctx, cancel := context.WithDeadline(ctx, at.Add(timeout))
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, 0
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, time.Since(at)
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if err != nil {
		return 0, time.Since(at)
	}
	return resp.StatusCode, time.Since(at)
}

// Saturate runs workers closed loops against url for d and returns the
// 2xx answers per second: the handler's capacity when workers are enough
// to keep it busy.
func Saturate(ctx context.Context, url string, workers int, d time.Duration) float64 {
	client := NewClient()
	defer client.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	var ok atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for range workers {
		wg.Go(func() {
			for ctx.Err() == nil {
				if status, _ := send(ctx, client, url, time.Now(), 10*time.Second); status >= 200 && status < 300 {
					ok.Add(1)
				}
			}
		})
	}
	wg.Wait()
	return float64(ok.Load()) / time.Since(start).Seconds()
}

// ProbeResult is what a Probe saw.
type ProbeResult struct {
	N       int           // probes sent
	Failed  int           // probes that got no 200 within the timeout
	Slowest time.Duration // the slowest answer (or the timeout)
	Over    int           // 200s slower than the bound given to Probe (a failed probe is in Failed only)
	// Times holds every probe's time, in order (a failed one as the timeout).
	Times []time.Duration
}

// Probe sends GET url on a new connection every interval until ctx ends,
// each given up after timeout, and reports the slowest and how many took
// longer than bound.
func Probe(ctx context.Context, url string, interval, timeout, bound time.Duration) ProbeResult {
	var res ProbeResult
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return res
		case <-tick.C:
		}
		client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
		start := time.Now()
		status, _ := send(context.Background(), client, url, start, timeout)
		took := time.Since(start)
		res.N++
		if status != http.StatusOK {
			res.Failed++
			took = max(took, timeout)
		} else if took > bound {
			res.Over++
		}
		res.Slowest = max(res.Slowest, took)
		res.Times = append(res.Times, took)
	}
}

// burnWall spins for d of wall time.
func burnWall(d time.Duration) {
	var buf [32]byte
	for end := time.Now().Add(d); time.Now().Before(end); {
		for range 16 {
			buf[0]++
		}
	}
}
