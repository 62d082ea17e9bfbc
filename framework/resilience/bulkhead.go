package resilience

import (
	"cmp"
	"context"
	"fmt"
	"math/bits"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Bulkhead defaults (docs/design.md, "Resilience rules").
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
// slow dependency cannot hold every goroutine of the service. Calls that
// have to wait are served in arrival order, and a new call does not overtake
// waiting ones. It is safe for concurrent use. A nil *Bulkhead admits every
// call.
type Bulkhead struct {
	name  string
	max   int
	wait  time.Duration
	clock Clock
	full  *BulkheadFullError
	slots []slot

	// free has bit i%64 of word i/64 set while slot i is free: taking and
	// giving back a slot is one atomic operation on it, without a lock.
	free     []atomic.Uint64
	waiting  atomic.Int64  // len(waiters), readable without mu
	rejected atomic.Uint64 // calls rejected after waiting Wait

	mu      sync.Mutex
	waiters []chan *slot // FIFO of waiting calls; each channel has room for one slot
}

// slot is one unit of capacity. Its generation changes on every release, so
// a Permit can release the slot it was given at most once.
type slot struct {
	b   *Bulkhead
	idx int
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
	o.Name = cmp.Or(o.Name, "dependency")
	o.MaxConcurrent = cmp.Or(o.MaxConcurrent, DefaultBulkheadMaxConcurrent)
	o.Wait = cmp.Or(o.Wait, DefaultBulkheadWait)
	clock, reg, owner := unwrapClock(o.Clock)
	b := &Bulkhead{
		name: o.Name, max: o.MaxConcurrent, wait: o.Wait, clock: clock,
		full:  &BulkheadFullError{Name: o.Name, MaxConcurrent: o.MaxConcurrent, Wait: o.Wait},
		slots: make([]slot, o.MaxConcurrent),
		free:  make([]atomic.Uint64, (o.MaxConcurrent+63)/64),
	}
	for i := range b.slots {
		b.slots[i].b, b.slots[i].idx = b, i
		b.free[i/64].Or(1 << (i % 64))
	}
	reg.addBulkhead(owner, b)
	return b
}

func permitFor(s *slot) Permit { return Permit{s: s, gen: s.gen.Load()} }

// claim takes a free slot, or returns nil when there is none.
func (b *Bulkhead) claim() *slot {
	for w := range b.free {
		word := &b.free[w]
		for {
			v := word.Load()
			if v == 0 {
				break
			}
			bit := bits.TrailingZeros64(v)
			if word.CompareAndSwap(v, v&^(1<<bit)) {
				return &b.slots[w*64+bit]
			}
		}
	}
	return nil
}

// Acquire takes a slot, waiting at most the bulkhead's Wait (on its Clock)
// for one to free up. It returns a *[BulkheadFullError] when none did, or
// the context's error, wrapped, when ctx ended first. Taking a free slot
// allocates nothing.
func (b *Bulkhead) Acquire(ctx context.Context) (Permit, error) {
	if p, ok := b.tryAcquire(); ok {
		return p, nil
	}
	return b.acquireSlow(ctx)
}

// tryAcquire takes a free slot without waiting. It reports false when none
// is free or calls are already waiting (Acquire then waits its turn).
func (b *Bulkhead) tryAcquire() (Permit, bool) {
	if b == nil {
		return Permit{}, true
	}
	if b.waiting.Load() == 0 {
		if s := b.claim(); s != nil {
			return permitFor(s), true
		}
	}
	return Permit{}, false
}

func (b *Bulkhead) acquireSlow(ctx context.Context) (Permit, error) {
	if err := ctx.Err(); err != nil {
		return Permit{}, fmt.Errorf("waiting for a bulkhead slot for '%s': %w", b.name, err)
	}
	w := make(chan *slot, 1)
	b.mu.Lock()
	b.waiters = append(b.waiters, w)
	b.waiting.Add(1)
	b.mu.Unlock()
	// A slot given back before we were counted as waiting went to the free
	// set, not to us: look again now that we are in the queue.
	b.serveWaiters()

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
		b.waiting.Add(-1)
		b.mu.Unlock()
		if err == error(b.full) {
			b.rejected.Add(1)
		}
		return Permit{}, err
	}
	b.mu.Unlock()
	// We were handed a slot (under mu, so it is in w) as we gave up: it
	// freed at the same instant, so take it rather than lose it.
	return permitFor(<-w), nil
}

// serveWaiters hands free slots to waiting calls, oldest first.
func (b *Bulkhead) serveWaiters() {
	b.mu.Lock()
	defer b.mu.Unlock()
	for len(b.waiters) > 0 {
		s := b.claim()
		if s == nil {
			return
		}
		w := b.waiters[0]
		b.waiters = slices.Delete(b.waiters, 0, 1)
		b.waiting.Add(-1)
		w <- s // room for one, and each waiter is handed at most one slot
	}
}

// Release gives the slot back, to the longest-waiting call if there is one.
// Only the first Release of a Permit counts.
func (p Permit) Release() {
	s := p.s
	if s == nil || !s.gen.CompareAndSwap(p.gen, p.gen+1) {
		return
	}
	b := s.b
	b.free[s.idx/64].Or(1 << (s.idx % 64))
	// Checked after the slot is back in the free set, while a new waiter
	// registers before it looks at the free set: one of the two sees the
	// other, so no waiter sleeps next to a free slot.
	if b.waiting.Load() > 0 {
		b.serveWaiters()
	}
}

// InFlight returns how many slots are taken.
func (b *Bulkhead) InFlight() int {
	n := b.max
	for i := range b.free {
		n -= bits.OnesCount64(b.free[i].Load())
	}
	return n
}

// MaxConcurrent returns the bulkhead's limit.
func (b *Bulkhead) MaxConcurrent() int { return b.max }

// Name returns the bulkhead's name.
func (b *Bulkhead) Name() string { return b.name }

// Waiting returns how many calls are waiting for a slot.
func (b *Bulkhead) Waiting() int { return int(b.waiting.Load()) }

// BulkheadSnapshot is a bulkhead's occupancy at one moment.
type BulkheadSnapshot struct {
	Name          string
	InFlight      int
	Waiting       int
	MaxConcurrent int
	// Rejected counts the calls that waited Wait for a slot in vain, since
	// the bulkhead was made.
	Rejected uint64
}

// Snapshot returns the bulkhead's occupancy. It reads counters the bulkhead
// keeps anyway, without its lock.
func (b *Bulkhead) Snapshot() BulkheadSnapshot {
	return BulkheadSnapshot{Name: b.name, InFlight: b.InFlight(), Waiting: b.Waiting(), MaxConcurrent: b.max, Rejected: b.rejected.Load()}
}
