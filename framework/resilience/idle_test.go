package resilience

import (
	"sync/atomic"
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
	var fired atomic.Bool
	w := WatchIdle(clock, time.Second, func() { fired.Store(true) })
	if n := clock.Waiters(); n != 1 {
		t.Fatalf("timers pending after WatchIdle = %d, want 1 (made before it returns)", n)
	}
	w.Stop()
	w.Stop() // twice is safe
	// Stop returned after the watch's goroutine did: its timer is stopped,
	// and nothing can fire it.
	if n := clock.Waiters(); n != 0 {
		t.Fatalf("timers pending after Stop = %d, want 0", n)
	}
	clock.Advance(time.Hour)
	if fired.Load() {
		t.Fatal("fired after Stop")
	}
	(*IdleWatch)(nil).Stop()
}
