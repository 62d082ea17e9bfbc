package resilience

import (
	"slices"
	"sync"
	"sync/atomic"
	"time"
	"weak"
)

// Registry is a read-only index of the breakers, retry budgets and bulkheads
// of one service, for an operator page: [Registry.Snapshot] reads them all,
// grouped by owner (the plugin) and dependency name, from the same objects
// /ready and the metrics read.
//
// Objects join a Registry through the [Clock] they are built on: a plugin
// builds every breaker, budget and bulkhead on the clock it was handed, and
// the clock [Registry.Clock] returns registers, under its owner's name, each
// one made with it. No plugin hands its objects over one by one, and an
// object made later (a per-route breaker) joins too.
//
// A Registry holds its objects weakly: one its plugin drops (an evicted
// per-route breaker) is collected as if it had never joined. It does nothing
// between snapshots: no goroutine, no timer; what a snapshot shows was
// recorded by the objects themselves as they worked (transitions, retry
// decisions). A nil *Registry registers nothing.
type Registry struct {
	base   Clock
	origin time.Time // the registry's times below are durations since origin

	tick atomic.Pointer[ticker] // see OnTick; nil while none is set

	mu      sync.Mutex
	entries []registryEntry
}

type registryEntry struct {
	owner    string
	breaker  weak.Pointer[Breaker]
	budget   weak.Pointer[RetryBudget]
	bulkhead weak.Pointer[Bulkhead]
}

// NewRegistry returns an empty Registry whose clocks tell the time of base
// (the real clock when nil).
func NewRegistry(base Clock) *Registry {
	base, _, _ = unwrapClock(base)
	return &Registry{base: base, origin: base.Now()}
}

// ticker is what [Registry.OnTick] set.
type ticker struct {
	every int64        // nanoseconds
	next  atomic.Int64 // when the next tick is due, since the registry's origin
	f     func(now time.Time)
}

// OnTick makes f run at most once per every, on the path of the calls
// themselves: the first call through one of the registry's breakers (allowed
// and reported with [Ticket.Done], or refused while open) that finds a tick
// due runs f on its own goroutine, with the time the breaker read for the
// call. The first call after OnTick finds one due; then one is due at each
// multiple of every on the registry's clock. While nothing calls, nothing
// runs: there is no goroutine and no timer.
//
// It is for keeping a cheap record of the dependencies' recent traffic
// (cumulative counters read every few seconds) so that an operator page
// opened during an incident shows the last minutes at once. f must be quick:
// it runs on a call's path (start a goroutine for slow work). A call that
// finds no tick due pays two atomic loads and a comparison; with no OnTick
// set, one atomic load. A Registry has one such function: OnTick replaces
// the one set before, and OnTick(0, nil) removes it (a call already running
// it finishes).
func (r *Registry) OnTick(every time.Duration, f func(now time.Time)) {
	if f == nil || every <= 0 {
		r.tick.Store(nil)
		return
	}
	r.tick.Store(&ticker{every: int64(every), f: f})
}

// tickAt runs the OnTick function when a tick is due at at, a duration since
// the registry's origin. One caller per tick runs it.
func (r *Registry) tickAt(at time.Duration) {
	if r == nil {
		return
	}
	t := r.tick.Load()
	if t == nil {
		return
	}
	next := t.next.Load()
	if int64(at) < next {
		return
	}
	if !t.next.CompareAndSwap(next, (int64(at)/t.every+1)*t.every) {
		return // another call took this tick
	}
	t.f(r.origin.Add(at).Round(0))
}

// Clock returns a Clock that tells the time of the registry's own and makes
// every [Breaker], [RetryBudget] and [Bulkhead] built on it join the
// registry under owner. The objects themselves run on the registry's clock
// (so the real clock keeps its fast path).
func (r *Registry) Clock(owner string) Clock {
	return &registeringClock{Clock: r.base, reg: r, owner: owner}
}

// Now returns the time on the registry's clock.
func (r *Registry) Now() time.Time { return r.base.Now() }

// registeringClock is the Clock of [Registry.Clock].
type registeringClock struct {
	Clock
	reg   *Registry
	owner string
}

// unwrapClock returns the clock an object runs on, and the registry and
// owner it joins when c came from [Registry.Clock].
func unwrapClock(c Clock) (Clock, *Registry, string) {
	if rc, ok := c.(*registeringClock); ok {
		return rc.Clock, rc.reg, rc.owner
	}
	return clockOrReal(c), nil, ""
}

func (r *Registry) add(e registryEntry) {
	if r == nil {
		return
	}
	r.mu.Lock()
	r.entries = append(r.entries, e)
	r.mu.Unlock()
}

func (r *Registry) addBreaker(owner string, b *Breaker) {
	r.add(registryEntry{owner: owner, breaker: weak.Make(b)})
}

func (r *Registry) addBudget(owner string, b *RetryBudget) {
	r.add(registryEntry{owner: owner, budget: weak.Make(b)})
}

func (r *Registry) addBulkhead(owner string, b *Bulkhead) {
	r.add(registryEntry{owner: owner, bulkhead: weak.Make(b)})
}

