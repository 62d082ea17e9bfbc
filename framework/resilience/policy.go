package resilience

import (
	"context"
	"time"
)

// PolicyOpts configures a [Policy].
type PolicyOpts struct {
	// Name names the dependency in errors, logs and metrics, and names its
	// breaker, budget and bulkhead. Defaults to "dependency".
	Name string
	// Config is the policy keys, every default filled. A zero Attempts is
	// one attempt; a zero Timeout puts no bound of the policy's own on a
	// call (the caller's context only).
	Config PolicyConfig
	// Clock is the time source of the breaker, budget, bulkhead, waits and
	// deadline checks. Defaults to RealClock().
	Clock Clock
	// OnStateChange hears the breaker's transitions ([LogStateChanges]).
	// Defaults to nil.
	OnStateChange func(StateChange)
	// OnAttempt hears of every attempt of every call, as [Attempter.Report]
	// does and before it: the place of the policy metrics every plugin
	// shares (framework.DependencyMetrics). Defaults to nil.
	OnAttempt func(AttemptRecord)
	// OnHedgeRefused hears of each hedge that was due and not sent
	// because the adaptive throttle dropped it (StopThrottled) or the
	// retry budget refused it (StopBudget): a hedge is a retry, counted
	// with them. Defaults to nil.
	OnHedgeRefused func(Stop)
	// Rand returns a number in [0, 1), the draw of the throttle's
	// decisions. Defaults to math/rand/v2's Float64.
	Rand func() float64
	// WithDeadline puts a call's deadline (on the time package's clock) on
	// the caller's context, as context.WithDeadline does, and returns what
	// ends the context when the call ends. A plugin whose calls are many
	// and short may time them more cheaply: the queue's enqueues whose
	// caller's context never ends share one timer. Not used for an
	// open-ended call ([RunOpts].OpenEnded). Defaults to
	// context.WithDeadline.
	WithDeadline func(ctx context.Context, d time.Time) (context.Context, context.CancelFunc)
	// NoBulkhead leaves the policy without a bulkhead: the dependency's
	// own pool already bounds how many calls are in flight and how long
	// one waits for a place (the queue's enqueues wait for the db or cache
	// plugin's connections). [Policy.Bulkhead] then returns nil, and the
	// max_concurrent and bulkhead_wait keys are not read. Defaults to
	// false.
	NoBulkhead bool
}

// Policy is the outbound policy of one dependency: its breaker, retry
// budget, bulkhead, backoff, attempts and deadline, and the one attempt
// loop every plugin that calls out runs its calls through ([Policy.Begin],
// [Run.Attempts]). It is safe for concurrent use; make one per dependency
// and per process, at boot.
type Policy struct {
	name     string
	clock    Clock
	breaker  *Breaker
	budget   *RetryBudget
	bulkhead *Bulkhead
	throttle *Throttle // nil: throttle is off
	// hedging: a fixed hedge_after, or the latencies a percentile is read
	// from (nil: none)
	hedgeFixed time.Duration
	latency    *latencies
	maxHedges  int
	backoff    Backoff
	attempts   int
	timeout    time.Duration
	observe    func(AttemptRecord)
	hedgeNo    func(Stop)
	real       bool // clock is the time package's: the deadline is read off the call's start
	// withDeadline is PolicyOpts.WithDeadline, context.WithDeadline when
	// not set
	withDeadline func(context.Context, time.Time) (context.Context, context.CancelFunc)
}

// NewPolicy returns the policy o describes. It panics, as [NewBreaker] does,
// on a config [PolicyConfig.Validate] refuses.
func NewPolicy(o PolicyOpts) *Policy {
	if o.Name == "" {
		o.Name = "dependency"
	}
	clock, _, _ := unwrapClock(o.Clock)
	_, real := clock.(realClock)
	var throttle *Throttle
	if to := o.Config.ThrottleOpts(o.Name, o.Clock, o.Rand); to != nil {
		throttle = NewThrottle(*to)
	}
	fixed, pct, _ := ParseHedgeAfter(o.Config.HedgeAfter) // Validate refused a bad one
	var lat *latencies
	if pct > 0 {
		lat = &latencies{pct: pct}
	}
	var bulkhead *Bulkhead // nil: every call has a place
	if !o.NoBulkhead {
		bulkhead = NewBulkhead(o.Config.BulkheadOpts(o.Name, o.Clock))
	}
	withDeadline := o.WithDeadline
	if withDeadline == nil {
		withDeadline = context.WithDeadline
	}
	return &Policy{
		hedgeFixed: fixed,
		latency:    lat,
		maxHedges:  max(o.Config.MaxHedges, 1),
		throttle:   throttle,
		name:       o.Name,
		clock:      clock,
		breaker:    NewBreaker(o.Config.Opts(o.Name, o.Clock, o.OnStateChange)),
		budget:     NewRetryBudget(o.Config.BudgetOpts(o.Name, o.Clock)),
		bulkhead:   bulkhead,
		backoff:    o.Config.Backoff(),
		attempts:   max(o.Config.Attempts, 1),
		timeout:    o.Config.Timeout,
		observe:    o.OnAttempt,
		hedgeNo:    o.OnHedgeRefused,
		real:       real,

		withDeadline: withDeadline,
	}
}

// Name returns the dependency's name.
func (p *Policy) Name() string { return p.name }

// Breaker returns the policy's breaker, for /ready and tests.
func (p *Policy) Breaker() *Breaker { return p.breaker }

