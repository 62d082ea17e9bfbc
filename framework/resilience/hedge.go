package resilience

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Hedging defaults and bounds (docs/resilience.md, "Hedging").
const (
	// DefaultMaxHedges is one hedge: the second request is where almost all
	// of the tail goes; a third adds load for little more.
	DefaultMaxHedges = 1
	// hedgeSamples is how many recent latencies a percentile hedge_after is
	// read from, and hedgeMinSamples how many it needs before the first
	// hedge: below that the percentile says little and nothing is hedged.
	hedgeSamples    = 1024
	hedgeMinSamples = 100
	// hedgeRecompute is how often (in samples) the percentile is computed
	// again: a sort of hedgeSamples durations, so a few hundred operations
	// per call.
	hedgeRecompute = 32
)

// ParseHedgeAfter reads hedge_after: a fixed delay ("20ms") or a latency
// percentile of the dependency ("p95", "p99.9"), above 0 and below 100.
// "" is no hedging (both results zero).
func ParseHedgeAfter(s string) (fixed time.Duration, pct float64, err error) {
	if s == "" {
		return 0, 0, nil
	}
	if rest, ok := strings.CutPrefix(s, "p"); ok {
		p, err := strconv.ParseFloat(rest, 64)
		if err != nil || !(p > 0 && p < 100) {
			return 0, 0, fmt.Errorf("a percentile is p followed by a number above 0 and below 100, got %q", s)
		}
		return 0, p, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return 0, 0, fmt.Errorf("must be a positive duration or a percentile such as \"p95\", got %q", s)
	}
	return d, 0, nil
}

// latencies keeps a dependency's recent attempt latencies and a percentile
// of them.
type latencies struct {
	pct   float64
	value atomic.Int64 // the percentile; 0 until hedgeMinSamples were seen

	mu    sync.Mutex
	ring  [hedgeSamples]time.Duration
	n     int // samples seen
	since int // samples since the last computation
}

// add records one latency.
func (l *latencies) add(d time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.ring[l.n%hedgeSamples] = d
	l.n++
	l.since++
	if l.n < hedgeMinSamples || l.since < hedgeRecompute {
		return
	}
	l.since = 0
	s := slices.Clone(l.ring[:min(l.n, hedgeSamples)])
	slices.Sort(s)
	i := min(int(float64(len(s))*l.pct/100), len(s)-1)
	l.value.Store(int64(max(s[i], 1)))
}

// Hedger is an [Attempter] whose attempts may overlap (hedging, opted into
// with hedge_after and [RunOpts].Hedge). Each attempt, the first included,
// runs on its own branch in its own goroutine; the loop reports each
// attempt to its branch, then keeps the branch whose verdict the call
// returns (or retries after) and drops the others, whose responses the
// plugin lets go of (closing their bodies). When that branch got no answer
// (Verdict.Err) and the call holds another's answer (a 503 that ended
// while it was in flight), the loop keeps both, the answer first: the
// plugin sees them as the sequential loop's two attempts, and returns the
// answer as it returns an earlier attempt's response when the last got
// none. Keep and Drop are called from the loop's goroutine, once every
// branch's Attempt has returned.
type Hedger interface {
	Attempter
	// Branch returns the attempter of one more attempt of the call, with
	// state of its own; attempts of other branches may be in flight.
	Branch() Attempter
	// Keep makes b's attempt the call's.
	Keep(b Attempter)
	// Drop lets go of b's attempt.
	Drop(b Attempter)
}

// hedgeDelay returns how long a hedgeable call waits for its attempt
// before it sends a hedge, and false when it sends none (no hedge_after,
// or a percentile not known yet).
func (p *Policy) hedgeDelay() (time.Duration, bool) {
	if p.hedgeFixed > 0 {
		return p.hedgeFixed, true
	}
	if p.latency == nil {
		return 0, false
	}
	d := time.Duration(p.latency.value.Load())
	return d, d > 0
}

// recordLatency feeds an attempt's latency to a percentile hedge_after.
func (p *Policy) recordLatency(took time.Duration) {
	if p.latency != nil {
		p.latency.add(took)
	}
}

