package resilience

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"
)

// Call runs fn once through a breaker and a bulkhead, either of which may be
// nil. The breaker is asked first (an open breaker refuses without waiting
// for a bulkhead slot), then the bulkhead. classify turns fn's result into an
// [Outcome] for the breaker; a nil classify counts a nil error as [Success]
// and any other as [Failure].
//
// Outcomes that say nothing about the dependency are fed as [Ignore]
// whatever classify says: a bulkhead rejection, and a call whose ctx was
// cancelled (its caller gave up). So a probe that meets either releases the
// probe slot without closing or reopening the breaker. A [Failure] (or
// [Hang]) that returns after ctx's deadline passed is [Ignore] too: Call
// knows no deadline of fn's own, so by [CutByCaller] with a zero own deadline the
// caller's deadline ended it (a deadline fn puts on its own work and that
// fires first leaves ctx running, and counts).
//
// If fn panics, Call releases the bulkhead slot and the breaker ticket (as
// Ignore) and then panics again with the same value.
//
// The error is fn's, or the *[OpenError] / *[BulkheadFullError] / context
// error that stopped the call before fn ran.
func Call[T any](ctx context.Context, br *Breaker, bh *Bulkhead, classify func(T, error) Outcome, fn func(context.Context) (T, error)) (T, error) {
	var zero T
	ticket, err := br.Allow()
	if err != nil {
		return zero, err
	}
	permit, err := bh.Acquire(ctx)
	if err != nil {
		ticket.Done(Ignore)
		return zero, err
	}
	finished := false
	defer func() {
		if !finished {
			permit.Release()
			ticket.Done(Ignore)
		}
	}()
	v, err := fn(ctx)
	finished = true
	permit.Release()
	var o Outcome
	switch {
	case errors.Is(ctx.Err(), context.Canceled):
		o = Ignore
	case classify != nil:
		o = classify(v, err)
	case err != nil:
		o = Failure
	default:
		o = Success
	}
	if (o == Failure || o == Hang) && CutByCaller(ctx, time.Time{}) {
		o = Ignore
	}
	ticket.Done(o)
	return v, err
}

// ErrTimeout is the cause of an open-ended call's context ([RunOpts]) that
// its policy's timeout ended.
var ErrTimeout = fmt.Errorf("resilience: the call's timeout passed: %w", context.DeadlineExceeded)

// Verdict is what one attempt says, as the plugin's classifier reads it.
type Verdict struct {
	// Err is the attempt's error: nil when the dependency answered, even
	// with an error of its own (a status, a code).
	Err error
	// Outcome is what the attempt says about the dependency; the breaker
	// counts the call's last attempt's. A [Failure] or [Hang] of an attempt
	// that failed (Err != nil) because its caller's context ended first
	// ([CutByCaller]) is counted as [Ignore].
	Outcome Outcome
	// Retry says another attempt could succeed; the loop still checks the
	// attempts, the deadline, the throttle and the budget.
	Retry bool
	// Overloaded says the dependency refused the attempt for load (HTTP 429
	// or 503, gRPC RESOURCE_EXHAUSTED): the adaptive throttle counts it as
	// not accepted, as it does a [Hang], whatever the Outcome (gRPC's
	// RESOURCE_EXHAUSTED is no evidence for the breaker).
	Overloaded bool
	// Wait is the wait the dependency asked for before the next attempt
	// (Retry-After) when Asked is true; otherwise the backoff decides.
	Wait  time.Duration
	Asked bool
	// Judged says the plugin already applied a rule of its own to an
	// attempt its caller's context cut (a disk's: a caller's deadline after
	// connect_timeout of the dependency's silence is a [Hang]), so the loop
	// keeps Outcome instead of making it [Ignore] by [CutByCaller].
	Judged bool
	// Unsent says the attempt sent nothing to the dependency: no instance
	// would take it (every one's breaker open, or none resolved). The loop
	// counts it in the call's attempts ([Run.Made]), not in those sent
	// ([Run.Sent]); attempt metrics leave it out. A
	// retry or a hedge that sent nothing gives back the budget it was
	// granted, and in a hedged call it neither wins nor cancels the
	// attempts in flight ([Run.Attempts]).
	Unsent bool
	// Ended is when the attempt ended, on the policy's clock, as the time
	// since the call's start ([Run.Start]), when the plugin read the clock
	// then (it timed its own work): the loop takes it for the attempt's end
	// instead of a reading of its own. Zero: the loop reads the clock.
	Ended time.Duration
	// Elsewhere says a retry would go to another instance than this
	// attempt's, one neither tried nor refusing. For a [Hang] the deadline
	// rule then asks only that the wait end before the deadline: the hang's
	// time is the cut that ended it, and says nothing of how long another
	// instance takes to answer.
	Elsewhere bool
}

