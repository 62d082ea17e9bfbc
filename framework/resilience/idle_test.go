package resilience

import (
	"testing"
	"time"
)

func TestIdleWatchFiresAfterTheGapSinceTheLastTouch(t *testing.T) {
	t.Parallel()
	clock := NewTestClock(time.Unix(1000, 0))
	fired := make(chan struct{})
	w := WatchIdle(clock, 10*time.Second, func() { close(fired) })
	defer w.Stop()

	clock.Advance(6 * time.Second)
	w.Touch() // the gap now ends at +16s
	clock.Advance(4 * time.Second)
	// The first timer fired at +10s; the watch waits again, for the 6 s
	// left since the Touch. It has not fired.
	clock.BlockUntil(1)
	select {
	case <-fired:
		t.Fatal("fired 4 s after a Touch, with a gap of 10 s")
	default:
	}
	clock.Advance(6 * time.Second)
	<-fired
}

func TestIdleWatchStoppedNeverFires(t *testing.T) {
	t.Parallel()
	clock := NewTestClock(time.Unix(1000, 0))
	w := WatchIdle(clock, time.Second, func() { t.Error("fired after Stop") })
	w.Stop()
	w.Stop() // twice is safe
	clock.Advance(time.Hour)
	(*IdleWatch)(nil).Stop()
}
