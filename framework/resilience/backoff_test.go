package resilience

import (
	"math"
	"testing"
	"time"
)

func TestBackoffFullJitterBounds(t *testing.T) {
	t.Parallel()
	b := Backoff{Base: 100 * time.Millisecond, Max: time.Second}
	for _, tc := range []struct {
		attempt int
		ceiling time.Duration
	}{
		{0, 100 * time.Millisecond}, {1, 100 * time.Millisecond}, {2, 200 * time.Millisecond},
		{3, 400 * time.Millisecond}, {4, 800 * time.Millisecond}, {5, time.Second}, {80, time.Second},
	} {
		if got := b.Ceiling(tc.attempt); got != tc.ceiling {
			t.Fatalf("Ceiling(%d) = %v, want %v", tc.attempt, got, tc.ceiling)
		}
		const samples = 10000
		var lowHalf int
		var sum time.Duration
		for range samples {
			d := b.Delay(tc.attempt)
			if d < 0 || d > tc.ceiling {
				t.Fatalf("Delay(%d) = %v, outside [0, %v]", tc.attempt, d, tc.ceiling)
			}
			if d < tc.ceiling/2 {
				lowHalf++
			}
			sum += d
		}
		// Uniform: about half below the midpoint, mean near ceiling/2. The
		// bounds are > 10 standard deviations wide, so this never flakes.
		if lowHalf < 4500 || lowHalf > 5500 {
			t.Fatalf("attempt %d: %d of %d samples below the midpoint, want about half", tc.attempt, lowHalf, samples)
		}
		if mean := sum / samples; mean < tc.ceiling*45/100 || mean > tc.ceiling*55/100 {
			t.Fatalf("attempt %d: mean %v, want about %v", tc.attempt, mean, tc.ceiling/2)
		}
	}
}

func TestBackoffDefaultsAndOverflow(t *testing.T) {
	t.Parallel()
	var b Backoff
	if b.Ceiling(1) != DefaultBackoffBase || b.Ceiling(1000) != DefaultBackoffMax {
		t.Fatalf("zero Backoff ceilings = %v, %v", b.Ceiling(1), b.Ceiling(1000))
	}
	huge := Backoff{Base: time.Hour, Max: time.Duration(1<<63 - 1)}
	for n := 1; n < 100; n++ {
		if c := huge.Ceiling(n); c < time.Hour {
			t.Fatalf("Ceiling(%d) overflowed to %v", n, c)
		}
		if d := huge.Delay(n); d < 0 {
			t.Fatalf("Delay(%d) = %v", n, d)
		}
	}
}

// Proportional jitter: within ±20 % of the nominal delay, 80–120 ms then
// 160–240 ms with a 100 ms base, and spread over the whole interval.
func TestBackoffProportionalJitterBounds(t *testing.T) {
	t.Parallel()
	b := Backoff{Base: 100 * time.Millisecond, Max: time.Second, Jitter: JitterProportional}
	for _, tc := range []struct {
		attempt int
		lo, hi  time.Duration
	}{
		{1, 80 * time.Millisecond, 120 * time.Millisecond},
		{2, 160 * time.Millisecond, 240 * time.Millisecond},
		{3, 320 * time.Millisecond, 480 * time.Millisecond},
		{5, 800 * time.Millisecond, 1200 * time.Millisecond}, // the nominal is capped, not the jitter
	} {
		const samples = 10000
		var lowHalf int
		least, most := tc.hi, tc.lo
		for range samples {
			d := b.Delay(tc.attempt)
			if d < tc.lo || d > tc.hi {
				t.Fatalf("Delay(%d) = %v, outside [%v, %v]", tc.attempt, d, tc.lo, tc.hi)
			}
			least, most = min(least, d), max(most, d)
			if d < (tc.lo+tc.hi)/2 {
				lowHalf++
			}
		}
		if lowHalf < 4500 || lowHalf > 5500 {
			t.Fatalf("attempt %d: %d of %d samples below the midpoint, want about half", tc.attempt, lowHalf, samples)
		}
		// Ten thousand uniform draws reach within 1 % of both ends.
		if width := tc.hi - tc.lo; least > tc.lo+width/100 || most < tc.hi-width/100 {
			t.Fatalf("attempt %d: samples span [%v, %v], want most of [%v, %v]", tc.attempt, least, most, tc.lo, tc.hi)
		}
	}
	huge := Backoff{Base: time.Hour, Max: time.Duration(math.MaxInt64), Jitter: JitterProportional}
	for n := 1; n < 100; n++ {
		if d := huge.Delay(n); d < 0 {
			t.Fatalf("proportional Delay(%d) = %v", n, d)
		}
	}
	if JitterFull.String() != "full" || JitterProportional.String() != "proportional" {
		t.Error("Jitter names")
	}
}
