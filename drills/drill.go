package drills

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"
)

// Drill takes one dependency away from a running service and gives it back,
// checking the contract and measuring what the outage cost. It only talks HTTP
// to the service, so it drives a jfasttest.Service as well as a deployed one.
type Drill struct {
	// Dependency names the dependency in the table ("db", "cache", ...).
	Dependency string
	// Fault says how it is taken away ("pause (SIGSTOP)", "blackhole", ...).
	Fault string
	// BaseURL is the service's base URL, "http://127.0.0.1:PORT".
	BaseURL string
	// Route is a GET path whose handler uses the dependency.
	Route string
	// Headers are name, value pairs sent with Route (an Authorization header).
	Headers []string
	// Other is a GET path that does not use the dependency and must keep
	// answering 200 meanwhile. Empty skips the check.
	Other string
	// Want is Route's documented status while the dependency is away: 503, or
	// 200 where the plugin fails open.
	Want int
	// NameKey and NameValue are the problem member that must name the
	// dependency in a 503 ("dependency": "db"; "upstream": "billing").
	NameKey, NameValue string
	// Check is the /ready check that must report the dependency unhealthy.
	Check string
	// Critical means the plugin is declared critical: /ready answers 503
	// "unavailable" instead of 200 "degraded".
	Critical bool
	// Deadline is the longest one request may take while the dependency is
	// away: its configured deadlines plus a margin.
	Deadline time.Duration
	// Fast is the answer time under which a request was answered without
	// waiting on the dependency (by an open breaker, or fail-open).
	// Defaults to 100ms.
	Fast time.Duration
	// MaxPaid is how many requests may pay a deadline before one is answered
	// fast. Defaults to 10.
	MaxPaid int
	// Answered is how many fast answers to measure. Defaults to 20.
	Answered int
	// ReadyWithin is how long /ready may take to report the dependency once
	// the route was checked: zero checks once, at once (a breaker already
	// open says so); a dependency used from a queue job is reported only
	// after a job's attempt failed.
	ReadyWithin time.Duration
	// ReadyBound, when positive, is the longest each /ready request may take
	// while the dependency is away. Zero checks nothing.
	ReadyBound time.Duration
	// RecoverWithin bounds the wait for Route to answer 200 again after Give
	// (the breaker's cool-down plus a margin). Defaults to 60s.
	RecoverWithin time.Duration
	// Take takes the dependency away; Give gives it back. Give is called once,
	// also when a check fails.
	Take, Give func() error
	// Progress, when set, receives a line per step.
	Progress io.Writer
	// Client sends the requests. Defaults to a client with a 60 s timeout.
	Client *http.Client
}

// Result is what one drill measured.
type Result struct {
	Dependency string
	Fault      string
	// Status is what Route answered while the dependency was away.
	Status int
	// FirstAnswer is how long the first request after the fault took.
	FirstAnswer time.Duration
	// Paid is how many requests paid a deadline before a fast answer; Slowest
	// is the longest of them.
	Paid    int
	Slowest time.Duration
	// AnsweredP50 and AnsweredMax are the fast answers' latencies.
	AnsweredP50, AnsweredMax time.Duration
	// Ready is /ready's verdict while the dependency was away; ReadyMax the
	// slowest /ready answer meanwhile.
	Ready    string
	ReadyMax time.Duration
	// Recover is the time from Give to Route's first 200 (to /ready's first
	// "ok" when Route fails open and answered 200 throughout).
	Recover time.Duration
	// Skipped, when set, says why the drill did not run.
	Skipped string
	// Err is the contract violation, if any.
	Err error
}

func (d *Drill) defaults() {
	if d.Fast <= 0 {
		d.Fast = 100 * time.Millisecond
	}
	if d.MaxPaid <= 0 {
		d.MaxPaid = 10
	}
	if d.Answered <= 0 {
		d.Answered = 20
	}
	if d.RecoverWithin <= 0 {
		d.RecoverWithin = 60 * time.Second
	}
	if d.Client == nil {
		d.Client = &http.Client{Timeout: 60 * time.Second}
	}
	if d.Check == "" {
		d.Check = d.Dependency
	}
	if d.NameKey == "" {
		d.NameKey = "dependency"
	}
}