// DependencySnapshot is what one dependency's resilience objects say at one
// moment: those of its breaker, budget and bulkhead that exist (a db has a
// breaker only; an http upstream has all three). Objects of one owner with
// the same name are one dependency.
type DependencySnapshot struct {
	// Owner is the plugin that built the objects; Name the dependency (an
	// upstream, a disk, "redis").
	Owner, Name string
	Breaker     *BreakerView
	Budget      *BudgetView
	Bulkhead    *BulkheadSnapshot
}

// BreakerView is a breaker's state, its rules and its recent transitions.
type BreakerView struct {
	BreakerSnapshot
	// Created is when the breaker was made; Since is when its current
	// state began (Created when it never changed).
	Created, Since time.Time
	// Initial is the state at the start of the last [HistorySpan];
	// Transitions are that span's transitions, oldest first.
	Initial     State
	Transitions []Transition
	// Failures, FailureRate, Window, MinimumCalls and CoolDown are the
	// breaker's rules.
	Failures     int
	FailureRate  float64
	Window       time.Duration
	MinimumCalls int
	CoolDown     time.Duration
	// Tripped is the last change out of closed state, to open or (by the
	// silence rule of a [Hang]) to half-open, with the counts that made it:
	// the failures that opened the breaker, which the open breaker's own
	// counts no longer hold (opening resets them). Nil when the breaker
	// never left closed.
	Tripped *StateChange
}

// WindowFailureRate is the share of the window's calls that failed, 0 when
// the window holds none.
func (v BreakerView) WindowFailureRate() float64 {
	if v.WindowCalls == 0 {
		return 0
	}
	return float64(v.WindowFailures) / float64(v.WindowCalls)
}

// BudgetView is a retry budget's counters and its decisions per minute.
type BudgetView struct {
	BudgetSnapshot
	Minutes []RetryMinute
}

// Attempts is the calls' first attempts plus the retries the budget let
// start: what the dependency was sent.
func (v BudgetView) Attempts() uint64 { return v.Calls + v.Retries }

// Snapshot returns every dependency of the registry, in the order their
// first object joined. It locks each object briefly, one after the other, as
// /ready does; it allocates what it returns and nothing is kept.
func (r *Registry) Snapshot() []DependencySnapshot {
	if r == nil {
		return nil
	}
	r.mu.Lock()
	entries := slices.Clone(r.entries)
	r.mu.Unlock()

	type key struct{ owner, name string }
	var out []DependencySnapshot
	index := map[key]int{}
	live := entries[:0]
	// slot returns the dependency for owner and name whose field of this
	// kind is still free, making one when there is none.
	slot := func(owner, name string, taken func(*DependencySnapshot) bool) *DependencySnapshot {
		k := key{owner, name}
		if i, ok := index[k]; ok && !taken(&out[i]) {
			return &out[i]
		}
		out = append(out, DependencySnapshot{Owner: owner, Name: name})
		index[k] = len(out) - 1
		return &out[len(out)-1]
	}
	for _, e := range entries {
		switch {
		case e.breaker.Value() != nil:
			b := e.breaker.Value()
			v := b.view()
			d := slot(e.owner, b.name, func(d *DependencySnapshot) bool { return d.Breaker != nil })
			d.Breaker = &v
		case e.budget.Value() != nil:
			b := e.budget.Value()
			v := BudgetView{BudgetSnapshot: b.Snapshot(), Minutes: b.Minutes()}
			d := slot(e.owner, b.name, func(d *DependencySnapshot) bool { return d.Budget != nil })
			d.Budget = &v
		case e.bulkhead.Value() != nil:
			s := e.bulkhead.Value().Snapshot()
			d := slot(e.owner, s.Name, func(d *DependencySnapshot) bool { return d.Bulkhead != nil })
			d.Bulkhead = &s
		default:
			continue // collected: dropped below
		}
		live = append(live, e)
	}
	if len(live) < len(entries) {
		r.mu.Lock()
		// Keep what joined meanwhile, after the live entries seen here.
		r.entries = append(live, r.entries[len(entries):]...)
		r.mu.Unlock()
	}
	return out
}

// view returns the breaker's snapshot with its rules and history.
func (b *Breaker) view() BreakerView {
	s := b.Snapshot()
	b.mu.Lock()
	defer b.mu.Unlock()
	initial, ts := b.transitionsLocked(b.now())
	since := b.origin
	if n := len(b.history); n > 0 {
		since = b.origin.Add(b.history[n-1].at)
	}
	v := BreakerView{
		BreakerSnapshot: s, Created: b.origin.Round(0), Since: since.Round(0), Initial: initial, Transitions: ts,
		Failures: b.failures, FailureRate: b.rate, Window: b.win.width * time.Duration(len(b.win.buckets)),
		MinimumCalls: b.minCalls, CoolDown: b.coolDown,
	}
	if t := b.trip; t.to != StateClosed {
		v.Tripped = &StateChange{
			Name: b.name, From: StateClosed, To: t.to, At: b.origin.Add(t.at).Round(0), Hang: t.hang,
			Consecutive: int(t.consecutive), WindowCalls: int(t.windowCalls), WindowFailures: int(t.windowFails),
		}
	}
	return v
}
