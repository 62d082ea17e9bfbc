package resilience

import (
	"context"
	"slices"
	"sync"
	"time"
)

// TestClock is a [Clock] that only moves when a test moves it. It records the
// duration of every Sleep, so a test can assert "the client waited between 0
// and 100 ms" without waiting, and [TestClock.BlockUntil] lets a test wait
// until a goroutine is parked on the clock before calling [TestClock.Advance].
//
// In auto-advance mode ([TestClock.SetAutoAdvance]) Sleep records its
// duration, moves the clock forward by it (firing any timers that fall due)
// and returns at once: convenient for retry loops that should run to the end
// without a second goroutine.
//
// A TestClock is safe for concurrent use.
type TestClock struct {
	mu      sync.Mutex
	now     time.Time
	auto    bool
	sleeps  []time.Duration
	pending []*testTimer
	changed chan struct{} // closed and replaced whenever pending changes
}

// NewTestClock returns a TestClock whose Now is start.
func NewTestClock(start time.Time) *TestClock {
	return &TestClock{now: start, changed: make(chan struct{})}
}

// Now returns the clock's current time.
func (c *TestClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// SetAutoAdvance turns auto-advance mode on or off. Defaults to off.
func (c *TestClock) SetAutoAdvance(on bool) {
	c.mu.Lock()
	c.auto = on
	c.mu.Unlock()
}

// Sleep records d and waits until the clock has been advanced by d, or ctx
// ends. In auto-advance mode it advances the clock by d itself and returns.
func (c *TestClock) Sleep(ctx context.Context, d time.Duration) error {
	c.mu.Lock()
	c.sleeps = append(c.sleeps, d)
	auto := c.auto
	c.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return err
	}
	if d <= 0 {
		return nil
	}
	if auto {
		c.Advance(d)
		return nil
	}
	t := c.NewTimer(d)
	select {
	case <-t.C():
		return nil
	case <-ctx.Done():
		t.Stop()
		return ctx.Err()
	}
}

// NewTimer returns a Timer that fires when the clock reaches Now()+d. A d of
// zero or less fires at once.
func (c *TestClock) NewTimer(d time.Duration) Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &testTimer{clock: c, at: c.now.Add(d), ch: make(chan time.Time, 1)}
	if d <= 0 {
		t.done = true
		t.ch <- c.now
		return t
	}
	c.pending = append(c.pending, t)
	c.notifyLocked()
	return t
}

// Advance moves the clock forward by d and fires, in order of their due
// time, every timer (and so every sleeper) that is due.
func (c *TestClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	var due []*testTimer
	kept := c.pending[:0]
	for _, t := range c.pending {
		if !t.at.After(c.now) {
			t.done = true
			due = append(due, t)
		} else {
			kept = append(kept, t)
		}
	}
	clear(c.pending[len(kept):])
	c.pending = kept
	if len(due) > 0 {
		c.notifyLocked()
	}
	c.mu.Unlock()
	slices.SortStableFunc(due, func(a, b *testTimer) int { return a.at.Compare(b.at) })
	for _, t := range due {
		t.ch <- t.at // buffered 1 and sent once: never blocks
	}
}

// Waiters returns how many timers and sleepers are waiting on the clock.
func (c *TestClock) Waiters() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.pending)
}

// BlockUntil waits until at least n timers or sleepers are waiting on the
// clock. Use it before Advance so the advance is not lost on a goroutine that
// has not started waiting yet.
func (c *TestClock) BlockUntil(n int) {
	_ = c.BlockUntilContext(context.Background(), n)
}

// BlockUntilContext is [TestClock.BlockUntil] bounded by ctx; it returns
// ctx.Err() if ctx ends first.
func (c *TestClock) BlockUntilContext(ctx context.Context, n int) error {
	for {
		c.mu.Lock()
		if len(c.pending) >= n {
			c.mu.Unlock()
			return nil
		}
		ch := c.changed
		c.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Sleeps returns a copy of every duration passed to Sleep, in call order.
func (c *TestClock) Sleeps() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.sleeps)
}

func (c *TestClock) notifyLocked() {
	close(c.changed)
	c.changed = make(chan struct{})
}

type testTimer struct {
	clock *TestClock
	at    time.Time
	ch    chan time.Time
	done  bool // fired or stopped; guarded by clock.mu
}

func (t *testTimer) C() <-chan time.Time { return t.ch }

func (t *testTimer) Stop() bool {
	c := t.clock
	c.mu.Lock()
	defer c.mu.Unlock()
	if t.done {
		return false
	}
	t.done = true
	if i := slices.Index(c.pending, t); i >= 0 {
		c.pending = slices.Delete(c.pending, i, i+1)
		c.notifyLocked()
	}
	return true
}

var _ Clock = (*TestClock)(nil)
