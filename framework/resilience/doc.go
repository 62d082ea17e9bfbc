// Package resilience is the one implementation of jfast's breakers, retry
// budgets, bulkheads, backoff and clock. Every plugin's deadlines, retries
// and breakers go through it; no plugin writes its own.
//
// Everything here is per dependency and per process: a service with many
// workers (processes or replicas) has one [Breaker], one [RetryBudget] and
// one [Bulkhead] per dependency in each of them, each deciding on its own
// evidence. See docs/resilience.md for the reasons behind every default.
//
// # Clock
//
// Every timer goes through a [Clock]: [RealClock] in production, a
// [TestClock] in tests, which moves only when the test calls
// [TestClock.Advance] and records every Sleep, so cool-downs, budget windows
// and bulkhead waits are tested without sleeping.
//
// # Breaker
//
// A [Breaker] is closed, open or half-open:
//
//   - Closed: calls pass. It opens after Failures (5) consecutive failures,
//     or when at least FailureRate (0.5) of the calls of the last Window
//     (30 s, sliding) failed, provided there were at least MinimumCalls (20).
//     The consecutive count does not decay with the window. A [Hang] (the
//     plugin's own deadline expired with no answer) with nothing answered
//     since the call was admitted makes it half-open at once: one hung
//     dependency costs one call's deadline and one probe's, not Failures.
//   - Open: [Breaker.Allow] fails at once with an [*OpenError] that carries
//     the cool-down left, for CoolDown (15 s).
//   - Half-open: after the cool-down exactly one probe passes and every
//     other call fails fast. A probe success closes the breaker (and resets
//     the counts), a probe failure reopens it for a full cool-down, and an
//     [Ignore] outcome (the caller gave up, a bulkhead rejection) frees the
//     probe slot for the next caller.
//
// What counts as a failure is the caller's decision, reported as an
// [Outcome] through [Ticket.Done]; [HTTPOutcome] is the rule for HTTP, and
// [CutByCaller] tells a call cut by its caller's deadline (no evidence) from
// one cut by the plugin's own (a failure). Tickets carry the breaker's generation, so
// a result that arrives after a state change cannot decide the new state.
// State changes are reported to [BreakerOpts].OnStateChange with the counts
// from just before the change.
//
// # RetryBudget, Bulkhead, Backoff
//
// A [RetryBudget] lets a retry start while the retries of the last 10 s stay
// below 0.2 × the calls of the last 10 s, or while fewer than 1 retry was
// made in the last second; [TokenBucketOpts] selects the token-bucket
// variant instead. A [Bulkhead] admits at most 50 calls in flight and makes
// a call wait at most 0.5 s for a slot. [Backoff] computes full-jitter (or
// proportional-jitter) delays and [ParseRetryAfter] reads a Retry-After header.
//
// # Policy
//
// A [Policy] is the outbound policy of one dependency, built from the
// policy keys ([PolicyConfig], embedded in every client plugin's table):
// its breaker, budget, bulkhead, backoff, attempts and timeout, and the one
// attempt loop every client runs its calls through. [Policy.Begin] admits a
// call (breaker ticket, bulkhead place, deadline) into a [Run];
// [Run.Attempts] runs the plugin's [Attempter] by the loop's one rule and
// reports every attempt ([Run.Again] judges by the same rule an attempt the
// plugin drives itself, a stream's); [Run.End] gives the breaker the call's
// outcome once.
//
// # Example
//
// One call of a client plugin, its attempt and classifier in an Attempter:
//
//	p := resilience.NewPolicy(resilience.PolicyOpts{Name: "billing", Config: cfg})
//
//	var run resilience.Run
//	if err := p.Begin(ctx, &run, resilience.RunOpts{}); err != nil {
//		return err // *OpenError, *BulkheadFullError, *ThrottledError (throttle = true) or the context's error
//	}
//	v := run.Attempts(call) // call.Attempt(ctx, n) returns a Verdict
//	run.End(run.Outcome())
//	return v.Err
//
// [Call] runs one attempt through a breaker and a bulkhead, for plugins whose
// calls are never retried by this package:
//
//	status, err := resilience.Call(ctx, br, bh, classify, send)
package resilience
