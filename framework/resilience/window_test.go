package resilience

import (
	"math/rand/v2"
	"testing"
	"time"
)

// TestWindowMatchesExactCount checks the bucketed window against an exact
// list of timestamped events: the bucketed sum must include every event of
// the last span-width and none older than span.
func TestWindowMatchesExactCount(t *testing.T) {
	t.Parallel()
	const span, n = 30 * time.Second, 30
	width := span / n
	rng := rand.New(rand.NewPCG(1, 2))
	w := newWindow(span, n)
	type event struct{ at time.Duration }
	var events []event
	now := time.Duration(0)
	for i := range 20000 {
		now += time.Duration(rng.Int64N(int64(3 * time.Second)))
		if rng.IntN(50) == 0 {
			now += time.Duration(rng.Int64N(int64(2 * time.Minute))) // long gaps too
		}
		w.add(now, 1, int64(i%2))
		events = append(events, event{now})
		var surely, maybe int64
		for _, e := range events {
			age := now - e.at
			if age < span-width {
				surely++
			}
			if age < span+width {
				maybe++
			}
		}
		if w.a < surely || w.a > maybe {
			t.Fatalf("at %v: window holds %d, exact bounds [%d, %d]", now, w.a, surely, maybe)
		}
		if len(events) > 200 {
			events = events[100:]
		}
	}
}