// branchResult is one branch's attempt, back in the loop's goroutine.
type branchResult struct {
	b       Attempter
	n       int
	hedge   bool
	granted time.Duration // when the budget granted it (n > 1)
	cancel  context.CancelFunc
	v       Verdict
	took    time.Duration
}

// hedged is the loop of a hedgeable call: the attempt runs on a branch; if
// it has not answered after the hedge delay, and the call may make another
// attempt (attempts, deadline, throttle, budget, in that order), a hedge
// starts beside it on another branch, up to max_hedges (and attempts − 1).
// The first verdict that asks for no retry wins: the others are cancelled,
// reported with StopHedged and dropped. A retryable failure while another
// attempt is in flight is reported the same way and held; the last one
// standing decides as in the sequential loop (stop, or wait and attempt
// again, hedges re-armed), the silence rule included: a hang while another
// attempt is in flight decides nothing, since the other may still answer.
// The call does not lose an answer to a later failure that got none: a
// retryable answer held (a 503) stays held over a later error, and is kept
// before the last one standing when that one is an error ([Hedger]).
//
// A branch that sent nothing (Verdict.Unsent: no instance would take it)
// neither wins nor cancels the attempts in flight: it is reported with
// StopHedged and dropped, and its budget given back; it counts in the
// call's attempts but not in max_hedges, so a later hedge may still go out
// (after hedge_after again) while attempts allow. Last standing, it
// decides as the sequential loop's retry that found no instance does (it
// asks for none: the call stops), and the call keeps the held attempt,
// the last one sent, when there is one.
func (r *Run) hedged(h Hedger, delay time.Duration) Verdict {
	clock := r.p.clock
	results := make(chan branchResult, r.max)
	live := make(map[int]*branchResult, 1+min(r.p.maxHedges, r.max-1))
	var held *branchResult // the last retryable failure reported while others were in flight
	hedges := 0
	launch := func(hedge bool) {
		r.made++
		br := &branchResult{b: h.Branch(), n: r.made, hedge: hedge, granted: r.granted}
		var ctx context.Context
		ctx, br.cancel = context.WithCancel(r.ctx)
		live[br.n] = br
		go func(res branchResult) {
			began := clock.Now()
			res.v = res.b.Attempt(ctx, res.n)
			res.took = clock.Now().Sub(began)
			results <- res
		}(*br)
	}
	var timer Timer
	var fire <-chan time.Time
	arm := func() {
		if hedges < r.p.maxHedges && r.made < r.max {
			timer = clock.NewTimer(delay)
			fire = timer.C()
		}
	}
	disarm := func() {
		if timer != nil {
			timer.Stop()
		}
		timer, fire = nil, nil
	}
	launch(false)
	arm()
	for {
		select {
		case <-fire:
			timer, fire = nil, nil
			if stop := r.mayHedge(); stop != StopNone {
				if r.p.hedgeNo != nil && (stop == StopThrottled || stop == StopBudget) {
					r.p.hedgeNo(stop)
				}
				continue // no more hedges for this attempt
			}
			hedges++
			launch(true)
			arm()
		case res := <-results:
			delete(live, res.n)
			v := r.judge(res.v, res.took)
			r.giveBack(res.n, res.granted, v)
			if (v.Retry || v.Unsent) && len(live) > 0 {
				// Another attempt in flight may still answer.
				r.report(res, v, StopHedged, 0)
				if v.Unsent {
					h.Drop(res.b) // nothing to hold
					if res.hedge {
						hedges-- // not a hedge sent: a later one may find an instance
					}
					if fire == nil {
						arm()
					}
					continue
				}
				held = hold(h, held, res)
				continue
			}
			disarm()
			r.cancelLosers(h, live, results)
			stop, wait := r.decide(v, res.took)
			r.report(res, v, stop, wait)
			keepLast(h, held, res)
			held = nil
			if stop != StopNone {
				return v
			}
			if clock.Sleep(r.ctx, wait) != nil {
				r.stop = StopWaitCut
				return v
			}
			hedges = 0
			launch(false)
			arm()
		}
	}
}

