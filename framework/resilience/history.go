package resilience

import "time"

// A breaker remembers its recent transitions so that an operator page can
// draw when it opened, probed and closed. They are recorded where the
// transition happens, under the lock the transition holds already: a breaker
// that never changes state keeps no history and allocates nothing for it.

// HistorySpan is how far back [Breaker.Transitions] looks: 15 minutes, the
// span of an incident an operator reads on one screen.
const HistorySpan = 15 * time.Minute

// historyMax bounds the transitions a breaker keeps: 128 holds a breaker that
// flaps open and half-open at the default 15 s cool-down (120 transitions in
// HistorySpan) with room to spare, in at most 2 KiB.
const historyMax = 128

// Transition is one state change of a breaker.
type Transition struct {
	At       time.Time
	From, To State
	// Hang is set on a change made by a [Hang] (see [StateChange]).
	Hang bool
}

// transition is a Transition as the breaker stores it: 16 bytes.
type transition struct {
	at       time.Duration // since the breaker's origin
	from, to State
	hang     bool
}

// trip is the last change out of closed state as the breaker keeps it, with
// the counts that made it: 24 bytes, in the breaker itself.
type trip struct {
	at                       time.Duration // since the breaker's origin
	to                       State         // closed: the breaker never left closed
	hang                     bool
	consecutive              int32
	windowCalls, windowFails int32
}

// recordLocked appends c to the history, dropping the oldest entry when full,
// and keeps the counts of a change out of closed state.
func (b *Breaker) recordLocked(c StateChange) {
	if c.From == StateClosed {
		b.trip = trip{
			at: c.At.Sub(b.origin), to: c.To, hang: c.Hang,
			consecutive: int32(c.Consecutive), windowCalls: int32(c.WindowCalls), windowFails: int32(c.WindowFailures),
		}
	}
	if len(b.history) == historyMax {
		b.history = append(b.history[:0], b.history[1:]...)
	}
	b.history = append(b.history, transition{at: c.At.Sub(b.origin), from: c.From, to: c.To, hang: c.Hang})
}

// Transitions returns the breaker's transitions of the last [HistorySpan],
// oldest first (at most the last 128), and the state it was in at the start
// of that span. It reads what the transitions recorded and computes nothing
// else.
func (b *Breaker) Transitions() (initial State, ts []Transition) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.transitionsLocked(b.now())
}

func (b *Breaker) transitionsLocked(now time.Duration) (State, []Transition) {
	from := now - HistorySpan
	initial := b.state
	first := len(b.history)
	for i := len(b.history) - 1; i >= 0 && b.history[i].at > from; i-- {
		first = i
	}
	if first == len(b.history) {
		return initial, nil
	}
	initial = b.history[first].from
	ts := make([]Transition, 0, len(b.history)-first)
	for _, t := range b.history[first:] {
		ts = append(ts, Transition{At: b.origin.Add(t.at).Round(0), From: t.from, To: t.to, Hang: t.hang})
	}
	return initial, ts
}
