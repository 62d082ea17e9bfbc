package resilience_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/jfastframework/jfast/framework/resilience"
)

// A breaker checked once per call, fed the call's final outcome, on a test
// clock: five consecutive failures open it, the error carries the wait, and
// after the cool-down one probe closes it again.
func ExampleBreaker() {
	clock := resilience.NewTestClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	br := resilience.NewBreaker(resilience.BreakerOpts{
		Name:  "billing",
		Clock: clock,
		OnStateChange: func(c resilience.StateChange) {
			fmt.Printf("%s: %s -> %s after %d consecutive failures\n", c.Name, c.From, c.To, c.Consecutive)
		},
	})
	for range 5 {
		ticket, _ := br.Allow()
		ticket.Done(resilience.Failure) // e.g. a 503
	}
	_, err := br.Allow()
	fmt.Println(err, errors.Is(err, resilience.ErrOpen))

	clock.Advance(15 * time.Second)
	probe, _ := br.Allow()
	probe.Done(resilience.Success)
	fmt.Println(br.Snapshot().State)
	// Output:
	// billing: closed -> open after 5 consecutive failures
	// calls to 'billing' are suspended for 15.0s true
	// billing: open -> half_open after 0 consecutive failures
	// billing: half_open -> closed after 0 consecutive failures
	// closed
}

// Call runs one attempt through a breaker and a bulkhead; the classifier
// (here the shared HTTP rule) decides what the result means for the breaker:
// a 429 is an answer, so it counts as a success and resets the run of
// failures.
func ExampleCall() {
	br := resilience.NewBreaker(resilience.BreakerOpts{Name: "billing"})
	bh := resilience.NewBulkhead(resilience.BulkheadOpts{Name: "billing"})
	status, err := resilience.Call(context.Background(), br, bh, resilience.HTTPOutcome,
		func(ctx context.Context) (int, error) { return http.StatusServiceUnavailable, nil })
	fmt.Println(status, err, br.Snapshot().Consecutive)
	status, err = resilience.Call(context.Background(), br, bh, resilience.HTTPOutcome,
		func(ctx context.Context) (int, error) { return http.StatusTooManyRequests, nil })
	fmt.Println(status, err, br.Snapshot().Consecutive, br.Snapshot().WindowCalls)
	// Output:
	// 503 <nil> 1
	// 429 <nil> 0 2
}

// The scripted attempt loop of docs/design.md's first worked case: ratio 0.1, twenty calls to an
// upstream that only answers 503, three attempts each, a clock that does not
// move.
func ExampleRetryBudget() {
	clock := resilience.NewTestClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	budget := resilience.NewRetryBudget(resilience.RetryBudgetOpts{Ratio: 0.1, Clock: clock})
	requests := 0
	for range 20 {
		budget.RecordCall()
		for attempt := 1; ; attempt++ {
			requests++ // 503
			if attempt == 3 || !budget.TryRetry() {
				break
			}
		}
	}
	s := budget.Snapshot()
	fmt.Println(requests, "requests,", s.Retries, "retries,", s.Denied, "denied")
	// Output: 22 requests, 2 retries, 20 denied
}

// A test asserts how long a retry loop waited without waiting.
func ExampleTestClock() {
	clock := resilience.NewTestClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	clock.SetAutoAdvance(true)
	backoff := resilience.Backoff{Base: 100 * time.Millisecond, Max: time.Second}
	for attempt := 1; attempt <= 3; attempt++ {
		_ = clock.Sleep(context.Background(), backoff.Delay(attempt))
	}
	for i, d := range clock.Sleeps() {
		fmt.Println(i+1, d <= backoff.Ceiling(i+1))
	}
	// Output:
	// 1 true
	// 2 true
	// 3 true
}

func ExampleParseRetryAfter() {
	now := time.Date(2026, 11, 30, 1, 0, 0, 0, time.UTC)
	for _, v := range []string{"3", "Mon, 30 Nov 2026 01:00:10 GMT", "120", "soon"} {
		d, ok, tooLong := resilience.ParseRetryAfter(v, now, 30*time.Second)
		fmt.Println(d, ok, tooLong)
	}
	// Output:
	// 3s true false
	// 10s true false
	// 2m0s true true
	// 0s false false
}

func ExampleBulkhead() {
	bh := resilience.NewBulkhead(resilience.BulkheadOpts{Name: "billing", MaxConcurrent: 1, Wait: time.Millisecond})
	permit, _ := bh.Acquire(context.Background())
	_, err := bh.Acquire(context.Background()) // waits 1 ms, then gives up
	fmt.Println(err)
	permit.Release()
	permit.Release() // harmless
	fmt.Println(bh.InFlight())
	// Output:
	// bulkhead for 'billing' is full: 1 calls in flight, waited 1ms
	// 0
}

// statusAttempter is a plugin's side of the loop: its attempt (here a
// scripted upstream) and its classifier (the shared HTTP rule, a 503 being
// worth another try).
type statusAttempter struct{ answers []int }

func (a *statusAttempter) Attempt(_ context.Context, n int) resilience.Verdict {
	status := a.answers[n-1]
	return resilience.Verdict{Outcome: resilience.HTTPOutcome(status, nil), Retry: status == http.StatusServiceUnavailable}
}

func (a *statusAttempter) Report(rec resilience.AttemptRecord) {
	fmt.Printf("attempt %d: %s\n", rec.N, rec.Stop)
}

// A call through a Policy: one breaker ticket for the whole call, a retry
// after a 503 within attempts, the deadline and the budget, the wait on the
// policy's clock (a test clock that advances itself here).
func ExamplePolicy() {
	clock := resilience.NewTestClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	clock.SetAutoAdvance(true)
	p := resilience.NewPolicy(resilience.PolicyOpts{Name: "billing", Config: resilience.DefaultPolicyConfig(), Clock: clock})

	var run resilience.Run
	if err := p.Begin(context.Background(), &run, resilience.RunOpts{}); err != nil {
		fmt.Println(err)
		return
	}
	run.Attempts(&statusAttempter{answers: []int{503, 200}})
	run.End(run.Outcome())
	fmt.Println(run.Made(), "attempts,", run.Outcome(), "for the breaker, which saw", p.Breaker().Snapshot().WindowCalls, "call")
	// Output:
	// attempt 1: retry
	// attempt 2: final
	// 2 attempts, success for the breaker, which saw 1 call
}