// Stop is why the loop made no further attempt after one.
type Stop uint8

const (
	// StopNone: another attempt follows, after [AttemptRecord].Wait.
	StopNone Stop = iota
	// StopFinal: the attempt's verdict asked for no retry (it succeeded, or
	// another attempt would fail the same way).
	StopFinal
	// StopAttempts: the call made all the attempts it may.
	StopAttempts
	// StopEnded: the call's context ended (its timeout, the caller's
	// deadline or cancellation).
	StopEnded
	// StopDeadline: the wait and another attempt as long as this one would
	// not end before the call's deadline.
	StopDeadline
	// StopBudget: the retry budget refused the retry.
	StopBudget
	// StopThrottled: the adaptive throttle dropped the retry.
	StopThrottled
	// StopHedged: another attempt of the call, in flight beside this one
	// (hedging), decides: this one lost, or failed while the other may
	// still answer. Its response is dropped, unless it is an answer that
	// failed retryably (a 503) and the attempt that decides got none
	// ([Hedger]).
	StopHedged
	// StopWaitCut: the call's context ended during the wait before the
	// retry (reported by [Run.Stopped], after the attempt's record).
	StopWaitCut
	// StopOpen: the attempt hung and the call's breaker now refuses calls:
	// opened by the silence rule (the dependency answered nothing since the
	// call was admitted, or the call was the probe), or by another call. A
	// retry would wait on the same silence.
	StopOpen
)

// String returns the reason in the words of metrics and logs.
func (s Stop) String() string { return enumName(stopNames, s, "Stop") }

var stopNames = []string{
	StopNone:      "retry",
	StopFinal:     "final",
	StopAttempts:  "attempts",
	StopEnded:     "ended",
	StopDeadline:  "deadline",
	StopBudget:    "budget",
	StopThrottled: "throttled",
	StopHedged:    "hedged",
	StopWaitCut:   "wait_cut",
	StopOpen:      "open",
}

// AttemptRecord is one attempt as the loop reports it to [Attempter.Report],
// after it decided what follows and before any wait.
type AttemptRecord struct {
	// N is the attempt's number, from 1.
	N int
	// Took is the attempt's duration on the policy's clock. A call's first
	// attempt, when the call was admitted without a bulkhead wait on the
	// real clock, is timed from the call's start ([Run.Start]), as
	// [Run.Again] times its first: nothing that takes time comes between.
	Took time.Duration
	// Verdict is the classifier's, its Outcome after the CutByCaller rule.
	Verdict Verdict
	// Stop is why no attempt follows, or StopNone.
	Stop Stop
	// Wait is the wait before the next attempt (StopNone).
	Wait time.Duration
	// Hedge says the attempt was a hedge: started beside another attempt
	// still in flight.
	Hedge bool
}

// Attempter is what a plugin gives the loop ([Run.Attempts]): one attempt,
// read by the plugin's own classifier, and a report of each attempt once
// the loop has decided what follows it. The attempt's result (a response, a
// reply) stays with the plugin.
type Attempter interface {
	// Attempt makes attempt n (from 1) under ctx, the call's context, and
	// returns its verdict.
	Attempt(ctx context.Context, n int) Verdict
	// Report hears of attempt rec.N after the loop decided what follows
	// (rec.Stop), before the wait of a retry: the place for per-attempt
	// metrics, and for letting go of a response a retry replaces.
	Report(rec AttemptRecord)
}

// Run is one call admitted by a [Policy] ([Policy.Begin]): it holds the
// breaker ticket and the bulkhead place, and the call's context under the
// policy's timeout, until [Run.End]. A Run is used by one goroutine.
type Run struct {
	p         *Policy
	caller    context.Context // the caller's
	ctx       context.Context // the call's, under the timeout
	cancel    context.CancelFunc
	stopTimer func() bool // open-ended: stops the timeout
	breaker   *Breaker
	ticket    Ticket
	permit    Permit
	start     time.Time // on the policy's clock
	end       time.Time // start + timeout on the policy's clock; zero: no timeout
	own       time.Time // the same instant on the time package's clock
	max       int
	made      int
	sent      int // attempts reported that sent something (not Verdict.Unsent)
	outcome   Outcome
	stop      Stop
	ended     bool
	settled   bool          // Settle counted the call's outcome before End
	refused   bool          // an attempt hung and the call's breaker refused calls then
	hedge     bool          // RunOpts.Hedge on a policy with hedge_after
	atStart   bool          // admitted without a wait on the real clock: the first attempt begins at start
	granted   time.Duration // when the budget granted the last retry or hedge (RetryBudget.grant)
	lastEnd   time.Duration // since start: when the last attempt Attempts made ended (EndAnswered); 0 when none
	began     time.Duration // since start: when the attempt Attempts makes, or the one Again ends, began
}

