package resilience

import (
	"fmt"
	"strconv"
	"testing"
	"time"
)

func FuzzParseRetryAfter(f *testing.F) {
	for _, s := range []string{
		"0", "120", " 5 ", "-1", "1.5", "", "soon", "99999999999999999999",
		"Mon, 30 Nov 2026 01:00:05 GMT", "Monday, 30-Nov-26 01:00:20 GMT", "Mon Nov 30 01:00:10 2026",
		"Thu, 01 Jan 1970 00:00:00 GMT", "Mon, 30 Nov 2026 01:00:05 PST",
	} {
		f.Add(s, int64(30*time.Second))
	}
	now := time.Date(2026, 11, 30, 1, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, v string, maxWait int64) {
		d, ok, tooLong := ParseRetryAfter(v, now, time.Duration(maxWait))
		if !ok && (d != 0 || tooLong) {
			t.Fatalf("not ok but d=%v tooLong=%v", d, tooLong)
		}
		if d < 0 {
			t.Fatalf("negative wait %v", d)
		}
		if tooLong != (ok && maxWait > 0 && d > time.Duration(maxWait)) {
			t.Fatalf("tooLong=%v for d=%v max=%v", tooLong, d, time.Duration(maxWait))
		}
		// A plain small number must parse to exactly that many seconds.
		if n, err := strconv.ParseUint(v, 10, 32); err == nil && (!ok || d != time.Duration(n)*time.Second) {
			t.Fatalf("%q parsed as (%v, %v)", v, d, ok)
		}
		// A date written by the canonical layout must parse back exactly.
		if ok && d > 0 && d < 100*365*24*time.Hour && v != "" && (v[0] < '0' || v[0] > '9') {
			again := now.Add(d).UTC().Format(httpDateLayouts[0])
			if d2, ok2, _ := ParseRetryAfter(again, now, 0); !ok2 || d2 != d.Truncate(time.Second) {
				t.Fatalf("%q → %v, canonical %q → %v", v, d, again, d2)
			}
		}
	})
}

// FuzzBreaker drives a breaker with a random program of calls, outcomes
// (reported in any order, possibly long after) and clock moves, and checks
// its invariants after every step:
//   - never two probes at once;
//   - an open breaker lets no call through before its cool-down ends;
//   - hook changes chain (each From is the previous To), and Opens counts
//     the changes to open;
//   - counts are consistent with the state (closed: fewer consecutive
//     failures than the threshold, window failures ≤ window calls).
func FuzzBreaker(f *testing.F) {
	f.Add([]byte{0, 0, 0, 1, 1, 1, 1, 1, 2, 200, 0, 1, 1})
	f.Add([]byte{0, 0, 0, 0, 0, 0, 3, 3, 3, 3, 2, 255, 2, 255, 0, 0, 1, 0, 1, 2})
	f.Add([]byte("closed->open->half_open->closed and back again, with stale tickets"))
	f.Fuzz(func(t *testing.T, program []byte) {
		const coolDown = 5 * time.Second
		clock := NewTestClock(epoch)
		var changes []StateChange
		br := NewBreaker(BreakerOpts{
			Name: "fuzz", Failures: 3, FailureRate: 0.5, MinimumCalls: 4, Window: 10 * time.Second,
			CoolDown: coolDown, Clock: clock,
			OnStateChange: func(c StateChange) { changes = append(changes, c) },
		})
		var outstanding []Ticket
		probes := 0
		for i := 0; i < len(program); i++ {
			op := program[i] % 4
			arg := 0
			if i+1 < len(program) {
				arg = int(program[i+1])
			}
			switch op {
			case 0: // allow
				before := br.Snapshot()
				tk, err := br.Allow()
				if err == nil {
					if before.State == StateOpen && before.RetryAfter > 0 {
						t.Fatalf("step %d: allowed while open with %v left", i, before.RetryAfter)
					}
					if tk.Probe() {
						probes++
						if probes > 1 {
							t.Fatalf("step %d: two probes at once", i)
						}
					}
					outstanding = append(outstanding, tk)
				}
			case 1, 3: // done: outcome and which ticket from the next byte
				i++
				if len(outstanding) == 0 {
					continue
				}
				k := arg % len(outstanding)
				tk := outstanding[k]
				outstanding = append(outstanding[:k], outstanding[k+1:]...)
				if tk.Probe() {
					probes--
				}
				tk.Done(Outcome(arg / 64 % 3))
			case 2: // advance the clock by arg × 100 ms
				i++
				clock.Advance(time.Duration(arg) * 100 * time.Millisecond)
			}
			s := br.Snapshot()
			if s.State == StateClosed && (s.Consecutive >= 3 || s.WindowFailures > s.WindowCalls) {
				t.Fatalf("step %d: inconsistent closed snapshot %+v", i, s)
			}
			if s.State == StateOpen && (s.RetryAfter <= 0 || s.RetryAfter > coolDown) {
				t.Fatalf("step %d: open with RetryAfter %v", i, s.RetryAfter)
			}
			var opens uint64
			prev := StateClosed
			for _, c := range changes {
				if c.From != prev || c.From == c.To {
					t.Fatalf("step %d: change chain broken: %s", i, fmt.Sprint(changes))
				}
				prev = c.To
				if c.To == StateOpen {
					opens++
				}
			}
			if prev != s.State || opens != s.Opens {
				t.Fatalf("step %d: hook says %s/%d opens, snapshot %+v", i, prev, opens, s)
			}
		}
	})
}
