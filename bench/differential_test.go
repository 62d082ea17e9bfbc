package bench

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sony/gobreaker/v2"

	"github.com/jfastframework/jfast/framework/resilience"
)

// TestDifferentialGobreaker feeds the same random sequences of calls (each
// admitted, then finished later with a success, a failure or an ignored
// outcome, possibly after other calls) and cool-down waits to jfast's
// Breaker and to gobreaker's TwoStepCircuitBreaker configured the same way
// (consecutive rule only: 5 failures; one probe when half-open; ignored
// outcomes excluded), and checks after every step that both admit the same
// calls and are in the same state.
//
// gobreaker reads the real clock, so its cool-down is real (100 ms) and a
// wait really sleeps; jfast's runs on a test clock advanced by the same
// amount. A sequence whose goroutine stalled for a whole cool-down between
// two steps (possible on a loaded machine) cannot be compared and is run
// again with the next seed.
func TestDifferentialGobreaker(t *testing.T) {
	t.Parallel()
	const sequences, steps = 300, 80
	var compared, stalled atomic.Int32
	var wg sync.WaitGroup
	for i := range sequences {
		wg.Go(func() {
			for seed := uint64(i); ; seed += sequences {
				err := differentialRun(seed, steps)
				if errors.Is(err, errStalled) {
					if stalled.Add(1) > sequences/10 {
						t.Errorf("more than %d sequences stalled; machine too loaded to compare", sequences/10)
						return
					}
					continue
				}
				if err != nil {
					t.Errorf("seed %d: %v", seed, err)
				}
				compared.Add(1)
				return
			}
		})
	}
	wg.Wait()
	t.Logf("%d sequences compared, %d stalled and re-run", compared.Load(), stalled.Load())
}

var (
	errStalled = errors.New("stalled for a cool-down between steps")
	errFailure = errors.New("failure")
	errIgnored = errors.New("ignored")
)

const diffCoolDown = 100 * time.Millisecond

type ticketPair struct {
	ours   resilience.Ticket
	theirs func(error)
}

func differentialRun(seed uint64, steps int) error {
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	clock := resilience.NewTestClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	ours := resilience.NewBreaker(resilience.BreakerOpts{
		Name: "diff", Failures: 5, MinimumCalls: 1 << 30, CoolDown: diffCoolDown, Clock: clock,
	})
	// theirsOpenedAt is when the gobreaker call that opened it began: the
	// earliest time it can have read for its cool-down (its state-change
	// hook runs after it read the clock, perhaps long after on a loaded
	// machine, so the hook's own time.Now would be too late). Written under
	// gobreaker's lock, on this goroutine.
	var theirsOpenedAt, callStart time.Time
	theirs := gobreaker.NewTwoStepCircuitBreaker[struct{}](gobreaker.Settings{
		Name:        "diff",
		MaxRequests: 1,
		Timeout:     diffCoolDown,
		ReadyToTrip: func(c gobreaker.Counts) bool { return c.ConsecutiveFailures >= 5 },
		IsExcluded:  func(err error) bool { return errors.Is(err, errIgnored) },
		OnStateChange: func(_ string, _, to gobreaker.State) {
			if to == gobreaker.StateOpen {
				theirsOpenedAt = callStart
			}
		},
	})
	var outstanding []ticketPair
	var log []string
	for step := range steps {
		var desc string
		switch r := rng.IntN(100); {
		case r < 45 || len(outstanding) == 0 && r < 90:
			tk, errOurs := ours.Allow()
			callStart = time.Now()
			done, errTheirs := theirs.Allow()
			desc = fmt.Sprintf("allow: ours %v, theirs %v", errOurs, errTheirs)
			if (errOurs == nil) != (errTheirs == nil) {
				if stalledSince(ours, theirsOpenedAt) {
					return errStalled
				}
				return fmt.Errorf("step %d: %s\n%v", step, desc, log)
			}
			if errOurs == nil {
				outstanding = append(outstanding, ticketPair{tk, done})
			}
		case r < 90:
			k := rng.IntN(len(outstanding))
			p := outstanding[k]
			outstanding = append(outstanding[:k], outstanding[k+1:]...)
			var o resilience.Outcome
			var err error
			switch x := rng.IntN(10); {
			case x < 5:
				o, err = resilience.Failure, errFailure
			case x < 8:
				o, err = resilience.Success, nil
			default:
				o, err = resilience.Ignore, errIgnored
			}
			desc = fmt.Sprintf("done %s (probe %v)", o, p.ours.Probe())
			p.ours.Done(o)
			callStart = time.Now()
			p.theirs(err)
		default:
			wait := diffCoolDown + 5*time.Millisecond
			desc = "wait " + wait.String()
			time.Sleep(wait)
			clock.Advance(wait)
		}
		log = append(log, desc)
		s := ours.Snapshot().State
		theirsState := theirs.State()
		if stalledSince(ours, theirsOpenedAt) {
			return errStalled
		}
		if want := map[gobreaker.State]resilience.State{
			gobreaker.StateClosed: resilience.StateClosed, gobreaker.StateOpen: resilience.StateOpen,
			gobreaker.StateHalfOpen: resilience.StateHalfOpen,
		}[theirsState]; s != want {
			return fmt.Errorf("step %d (%s): ours %s, gobreaker %s\n%v", step, desc, s, theirsState, log)
		}
	}
	return nil
}

// stalledSince reports whether ours is still open (on the test clock) while
// a whole real cool-down has passed since gobreaker opened: gobreaker may
// then have moved to half-open on its own, and the states cannot be compared.
func stalledSince(ours *resilience.Breaker, theirsOpenedAt time.Time) bool {
	return ours.Snapshot().State == resilience.StateOpen && time.Since(theirsOpenedAt) >= diffCoolDown
}