// hold returns the attempt a hedged call holds once res, a retryable
// failure, ended while other attempts were in flight, and drops the other:
// the later one, unless the held one is the dependency's answer (Err nil: a
// 503) and res is not (a transport error), so that the call does not lose
// what the dependency said to a failure that said nothing.
func hold(h Hedger, held *branchResult, res branchResult) *branchResult {
	if held != nil && held.v.Err == nil && res.v.Err != nil {
		h.Drop(res.b)
		return held
	}
	if held != nil {
		h.Drop(held.b)
	}
	return &res
}

// keepLast keeps the attempts a hedged call ends with, or retries after,
// once res, the last one standing, was decided on, held being the attempt
// held meanwhile (nil: none). res is kept, and held dropped, as the
// sequential loop's plugin replaces an earlier attempt by a later one;
// except that an answer held is kept before a res that got none (an error),
// as the sequential loop's plugin still has an earlier attempt's response
// when its last attempt got none; and that a res that sent nothing
// (Unsent) is dropped and held kept: the call's attempt is the last one
// sent.
func keepLast(h Hedger, held *branchResult, res branchResult) {
	switch {
	case held == nil:
		h.Keep(res.b)
	case res.v.Unsent:
		h.Drop(res.b)
		h.Keep(held.b)
	case held.v.Err == nil && res.v.Err != nil:
		h.Keep(held.b)
		h.Keep(res.b)
	default:
		h.Drop(held.b)
		h.Keep(res.b)
	}
}

// mayHedge returns StopNone when a hedge that is due may start, else why
// not: the call's context ended or no time is left (StopEnded), the
// throttle drops it, the budget refuses it.
func (r *Run) mayHedge() Stop {
	switch {
	case r.ctx.Err() != nil || r.left() <= 0:
		return StopEnded
	case r.p.throttle.Allow() != nil:
		return StopThrottled
	case !r.grant():
		return StopBudget
	}
	return StopNone
}

// judge applies the loop's rules to an attempt's verdict ([Run.weigh]) and
// feeds an answer's latency to a percentile hedge_after.
func (r *Run) judge(v Verdict, took time.Duration) Verdict {
	v = r.weigh(v)
	if v.Err == nil {
		r.p.recordLatency(took)
	}
	return v
}

// weigh applies the cut-by-caller rule to an attempt's verdict and counts
// it in the throttle. Decided when the attempt ends, not after a wait the
// caller may cut: a refused connection stays evidence if the caller's
// deadline ends the wait.
func (r *Run) weigh(v Verdict) Verdict {
	if v.Err != nil && !v.Judged && (v.Outcome == Failure || v.Outcome == Hang) && CutByCaller(r.caller, r.own) {
		v.Outcome = Ignore
	}
	r.p.throttle.record(v)
	return v
}

// cancelLosers cancels the attempts still in flight, waits for each to
// return, and reports and drops it.
func (r *Run) cancelLosers(h Hedger, live map[int]*branchResult, results <-chan branchResult) {
	for _, br := range live {
		br.cancel()
	}
	for len(live) > 0 {
		res := <-results
		delete(live, res.n)
		// The first attempt, a loser, ran at least the hedge delay: what it
		// ran is a lower bound of a latency above the delay, which leaves
		// the percentile as it is. A hedge's time runs from its own launch
		// (it may have been cut a moment after), and one that sent nothing
		// has none: neither is a latency.
		if !res.hedge && !res.v.Unsent {
			r.p.recordLatency(res.took)
		}
		r.giveBack(res.n, res.granted, res.v) // a hedge that sent nothing, as on the main path
		v := res.v
		v.Outcome = Ignore // cancelled by its call: no evidence
		r.report(res, v, StopHedged, 0)
		h.Drop(res.b)
	}
}

// report reports one branch's attempt to the policy's hook and the branch,
// and ends its context.
func (r *Run) report(res branchResult, v Verdict, stop Stop, wait time.Duration) {
	rec := AttemptRecord{N: res.n, Took: res.took, Verdict: v, Stop: stop, Wait: wait, Hedge: res.hedge}
	r.observe(rec)
	res.b.Report(rec)
	res.cancel()
}