// Attempts runs the call's attempts, the one loop of jfast's outbound
// calls: attempt, read the verdict (an attempt cut by the caller is no
// evidence; one that hung ends the call's breaker ticket by the silence
// rule, see below), then stop or retry by one rule, in this order: the
// verdict asks for no retry; the call made its attempts; the call's context
// ended; the attempt hung and the call's breaker refuses calls; the wait (the dependency's, or the policy's backoff, full or proportional jitter by backoff_jitter) plus another
// attempt as long as this one would not end before the deadline (the
// policy's timeout or the caller's sooner one); the adaptive throttle
// drops the retry (when on); the retry budget refuses. Each attempt that is
// evidence (not [Ignore]), or Overloaded, is counted by the throttle:
// accepted unless the verdict is Overloaded or a [Hang].
// A retry waits on the policy's clock. Every attempt is reported to a.
// It returns the last attempt's verdict; [Run.Outcome] is what the breaker
// will count at [Run.End].
//
// The silence rule: an attempt whose verdict is a [Hang] (the plugin's own
// deadline passed with no answer) ends the call's ticket at once as
// [Ticket.TripOnSilence] does when the call is its breaker's probe, or
// when the dependency answered no call since this one was admitted: the
// breaker opens for a full cool-down, the call makes no retry (StopOpen),
// and [Run.End] counts nothing more. So a request's next call to the
// dependency is refused at once, and one request pays one bound per
// outage, not one per call or per attempt. When the dependency answered
// meanwhile the ticket stays the call's (a retry may follow, unless the
// breaker refuses calls by then), and End counts the last attempt's
// outcome as before: a Hang then is one failure among answers.
//
// A hedgeable call ([RunOpts].Hedge, on a policy with hedge_after, and an
// Attempter that is a [Hedger]) runs its attempts on branches that may
// overlap: see [Hedger]. A choice among a
// dependency's instances is the attempt's own: [Attempter.Attempt] picks
// the instance and takes its breaker's ticket, [Attempter.Report] gives the
// ticket the attempt's outcome (after the rule above) with
// [Ticket.DoneAttempt], which applies the silence rule to a Hang, and the
// call is admitted with [RunOpts].NoBreaker (the http plugin's upstream
// instances).
func (r *Run) Attempts(a Attempter) Verdict {
	if r.hedge {
		if h, ok := a.(Hedger); ok {
			if delay, ok := r.p.hedgeDelay(); ok {
				return r.hedged(h, delay)
			}
		}
	}
	clock := r.p.clock
	for {
		r.made++
		n := r.made
		// Durations from the call's start: on the real clock a reading of
		// the monotonic clock only.
		began := time.Duration(0) // the first attempt of a call admitted at once: at its start
		if n > 1 || !r.atStart {
			began = elapsed(clock, r.start)
		}
		r.began = began
		v := a.Attempt(r.ctx, n)
		r.giveBack(n, r.granted, v)
		end := v.Ended
		if end <= 0 || end < began {
			end = elapsed(clock, r.start)
		}
		r.lastEnd = end
		rec := AttemptRecord{N: n, Took: end - began}
		v = r.judge(v, rec.Took)
		rec.Verdict = v
		rec.Stop, rec.Wait = r.decide(v, rec.Took)
		r.observe(rec)
		a.Report(rec)
		if rec.Stop != StopNone {
			return v
		}
		if clock.Sleep(r.ctx, rec.Wait) != nil {
			r.stop = StopWaitCut
			return v
		}
	}
}