// Budget returns the policy's retry budget.
func (p *Policy) Budget() *RetryBudget { return p.budget }

// Bulkhead returns the policy's bulkhead, nil for a policy made with
// [PolicyOpts].NoBulkhead.
func (p *Policy) Bulkhead() *Bulkhead { return p.bulkhead }

// Throttle returns the policy's adaptive throttle, nil when throttle is
// off.
func (p *Policy) Throttle() *Throttle { return p.throttle }

// Clock returns the policy's clock.
func (p *Policy) Clock() Clock { return p.clock }

// Timeout returns the bound of a whole call (0: none of the policy's own).
func (p *Policy) Timeout() time.Duration { return p.timeout }

// RunOpts are one call's departures from its policy. The zero RunOpts takes
// the policy as it is.
type RunOpts struct {
	// Breaker, when not nil, counts this call instead of the policy's own
	// breaker (a breaker per route of one upstream).
	Breaker *Breaker
	// NoBreaker admits the call without a breaker of the call's: the
	// attempts take tickets of breakers of their own (one per instance of
	// the dependency, in [Attempter.Attempt], reported in
	// [Attempter.Report]), so the dependency is refused only when every
	// instance is. It wins over Breaker.
	NoBreaker bool
	// Attempts, when positive and below the policy's, caps this call's
	// attempts: 1 for a call that is not safe to repeat.
	Attempts int
	// Timeout, when positive, bounds this call instead of the policy's
	// timeout: its context's deadline, and the deadline checks between
	// attempts (a stream, bounded by a stream timeout of its own). Defaults
	// to the policy's timeout.
	Timeout time.Duration
	// OpenEnded bounds the call by the policy's timeout only until
	// [Run.EndTimeout] is called (a streamed response, once its headers are
	// in): the call's context then has no deadline of the policy's. The
	// deadline checks between attempts are the same.
	OpenEnded bool
	// TimeoutCause is the cause an open-ended call's context is cancelled
	// with when the timeout passes first. Defaults to [ErrTimeout].
	TimeoutCause error
	// Hedge says the call is safe to send twice at once (idempotent): with
	// the policy's hedge_after, and an Attempter that is a [Hedger], its
	// attempts may overlap.
	Hedge bool
}

// Begin admits one call into r (a zero Run, often a field of the plugin's
// own per-call struct, which saves an allocation per call): the adaptive
// throttle first (when on: a call it drops costs the dependency nothing,
// not even a breaker ticket), then the breaker (an open breaker refuses at
// once, without waiting for a bulkhead place), then the bulkhead, under
// the call's deadline. The error is the throttle's *[ThrottledError], the
// breaker's *[OpenError], the bulkhead's *[BulkheadFullError], or the
// context error that ended the wait for a place; then nothing is held.
// Otherwise r holds the breaker ticket and the bulkhead place until
// [Run.End].
func (p *Policy) Begin(ctx context.Context, r *Run, o RunOpts) error {
	*r = Run{p: p, caller: ctx, breaker: p.breaker, max: p.attempts, start: p.clock.Now()}
	if o.Breaker != nil {
		r.breaker = o.Breaker
	}
	if o.NoBreaker {
		r.breaker = nil // a nil *Breaker lets every call through and counts nothing
	}
	if o.Attempts > 0 && o.Attempts < r.max {
		r.max = o.Attempts
	}
	r.hedge = o.Hedge && (p.hedgeFixed > 0 || p.latency != nil)
	if err := p.throttle.Allow(); err != nil {
		r.ended = true
		return err
	}
	ticket, err := r.breaker.Allow()
	if err != nil {
		r.ended = true
		return err
	}
	r.ticket = ticket
	r.deadline(o)
	permit, free := p.bulkhead.tryAcquire()
	if !free {
		if permit, err = p.bulkhead.Acquire(r.ctx); err != nil {
			r.ended = true
			r.cancel()
			ticket.Done(Ignore)
			return err
		}
	}
	r.permit = permit
	if free && p.real {
		p.budget.recordCallAt(r.start) // admitted without a wait: the call's start is now
		r.atStart = true
	} else {
		p.budget.RecordCall()
	}
	return nil
}

// deadline puts the call's timeout (RunOpts.Timeout, or the policy's) on
// the call's context.
func (r *Run) deadline(o RunOpts) {
	t := r.p.timeout
	if o.Timeout > 0 {
		t = o.Timeout
	}
	if t <= 0 {
		r.ctx, r.cancel = context.WithCancel(r.caller)
		return
	}
	r.end = r.start.Add(t)
	// own is the timeout on the clock of context deadlines: it tells a call
	// cut by the caller's sooner deadline from one cut by the policy's
	// (CutByCaller). end is the same instant on the policy's clock, which
	// decides what a retry has left (a test clock moves it without waiting).
	// On the real clock they are one reading (the time package's clock is
	// read once per call, not twice).
	r.own = r.end
	if !r.p.real {
		r.own = time.Now().Add(t)
	}
	if !o.OpenEnded {
		r.ctx, r.cancel = r.p.withDeadline(r.caller, r.own)
		return
	}
	ctx, cancel := context.WithCancelCause(r.caller)
	cause := o.TimeoutCause
	if cause == nil {
		cause = ErrTimeout
	}
	timer := time.AfterFunc(t, func() { cancel(cause) })
	r.ctx, r.stopTimer = ctx, timer.Stop
	r.cancel = func() { timer.Stop(); cancel(context.Canceled) }
}
