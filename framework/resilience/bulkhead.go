package resilience

import (
	"context"
	"fmt"
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
// slow dependency cannot hold every goroutine of the service. It is safe for
// concurrent use. A nil *Bulkhead admits every call.
type Bulkhead struct {
	name  string
	max   int
	wait  time.Duration
	clock Clock
	slots chan *slot // free slots; a call holds one while in flight
	full  *BulkheadFullError
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
		slots: make(chan *slot, o.MaxConcurrent),
		full:  &BulkheadFullError{Name: o.Name, MaxConcurrent: o.MaxConcurrent, Wait: o.Wait},
	}
	for range o.MaxConcurrent {
		b.slots <- &slot{b: b}
	}
	return b
}

// Acquire takes a slot, waiting at most the bulkhead's Wait (on its Clock)
// for one to free up. It returns a *[BulkheadFullError] when none did, or
// the context's error, wrapped, when ctx ended first. Taking a free slot
// allocates nothing.
func (b *Bulkhead) Acquire(ctx context.Context) (Permit, error) {
	if b == nil {
		return Permit{}, nil
	}
	select {
	case s := <-b.slots:
		return Permit{s: s, gen: s.gen.Load()}, nil
	default:
	}
	if err := ctx.Err(); err != nil {
		return Permit{}, fmt.Errorf("waiting for a bulkhead slot for '%s': %w", b.name, err)
	}
	t := b.clock.NewTimer(b.wait)
	defer t.Stop()
	select {
	case s := <-b.slots:
		return Permit{s: s, gen: s.gen.Load()}, nil
	case <-t.C():
		// A slot freed at the same instant still counts.
		select {
		case s := <-b.slots:
			return Permit{s: s, gen: s.gen.Load()}, nil
		default:
			return Permit{}, b.full
		}
	case <-ctx.Done():
		return Permit{}, fmt.Errorf("waiting for a bulkhead slot for '%s': %w", b.name, ctx.Err())
	}
}

// Release gives the slot back. Only the first Release of a Permit counts.
func (p Permit) Release() {
	s := p.s
	if s == nil {
		return
	}
	if s.gen.CompareAndSwap(p.gen, p.gen+1) {
		s.b.slots <- s // never blocks: the slot came from this channel
	}
}

// InFlight returns how many slots are taken.
func (b *Bulkhead) InFlight() int { return b.max - len(b.slots) }

// MaxConcurrent returns the bulkhead's limit.
func (b *Bulkhead) MaxConcurrent() int { return b.max }

// Name returns the bulkhead's name.
func (b *Bulkhead) Name() string { return b.name }
