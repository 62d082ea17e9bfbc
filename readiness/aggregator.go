package readiness

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"slices"
	"sync"
	"time"
)

// DefaultTimeout is the timeout [NewAggregator] uses when given zero or less;
// it is the default of app.readiness_timeout. 800 ms is far above a healthy
// dependency's ping (milliseconds) and below the 1 s a Kubernetes probe waits
// by default (timeoutSeconds), with room for the HTTP round trip: /ready
// answers before the probe gives up, even with every dependency hung.
const DefaultTimeout = 800 * time.Millisecond

// Details of the entries the aggregator writes itself.
const (
	detailPanicked  = "check panicked"
	detailCancelled = "no answer before the caller gave up"
)

// errTimeout is the cause of the aggregator's own deadline, told apart from
// the caller cancelling.
var errTimeout = errors.New("readiness: timeout")

// Aggregator runs a set of checks in parallel under one timeout and folds
// their reports into a [Result]. It is safe for concurrent use; checks may be
// added while it serves. It needs no clock: the timeout is a context
// deadline.
type Aggregator struct {
	timeout time.Duration
	logger  *slog.Logger

	mu     sync.Mutex
	checks []Check
}

// NewAggregator returns an aggregator that runs checks under timeout
// ([DefaultTimeout] when timeout ≤ 0). It panics, like [Aggregator.Add], on a
// check without a name or a Run function, or on a duplicate name.
func NewAggregator(timeout time.Duration, checks ...Check) *Aggregator {
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	a := &Aggregator{timeout: timeout}
	for _, c := range checks {
		a.Add(c)
	}
	return a
}

// Add registers c. It panics on an empty name, a nil Run or a name already
// registered: those are wiring mistakes, found at boot.
func (a *Aggregator) Add(c Check) {
	if c.Name == "" {
		panic("readiness: check with an empty name")
	}
	if c.Run == nil {
		panic("readiness: check " + c.Name + " has no Run function")
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, have := range a.checks {
		if have.Name == c.Name {
			panic("readiness: duplicate check " + c.Name)
		}
	}
	a.checks = append(a.checks, c)
}

// SetLogger sets the logger that records panicking checks. Defaults to
// slog.Default() at the time of the panic.
func (a *Aggregator) SetLogger(l *slog.Logger) {
	a.mu.Lock()
	a.logger = l
	a.mu.Unlock()
}

// Timeout returns the timeout each run is bounded by.
func (a *Aggregator) Timeout() time.Duration { return a.timeout }

// outcome is what one check's goroutine hands back.
type outcome struct {
	i        int
	report   Report
	panicked bool
	// late is set when the check's context had ended, or its deadline had
	// passed, by the time it returned: it answered only because it was told
	// to stop (typically with a "context deadline exceeded" or "i/o timeout"
	// failure), so it did not answer in time. Deciding this in the check's goroutine keeps a check that
	// honours its context from being reported as "fail" or "timeout" at
	// random, depending on which of two ready channels select picks.
	late bool
}

// Run runs every check in parallel, each with a context that ends after the
// timeout (or when ctx ends), and returns when all have answered or the
// timeout has passed, whichever comes first. It never waits for a check that
// ignores its context: that check is reported as Timeout and its goroutine
// finishes on its own, touching nothing Run returned. A check that returns
// only after its context ended, or at or after its deadline even before the
// context's own timer marked it done, is reported as Timeout too, whatever it
// returned. A check that panics is reported as Fail with the detail "check
// panicked"; the panic and its stack go to the log, never to the body.
//
// Each entry is normalised (an empty Status becomes Pass if Healthy, else
// Fail) and its Critical field is set to the check's declared Critical and:
//
//   - for Fail, the report's Unreachable;
//   - for Timeout and for a panic, true;
//   - for Pass, false.
//
// The result is Unavailable when some entry is critical and unhealthy,
// otherwise Degraded when some entry is unhealthy, otherwise OK (also with
// no checks).
func (a *Aggregator) Run(ctx context.Context) Result {
	a.mu.Lock()
	checks := slices.Clone(a.checks)
	logger := a.logger
	a.mu.Unlock()

	res := Result{Status: OK, Checks: make(map[string]Report, len(checks))}
	if len(checks) == 0 {
		return res
	}

	ctx, cancel := context.WithTimeoutCause(ctx, a.timeout, errTimeout)
	defer cancel()

	// Buffered for every check, so a check that answers after Run returned
	// sends into the buffer and exits: nothing shared is written late.
	results := make(chan outcome, len(checks))
	for i, c := range checks {
		go runOne(ctx, i, c, results, logger)
	}

	reports := make([]Report, len(checks))
	answered := make([]bool, len(checks))
	panicked := make([]bool, len(checks))
	pending := len(checks)
	collect := func(o outcome) {
		reports[o.i], panicked[o.i] = o.report, o.panicked
		answered[o.i] = !o.late || o.panicked
		pending--
	}
wait:
	for pending > 0 {
		select {
		case o := <-results:
			collect(o)
		case <-ctx.Done():
			// Take what already arrived before declaring the rest late.
			for pending > 0 {
				select {
				case o := <-results:
					collect(o)
				default:
					break wait
				}
			}
		}
	}

	late := "no answer within " + a.timeout.String()
	if ctx.Err() != nil && !errors.Is(context.Cause(ctx), errTimeout) {
		late = detailCancelled
	}
	for i, c := range checks {
		var r Report
		switch {
		case !answered[i]:
			r = Report{Status: Timeout, Detail: late, Critical: c.Critical}
		case panicked[i]:
			r = Report{Status: Fail, Detail: detailPanicked, Critical: c.Critical}
		default:
			r = normalise(reports[i])
			r.Critical = c.Critical && (r.Status == Timeout || (r.Status == Fail && r.Unreachable))
		}
		r.Healthy = r.Status == Pass
		if !r.Healthy {
			if r.Critical {
				res.Status = Unavailable
			} else if res.Status == OK {
				res.Status = Degraded
			}
		}
		res.Checks[c.Name] = r
	}
	return res
}

// normalise makes Status and Healthy agree, filling a missing Status from
// Healthy. An unknown Status is treated like a missing one.
func normalise(r Report) Report {
	switch r.Status {
	case Pass, Fail, Timeout:
	default:
		if r.Healthy {
			r.Status = Pass
		} else {
			r.Status = Fail
		}
	}
	r.Healthy = r.Status == Pass
	if r.Healthy {
		r.Unreachable = false
	}
	return r
}

// runOne runs one check, turning a panic into an outcome. It writes only to
// results, which has room for every check.
func runOne(ctx context.Context, i int, c Check, results chan<- outcome, logger *slog.Logger) {
	defer func() {
		if v := recover(); v != nil {
			if logger == nil {
				logger = slog.Default()
			}
			logger.Error("readiness check panicked",
				"check", c.Name, "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
			results <- outcome{i: i, panicked: true}
		}
	}()
	r := c.Run(ctx)
	results <- outcome{i: i, report: r, late: expired(ctx)}
}

// expired reports whether ctx has ended or its deadline has passed. The
// deadline is read too because ctx.Err is set by the context's own timer: a
// check whose client arms a socket deadline at ctx's deadline (the Redis
// client under the cache plugin's check does) can see that one fire, and return "i/o timeout", a moment
// before ctx's timer marks ctx done. Both deadlines are on the monotonic
// clock time.Now reads, so a check that returned at or after its deadline is
// late whichever timer ran first.
func expired(ctx context.Context) bool {
	if ctx.Err() != nil {
		return true
	}
	d, ok := ctx.Deadline()
	return ok && !time.Now().Before(d)
}