func (d *Drill) logf(format string, args ...any) {
	if d.Progress != nil {
		fmt.Fprintf(d.Progress, "  %s/%s: %s\n", d.Dependency, d.Fault, fmt.Sprintf(format, args...))
	}
}

type answer struct {
	status int
	header http.Header
	body   []byte
	took   time.Duration
}

func (d *Drill) get(ctx context.Context, path string, headers []string) (answer, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, d.BaseURL+path, nil)
	if err != nil {
		return answer{}, err
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	start := time.Now()
	resp, err := d.Client.Do(req)
	if err != nil {
		return answer{}, fmt.Errorf("GET %s: %w", path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	took := time.Since(start)
	if err != nil {
		return answer{}, fmt.Errorf("GET %s: %w", path, err)
	}
	return answer{status: resp.StatusCode, header: resp.Header, body: body, took: took}, nil
}

// checkDown checks one answer given while the dependency is away.
func (d *Drill) checkDown(a answer) error {
	if a.status != d.Want {
		return fmt.Errorf("GET %s while %s is away: %d, want %d: %s", d.Route, d.Dependency, a.status, d.Want, a.body)
	}
	if a.took > d.Deadline {
		return fmt.Errorf("GET %s while %s is away took %s, more than its deadline %s", d.Route, d.Dependency, a.took.Round(time.Millisecond), d.Deadline)
	}
	if a.status != http.StatusServiceUnavailable {
		return nil
	}
	if ct := a.header.Get("Content-Type"); !strings.HasPrefix(ct, "application/problem+json") {
		return fmt.Errorf("GET %s: a 503 with Content-Type %q, want application/problem+json", d.Route, ct)
	}
	var p map[string]any
	if err := json.Unmarshal(a.body, &p); err != nil {
		return fmt.Errorf("GET %s: a 503 whose body is not JSON: %s", d.Route, a.body)
	}
	if d.NameValue != "" && p[d.NameKey] != d.NameValue {
		return fmt.Errorf("GET %s: the 503 does not name %s=%q: %s", d.Route, d.NameKey, d.NameValue, a.body)
	}
	return nil
}

// Run runs the drill. The dependency is given back before Run returns, also
// when a check fails; the error is the first contract violation.
func (d *Drill) Run(ctx context.Context) (res Result) {
	d.defaults()
	res = Result{Dependency: d.Dependency, Fault: d.Fault}
	fail := func(err error) Result {
		res.Err = err
		d.logf("FAIL: %v", err)
		return res
	}
	// Healthy first.
	a, err := d.get(ctx, d.Route, d.Headers)
	if err != nil {
		return fail(err)
	}
	if a.status != http.StatusOK {
		return fail(fmt.Errorf("GET %s before the fault: %d, want 200: %s", d.Route, a.status, a.body))
	}
	var once sync.Once
	var giveErr error
	give := func() { once.Do(func() { giveErr = d.Give() }) }
	defer give()
	d.logf("taking %s away", d.Dependency)
	if err := d.Take(); err != nil {
		return fail(fmt.Errorf("take %s away: %w", d.Dependency, err))
	}

	// Requests pay deadlines until one is answered fast.
	var paid []time.Duration
	for {
		a, err := d.get(ctx, d.Route, d.Headers)
		if err != nil {
			return fail(err)
		}
		if len(paid) == 0 && res.FirstAnswer == 0 {
			res.FirstAnswer = a.took
			res.Status = a.status
		}
		if err := d.checkDown(a); err != nil {
			return fail(err)
		}
		if a.took < d.Fast {
			break
		}
		paid = append(paid, a.took)
		d.logf("request %d paid %s", len(paid), a.took.Round(time.Millisecond))
		if len(paid) > d.MaxPaid {
			return fail(fmt.Errorf("%d requests paid a deadline and none was answered under %s: %v", len(paid), d.Fast, paid))
		}
	}
	res.Paid = len(paid)
	if len(paid) > 0 {
		res.Slowest = slices.Max(paid)
	}
	answered := make([]time.Duration, 0, d.Answered)
	for range d.Answered {
		a, err := d.get(ctx, d.Route, d.Headers)
		if err != nil {
			return fail(err)
		}
		if err := d.checkDown(a); err != nil {
			return fail(err)
		}
		answered = append(answered, a.took)
	}
	slices.Sort(answered)
	res.AnsweredP50, res.AnsweredMax = answered[len(answered)/2], answered[len(answered)-1]
	d.logf("%d paid a deadline, then %d answered: p50 %s, max %s", res.Paid, len(answered), res.AnsweredP50, res.AnsweredMax)

	// Routes that do not use it keep answering.
	if d.Other != "" {
		a, err := d.get(ctx, d.Other, nil)
		if err != nil {
			return fail(err)
		}
		if a.status != http.StatusOK {
			return fail(fmt.Errorf("GET %s (does not use %s) while %s is away: %d: %s", d.Other, d.Dependency, d.Dependency, a.status, a.body))
		}
	}
	// /ready names it.
	var report struct {
		Verdict string `json:"verdict"` // "status" is the number 503 in the problem+json answer

		Checks map[string]struct {
			Healthy  bool `json:"healthy"`
			Critical bool `json:"critical"`
		} `json:"checks"`
	}
	wantStatus, wantReady := http.StatusOK, "degraded"
	if d.Critical {
		wantStatus, wantReady = http.StatusServiceUnavailable, "unavailable"
	}
	readySince := time.Now()
	var ready answer
	for {
		readyStart := time.Now()
		ready, err = d.get(ctx, "/ready", nil)
		if err != nil {
			return fail(err)
		}
		took := time.Since(readyStart)
		res.ReadyMax = max(res.ReadyMax, took)
		if d.ReadyBound > 0 && took > d.ReadyBound {
			return fail(fmt.Errorf("/ready while %s is away took %s, over %s", d.Dependency, took.Round(time.Millisecond), d.ReadyBound))
		}
		report.Checks = nil
		if err := json.Unmarshal(ready.body, &report); err != nil {
			return fail(fmt.Errorf("/ready: %v: %s", err, ready.body))
		}
		c, ok := report.Checks[d.Check]
		if ready.status == wantStatus && report.Verdict == wantReady && ok && !c.Healthy {
			break
		}
		if time.Since(readySince) >= d.ReadyWithin {
			return fail(fmt.Errorf("/ready while %s is away: %d %s, want %d %q with check %q unhealthy", d.Dependency, ready.status, ready.body, wantStatus, wantReady, d.Check))
		}
		time.Sleep(50 * time.Millisecond)
	}
	res.Ready = report.Verdict
	d.logf("/ready: %d %s, %s unhealthy", ready.status, report.Verdict, d.Check)

	// Give it back: the same service answers again.
	give()
	if giveErr != nil {
		return fail(fmt.Errorf("give %s back: %w", d.Dependency, giveErr))
	}
	start := time.Now()
	for {
		a, err := d.get(ctx, d.Route, d.Headers)
		if err != nil {
			return fail(err)
		}
		if a.status == http.StatusOK {
			res.Recover = time.Since(start)
			break
		}
		if time.Since(start) > d.RecoverWithin {
			return fail(fmt.Errorf("GET %s still %d %s after %s given back %s ago", d.Route, a.status, a.body, d.Dependency, time.Since(start).Round(time.Millisecond)))
		}
		select {
		case <-ctx.Done():
			return fail(ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
	for i := range 3 {
		a, err := d.get(ctx, d.Route, d.Headers)
		if err != nil {
			return fail(err)
		}
		if a.status != http.StatusOK {
			return fail(fmt.Errorf("GET %s, request %d after the recovery: %d %s", d.Route, i+1, a.status, a.body))
		}
	}
	for {
		r, err := d.get(ctx, "/ready", nil)
		if err != nil {
			return fail(err)
		}
		if r.status == http.StatusOK && strings.Contains(string(r.body), `"verdict":"ok"`) {
			if d.Want == http.StatusOK {
				// A route that fails open answered 200 throughout: its
				// recovery is the dependency's check passing again.
				res.Recover = time.Since(start)
			}
			break
		}
		if time.Since(start) > d.RecoverWithin {
			return fail(fmt.Errorf("/ready still %d %s after %s was given back", r.status, r.body, d.Dependency))
		}
		time.Sleep(50 * time.Millisecond)
	}
	d.logf("recovered %s after it was given back", res.Recover.Round(time.Millisecond))
	return res
}
