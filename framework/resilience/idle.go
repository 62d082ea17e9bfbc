package resilience

import (
	"sync"
	"sync/atomic"
	"time"
)

// IdleWatch calls its function once when gap passes on its clock without a
// Touch: the read gap of a streamed response, the idle timeout of a
// tunnel. Touch only records the time, so nothing resets a timer per read
// or write; when the timer fires, the watch waits again for what is left of
// the gap since the last Touch.
type IdleWatch struct {
	gap    time.Duration
	clock  Clock
	onIdle func()
	last   atomic.Int64 // the clock's UnixNano of the last Touch
	done   chan struct{}
	stop   sync.Once
	exited chan struct{}
}

// WatchIdle starts a watch that calls onIdle, on a goroutine of its own,
// after gap on clock without a Touch, counted from now. Its first timer is
// made before WatchIdle returns, so a test clock moved after it fires it.
// Stop ends the watch.
func WatchIdle(clock Clock, gap time.Duration, onIdle func()) *IdleWatch {
	w := &IdleWatch{gap: gap, clock: clock, onIdle: onIdle, done: make(chan struct{}), exited: make(chan struct{})}
	w.Touch()
	t := clock.NewTimer(gap)
	go w.run(t)
	return w
}

// Touch records activity: the gap starts again from now.
func (w *IdleWatch) Touch() { w.last.Store(w.clock.Now().UnixNano()) }

func (w *IdleWatch) run(t Timer) {
	defer close(w.exited)
	for {
		select {
		case <-w.done:
			t.Stop()
			return
		case <-t.C():
		}
		idle := w.clock.Now().Sub(time.Unix(0, w.last.Load()))
		if idle >= w.gap {
			w.onIdle()
			return
		}
		t = w.clock.NewTimer(w.gap - idle)
	}
}

// Stop ends the watch and waits for its goroutine, and so for an onIdle
// that is running. Safe to call twice and on a nil watch; not from onIdle.
func (w *IdleWatch) Stop() {
	if w == nil {
		return
	}
	w.stop.Do(func() { close(w.done) })
	<-w.exited
}