// Again ends an attempt the plugin made itself, outside [Run.Attempts]: a
// stream's, which its caller's reads drive. The call's first attempt begins
// at [Policy.Begin], each next one when Again returns true; a plugin drives
// a call either with Attempts or with Again, never both. Again counts the
// attempt ([Run.Made]) and judges v as the loop judges an attempt's
// verdict: the CutByCaller rule, the throttle's count, the silence rule,
// then the loop's stop-or-retry rule in its order (the verdict; the
// attempts; the call's context; the breaker refusing after a hang; the
// wait plus another attempt as long as this one, which began at Begin or
// at the last Again that returned true, before the deadline; the throttle;
// the budget). It reports the attempt to the policy's OnAttempt, then to
// report when not nil (the place of an [Attempter.Report]), before any
// wait. It returns true after the wait of a retry, which the plugin then
// makes under [Run.Context]; false when the call stops ([Run.Stopped] says
// why, StopWaitCut when the call's context ended during the wait), and
// false without judging anything once the Run has ended or was never
// admitted. Unlike Attempts it feeds no latency to a percentile
// hedge_after: such an attempt (a stream to its end) is not an answer's
// latency. [Run.Outcome] is then v's outcome after the rules, what
// [Run.End] is usually given.
func (r *Run) Again(v Verdict, report func(AttemptRecord)) bool {
	if r.ended {
		return false
	}
	clock := r.p.clock
	r.made++
	rec := AttemptRecord{N: r.made, Took: elapsed(clock, r.start) - r.began}
	v = r.weigh(v)
	rec.Verdict = v
	rec.Stop, rec.Wait = r.decide(v, rec.Took)
	r.observe(rec)
	if report != nil {
		report(rec)
	}
	if rec.Stop != StopNone {
		return false
	}
	if clock.Sleep(r.ctx, rec.Wait) != nil {
		r.stop = StopWaitCut
		return false
	}
	r.began = elapsed(clock, r.start)
	return true
}

// decide applies the silence rule to attempt r.made, whose judged verdict
// is v and which took took, makes v's outcome the call's, and returns what
// follows it ([Run.next]).
func (r *Run) decide(v Verdict, took time.Duration) (Stop, time.Duration) {
	r.silence(v)
	r.outcome = v.Outcome
	stop, wait := r.next(v, took)
	r.stop = stop
	return stop, wait
}

// next decides what follows attempt r.made, which took took: StopNone and
// the wait before a retry, or why there is none.
func (r *Run) next(v Verdict, took time.Duration) (Stop, time.Duration) {
	switch {
	case !v.Retry:
		return StopFinal, 0
	case r.made >= r.max:
		return StopAttempts, 0
	case r.ctx.Err() != nil:
		return StopEnded, 0
	case r.refused:
		return StopOpen, 0
	}
	wait := v.Wait
	if !v.Asked {
		wait = r.p.backoff.Delay(r.made)
	}
	next := took // another attempt as long as this one
	if v.Outcome == Hang && v.Elsewhere {
		next = 0
	}
	if r.left() <= wait+next {
		return StopDeadline, 0
	}
	if r.p.throttle.Allow() != nil {
		return StopThrottled, 0
	}
	if !r.grant() {
		return StopBudget, 0
	}
	return StopNone, wait
}

// grant asks the retry budget for a retry (or a hedge) and keeps when it
// was granted, for giveBack.
func (r *Run) grant() bool {
	ok, at := r.p.budget.grant()
	r.granted = at
	return ok
}

// giveBack gives the budget back the retry or hedge (attempt n, from 2)
// granted at that sent nothing: no instance would take it.
func (r *Run) giveBack(n int, granted time.Duration, v Verdict) {
	if n > 1 && v.Unsent {
		r.p.budget.giveBack(granted)
	}
}

// silence applies the silence rule to an attempt that hung (see
// [Run.Attempts]): the call's ticket opens its breaker and is spent when
// the call probed or nothing answered since it was admitted.
func (r *Run) silence(v Verdict) {
	if v.Outcome != Hang {
		return
	}
	spent, refuses := r.ticket.hung()
	if spent {
		r.ticket = Ticket{} // counted: End has nothing more to count
	}
	r.refused = r.refused || refuses
}

// left returns what the call has left: until the policy's timeout on its
// clock, or the caller's sooner deadline.
func (r *Run) left() time.Duration {
	left := time.Duration(math.MaxInt64)
	if !r.end.IsZero() {
		left = r.end.Sub(r.p.clock.Now())
	}
	if d, ok := r.caller.Deadline(); ok {
		left = min(left, time.Until(d))
	}
	return left
}

// Context returns the call's context: the caller's, under the policy's
// timeout. It is cancelled by [Run.End].
func (r *Run) Context() context.Context { return r.ctx }

// CancelFunc returns what cancels the call's context, for an attempt that
// must end the call (one whose connection pool wait timed out).
func (r *Run) CancelFunc() context.CancelFunc { return r.cancel }

