package resilience

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Bulkhead defaults, from DESIGN.md §3.
const (
	DefaultBulkheadMaxConcurrent = 50
	DefaultBulkheadWait          = 500 * time.Millisecond
)

// BulkheadOpts configures a [Bulkhead]. Zero fields take their defaults.
type BulkheadOpts struct {
	// Name names the dependency in errors. Defaults to "dependency".
	Name string
	// MaxConcurrent is how many calls may be in flight at once.
	// Defaults to 50.
	MaxConcurrent int
	// Wait is the longest a call waits for a free slot before it is
	// rejected with a *BulkheadFullError. Defaults to 500ms.
	Wait time.Duration
	// Clock is the time source of the wait. Defaults to RealClock().
	Clock Clock
}

// Bulkhead caps the calls in flight to one dependency from one process, so a
// slow dependency cannot hold every goroutine of the service. Waiting calls
// are served in arrival order. It is safe for concurrent use. A nil
// *Bulkhead admits every call.
type Bulkhead struct {
	name  string
	max   int
	wait  time.Duration
	clock Clock
	full  *BulkheadFullError

	mu      sync.Mutex
	free    []*slot      // free slots, used as a stack
	waiters []chan *slot // FIFO of waiting calls; each channel has room for one slot
}

// slot is one unit of capacity. Its generation changes on every release, so
// a Permit can release the slot it was given at most once.
type slot struct {
	b   *Bulkhead
	gen atomic.Uint64
}

// Permit is one call's place in a [Bulkhead]. Release it when the call ends.
// Releasing twice (or releasing a copy of a released Permit) does nothing:
// the slot's generation moved on with the first release. The zero Permit's
// Release does nothing.
type Permit struct {
	s   *slot
	gen uint64
}

// NewBulkhead returns a Bulkhead. It panics if an option is negative.
func NewBulkhead(o BulkheadOpts) *Bulkhead {
	if o.MaxConcurrent < 0 || o.Wait < 0 {
		panic(fmt.Sprintf("resilience: bulkhead %q: negative option in %+v", o.Name, o))
	}
	if o.Name == "" {
		o.Name = "dependency"
	}
	if o.MaxConcurrent == 0 {
		o.MaxConcurrent = DefaultBulkheadMaxConcurrent
	}
	if o.Wait == 0 {
		o.Wait = DefaultBulkheadWait
	}
	b := &Bulkhead{
		name: o.Name, max: o.MaxConcurrent, wait: o.Wait, clock: clockOrReal(o.Clock),
		full: &BulkheadFullError{Name: o.Name, MaxConcurrent: o.MaxConcurrent, Wait: o.Wait},
		free: make([]*slot, o.MaxConcurrent),
	}
	for i := range b.free {
		b.free[i] = &slot{b: b}
	}
	return b
}

func permitFor(s *slot) Permit { return Permit{s: s, gen: s.gen.Load()} }

// Acquire takes a slot, waiting at most the bulkhead's Wait (on its Clock)
// for one to free up. It returns a *[BulkheadFullError] when none did, or
// the context's error, wrapped, when ctx ended first. Taking a free slot
// allocates nothing.
func (b *Bulkhead) Acquire(ctx context.Context) (Permit, error) {
	if b == nil {
		return Permit{}, nil
	}
	b.mu.Lock()
	if n := len(b.free); n > 0 {
		s := b.free[n-1]
		b.free = b.free[:n-1]
		b.mu.Unlock()
		return permitFor(s), nil
	}
	if err := ctx.Err(); err != nil {
		b.mu.Unlock()
		return Permit{}, fmt.Errorf("waiting for a bulkhead slot for '%s': %w", b.name, err)
	}
	w := make(chan *slot, 1)
	b.waiters = append(b.waiters, w)
	b.mu.Unlock()

	t := b.clock.NewTimer(b.wait)
	defer t.Stop()
	var err error
	select {
	case s := <-w:
		return permitFor(s), nil
	case <-t.C():
		err = b.full
	case <-ctx.Done():
		err = fmt.Errorf("waiting for a bulkhead slot for '%s': %w", b.name, ctx.Err())
	}
	b.mu.Lock()
	if i := slices.Index(b.waiters, w); i >= 0 {
		b.waiters = slices.Delete(b.waiters, i, i+1)
		b.mu.Unlock()
		return Permit{}, err
	}
	b.mu.Unlock()
	// A releaser handed us a slot as we gave up: it freed at the same
	// instant, so take it rather than lose it.
	return permitFor(<-w), nil
}

// Release gives the slot back, to the longest-waiting call if there is one.
// Only the first Release of a Permit counts.
func (p Permit) Release() {
	s := p.s
	if s == nil || !s.gen.CompareAndSwap(p.gen, p.gen+1) {
		return
	}
	b := s.b
	b.mu.Lock()
	if len(b.waiters) > 0 {
		w := b.waiters[0]
		b.waiters = slices.Delete(b.waiters, 0, 1)
		b.mu.Unlock()
		w <- s // room for one, and each waiter is handed at most one slot
		return
	}
	b.free = append(b.free, s)
	b.mu.Unlock()
}

// InFlight returns how many slots are taken.
func (b *Bulkhead) InFlight() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.max - len(b.free)
}

// MaxConcurrent returns the bulkhead's limit.
func (b *Bulkhead) MaxConcurrent() int { return b.max }

// Name returns the bulkhead's name.
func (b *Bulkhead) Name() string { return b.name }