// EndTimeout ends an open-ended call's timeout ([RunOpts].OpenEnded): what
// follows is bounded by the caller's context only.
func (r *Run) EndTimeout() {
	if r.stopTimer != nil {
		r.stopTimer()
	}
}

// Caller returns the caller's context.
func (r *Run) Caller() context.Context { return r.caller }

// Start returns when the call began, on the policy's clock.
func (r *Run) Start() time.Time { return r.start }

// AttemptBegan returns when the attempt [Run.Attempts] is making began, as
// the time since [Run.Start] on the policy's clock: an attempt that needs
// the time it began reads it here instead of the clock. Not an attempt's of
// a hedged call, which runs beside others ([Hedger]).
func (r *Run) AttemptBegan() time.Duration { return r.began }

// Deadline returns the call's deadline (its timeout's: [RunOpts].Timeout,
// or the policy's) on the policy's clock, and false when it has none.
func (r *Run) Deadline() (time.Time, bool) { return r.end, !r.end.IsZero() }

// Own returns the call's deadline on the time package's clock
// (zero: none), for [CutByCaller].
func (r *Run) Own() time.Time { return r.own }

// Probe reports whether the call is its breaker's half-open probe.
func (r *Run) Probe() bool { return r.ticket.Probe() }

// Made returns how many attempts the call made, those that sent nothing
// (Verdict.Unsent) included: the count the attempts key bounds.
func (r *Run) Made() int { return r.made }

// Sent returns how many of the call's attempts, hedges included, were sent
// to the dependency: [Run.Made] without those whose verdict was Unsent. It
// is the count a plugin reports as the call's attempts (an error's, a
// call observer's), as the policy metrics count them.
func (r *Run) Sent() int { return r.sent }

// observe counts one attempt the loop has decided on and reports it to the
// policy's OnAttempt.
func (r *Run) observe(rec AttemptRecord) {
	if !rec.Verdict.Unsent {
		r.sent++
	}
	if r.p.observe != nil {
		r.p.observe(rec)
	}
}

// Outcome returns the last attempt's outcome, what [Run.End] is usually
// given.
func (r *Run) Outcome() Outcome { return r.outcome }

// Stopped returns why the loop stopped.
func (r *Run) Stopped() Stop { return r.stop }

// Settle counts o on the call's breaker now, while the call goes on: the
// bulkhead place and the call's context stay the call's until [Run.End].
// It suits a call whose answer arrived and whose transfer may take long (a
// download or a stream that was its breaker's probe: the breaker must not
// wait for the body to end). Later calls, and calls after End, do nothing.
func (r *Run) Settle(o Outcome) {
	if r.ended || r.settled {
		return
	}
	r.settled = true
	r.ticket.Done(o)
	r.ticket = Ticket{}
}

// End ends the call: the breaker counts o, the bulkhead place is freed and
// the call's context cancelled. Later calls do nothing. After [Run.Settle]
// it counts nothing more.
func (r *Run) End(o Outcome) { r.endAt(o, time.Time{}) }

// EndAnswered ends the call as [Run.End] does, for a call that ends with
// its last attempt, right after [Run.Attempts] returned (an answer read in
// full, not a transfer that goes on): the breaker counts o at that
// attempt's end, which the loop read, instead of reading the clock once
// more. After a hedged call's attempts it is End.
func (r *Run) EndAnswered(o Outcome) {
	at := time.Time{}
	if r.lastEnd > 0 {
		at = r.start.Add(r.lastEnd)
	}
	r.endAt(o, at)
}

// endAt is End, the breaker counting o at at (zero: now).
func (r *Run) endAt(o Outcome, at time.Time) {
	if r.ended {
		return
	}
	r.ended = true
	r.ticket.doneAt(o, at)
	r.permit.Release()
	r.cancel()
}

// EndTransfer ends a call whose transfer outlived its answer (a download, a
// stream) as [Run.End] does. When the call was settled at its answer
// ([Run.Settle], its breaker's probe), a Failure or a Hang of the transfer
// since is evidence of now: it is counted on a ticket of its own, when the
// breaker admits one (an open breaker knows already). Any other outcome
// counts nothing more.
func (r *Run) EndTransfer(o Outcome) {
	if r.ended {
		return
	}
	settled := r.settled
	r.End(o)
	if settled && (o == Failure || o == Hang) {
		if t, err := r.breaker.Allow(); err == nil {
			t.Done(o)
		}
	}
}
