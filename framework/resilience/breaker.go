package resilience

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// Outcome is what a call meant for a breaker, as decided by the caller's
// classifier.
type Outcome uint8

const (
	// Success is evidence that the dependency is up: any answer but a 502,
	// 503 or 504, a 500, a 429 and every 4xx included.
	Success Outcome = iota
	// Failure is evidence that the dependency is not there: a transport
	// error, a timeout, a 502, 503 or 504.
	Failure
	// Ignore is no evidence either way: a bulkhead rejection, a call whose
	// caller gave up.
	Ignore
	// Hang is a failure in which the dependency let the plugin's own
	// deadline for the call expire without answering: it accepted the
	// call (or the connection) and said nothing, as a paused container, a
	// frozen VM or a full accept queue does. It counts as a [Failure] and
	// is stronger evidence: when the dependency answered no call at all
	// since the hung call was admitted, the breaker goes half-open at once,
	// so the next call probes while every other fails fast (see
	// [Ticket.Done]); [Ticket.TripOnSilence], which the policy's loop
	// applies to every attempt that hung ([Run.Attempts]), opens it outright
	// instead. A call cut by its caller's deadline is not a Hang but
	// [Ignore] ([CutByCaller]).
	Hang
)

// String returns "success", "failure", "ignore" or "hang".
func (o Outcome) String() string { return enumName(outcomeNames, o, "Outcome") }

var outcomeNames = []string{
	Success: "success",
	Failure: "failure",
	Ignore:  "ignore",
	Hang:    "hang",
}

// State is a breaker's state.
type State uint8

const (
	// StateClosed lets every call through.
	StateClosed State = iota
	// StateOpen refuses every call until the cool-down ends.
	StateOpen
	// StateHalfOpen lets exactly one probe call through.
	StateHalfOpen
)

// String returns "closed", "open" or "half_open".
func (s State) String() string { return enumName(stateNames, s, "State") }

var stateNames = []string{
	StateClosed:   "closed",
	StateOpen:     "open",
	StateHalfOpen: "half_open",
}

// enumName is the String of v, a value of the enum typ: names[v], or
// typ(v) for a value no constant has.
func enumName[E ~uint8](names []string, v E, typ string) string {
	if int(v) < len(names) && names[v] != "" {
		return names[v]
	}
	return fmt.Sprintf("%s(%d)", typ, uint8(v))
}

// Breaker defaults (docs/design.md, "Resilience rules", has their reasons).
const (
	DefaultBreakerFailures     = 5
	DefaultBreakerFailureRate  = 0.5
	DefaultBreakerWindow       = 30 * time.Second
	DefaultBreakerMinimumCalls = 20
	DefaultBreakerCoolDown     = 15 * time.Second
)

// breakerBuckets is how many buckets the failure-rate window has: the rate
// rule is exact to within Window/30 (1 s with the default window).
const breakerBuckets = 30

// BreakerOpts configures a [Breaker]. Zero fields take their defaults.
type BreakerOpts struct {
	// Name names the dependency in errors, hooks and metrics.
	// Defaults to "dependency".
	Name string
	// Failures is how many consecutive failures open the breaker. The
	// count does not decay with Window: twelve failures spread over an
	// hour are still twelve in a row. Defaults to 5.
	Failures int
	// FailureRate opens the breaker when at least this share of the calls
	// in the last Window failed, provided there were at least
	// MinimumCalls. Must be in (0, 1]. Defaults to 0.5.
	FailureRate float64
	// Window is the sliding span of the failure-rate rule.
	// Defaults to 30s.
	Window time.Duration
	// MinimumCalls is how many calls Window must hold before the rate rule
	// may open the breaker. Defaults to 20.
	MinimumCalls int
	// CoolDown is how long the breaker stays open before it lets one probe
	// through. Defaults to 15s.
	CoolDown time.Duration
	// Clock is the time source. Defaults to RealClock().
	Clock Clock
	// OnStateChange, when set, is called after every state change with the
	// counts as they were just before the change reset them. Calls are
	// serialised and in transition order, never with the breaker's lock
	// held (so the hook may call Snapshot). It runs on the goroutine of a
	// call that changed the state, after the change, so it must be quick.
	// Defaults to nil.
	OnStateChange func(StateChange)
}

// StateChange describes one transition of a breaker.
type StateChange struct {
	Name     string
	From, To State
	At       time.Time
	// Consecutive, WindowCalls and WindowFailures are the counts just
	// before the change (a change to open or closed resets them).
	Consecutive    int
	WindowCalls    int
	WindowFailures int
	// Hang is set on a change made by a [Hang]: closed to half-open by the
	// silence rule (no answer from the dependency since the hung call was
	// admitted), or half-open to open by a probe that hung; and on one made
	// by [Ticket.TripOnSilence] or [Breaker.Trip].
	Hang bool
}

// BreakerSnapshot is a breaker's state at one moment, for /ready and metrics.
type BreakerSnapshot struct {
	Name  string
	State State
	// RetryAfter is the cool-down left while open; 0 otherwise.
	RetryAfter time.Duration
	// Consecutive is the current run of consecutive failures.
	Consecutive int
	// WindowCalls and WindowFailures are the counts of the sliding window.
	WindowCalls    int
	WindowFailures int
	// Opens counts every transition to open since the breaker was made.
	Opens uint64
	// Probing is set while a half-open breaker's probe call is in flight;
	// a half-open breaker without it lets the next call probe.
	Probing bool
}

// Breaker is a circuit breaker for one dependency in one process: closed,
// open, half-open as described in the package documentation. A Breaker is
// safe for concurrent use. A nil *Breaker lets every call through.
type Breaker struct {
	name     string
	failures int
	rate     float64
	minCalls int
	coolDown time.Duration
	clock    Clock
	origin   time.Time // every time below is a duration since origin
	hook     func(StateChange)
	probeErr *OpenError    // shared by every refusal while the probe is in flight
	reg      *Registry     // the registry it joined, for Registry.OnTick; nil if none
	regOff   time.Duration // origin less the registry's origin

	// Read without the lock by Allow's fast paths; written under mu.
	sg      atomic.Uint64             // gen<<3 | probing<<2 | state
	openErr atomic.Pointer[OpenError] // the current open period's error

	// answers counts every Success reported, stale tickets included: a
	// ticket remembers it at Allow, so a Hang can tell whether the
	// dependency answered anything while the hung call waited.
	answers atomic.Uint64

	hookMu sync.Mutex // held by the goroutine delivering queued changes

	mu          sync.Mutex
	state       State
	gen         uint64 // bumped by every state change and every probe grant
	probing     bool
	consecutive int
	win         window        // a: calls, b: failures
	until       time.Duration // end of the cool-down
	opens       uint64
	pending     []StateChange // changes not yet delivered to the hook
	history     []transition  // the last transitions, oldest first (see Transitions)
	trip        trip          // the last change out of closed state (see BreakerView.Tripped)
}

// NewBreaker returns a closed Breaker. It panics if an option is out of
// range (negative counts or durations, a failure rate outside (0, 1]).
func NewBreaker(o BreakerOpts) *Breaker {
	if o.Failures < 0 || o.MinimumCalls < 0 || o.Window < 0 || o.CoolDown < 0 {
		panic(fmt.Sprintf("resilience: breaker %q: negative option in %+v", o.Name, o))
	}
	if o.FailureRate < 0 || o.FailureRate > 1 || o.FailureRate != o.FailureRate {
		panic(fmt.Sprintf("resilience: breaker %q: FailureRate %v is outside (0, 1]", o.Name, o.FailureRate))
	}
	if o.Name == "" {
		o.Name = "dependency"
	}
	if o.Failures == 0 {
		o.Failures = DefaultBreakerFailures
	}
	if o.FailureRate == 0 {
		o.FailureRate = DefaultBreakerFailureRate
	}
	if o.Window == 0 {
		o.Window = DefaultBreakerWindow
	}
	if o.MinimumCalls == 0 {
		o.MinimumCalls = DefaultBreakerMinimumCalls
	}
	if o.CoolDown == 0 {
		o.CoolDown = DefaultBreakerCoolDown
	}
	clock, reg, owner := unwrapClock(o.Clock)
	b := &Breaker{
		name:     o.Name,
		failures: o.Failures,
		rate:     o.FailureRate,
		minCalls: o.MinimumCalls,
		coolDown: o.CoolDown,
		clock:    clock,
		origin:   clock.Now(),
		hook:     o.OnStateChange,
		probeErr: &OpenError{Name: o.Name, clock: clock},
		win:      newWindow(o.Window, breakerBuckets),
	}
	if reg != nil {
		b.reg, b.regOff = reg, b.origin.Sub(reg.origin)
	}
	reg.addBreaker(owner, b)
	return b
}

// tick lets the registry run its OnTick function when one is due at now.
func (b *Breaker) tick(now time.Duration) {
	if b.reg != nil {
		b.reg.tickAt(now + b.regOff)
	}
}

// Name returns the breaker's name.
func (b *Breaker) Name() string { return b.name }

// Ticket is the permission [Breaker.Allow] gives one call. Report the call's
// outcome with Done, exactly once. A Ticket remembers the breaker's
// generation: an outcome reported after the breaker changed state (a call
// admitted while closed that ends after the breaker opened, or after a new
// probe was granted) is ignored, so a stale result cannot decide the new
// state. The zero Ticket's Done does nothing.
type Ticket struct {
	b       *Breaker
	gen     uint64
	answers uint64 // b.answers when the call was admitted
	probe   bool
}

// Probe reports whether this ticket is the half-open breaker's single probe.
func (t Ticket) Probe() bool { return t.probe }

const (
	sgStateMask = 3
	sgProbing   = 4
	sgGenShift  = 3
)

// publishLocked makes state, probing and gen visible to the fast paths.
func (b *Breaker) publishLocked() {
	v := b.gen<<sgGenShift | uint64(b.state)
	if b.probing {
		v |= sgProbing
	}
	b.sg.Store(v)
}

func (b *Breaker) now() time.Duration { return elapsed(b.clock, b.origin) }

// nowAt returns at as a time since b's origin, or now when at is zero.
func (b *Breaker) nowAt(at time.Time) time.Duration {
	if at.IsZero() {
		return b.now()
	}
	return at.Sub(b.origin)
}

// Allow asks to make one call. It returns a Ticket, or a *[OpenError] when
// the breaker is open, or half-open with its probe already taken. Allow does
// no I/O and, on both paths, allocates nothing.
func (b *Breaker) Allow() (Ticket, error) {
	if b == nil {
		return Ticket{}, nil
	}
	// Fast paths, without the lock: closed; open within the cool-down;
	// half-open with the probe taken.
	switch v := b.sg.Load(); {
	case State(v&sgStateMask) == StateClosed:
		return Ticket{b: b, gen: v >> sgGenShift, answers: b.answers.Load()}, nil
	case State(v&sgStateMask) == StateOpen:
		if e := b.openErr.Load(); e != nil {
			if now := b.now(); now < e.until {
				b.tick(now)
				return Ticket{}, e
			}
		}
	case v&sgProbing != 0:
		return Ticket{}, b.probeErr
	}
	b.mu.Lock()
	var change *StateChange
	switch b.state {
	case StateClosed:
		t := Ticket{b: b, gen: b.gen, answers: b.answers.Load()}
		b.mu.Unlock()
		return t, nil
	case StateOpen:
		now := b.now()
		if now < b.until {
			err := b.openErr.Load()
			b.mu.Unlock()
			return Ticket{}, err
		}
		c := b.transitionLocked(StateHalfOpen, now)
		change = &c
	}
	// Half-open.
	if b.probing {
		b.unlockAndNotify(change)
		return Ticket{}, b.probeErr
	}
	b.probing = true
	b.gen++
	b.publishLocked()
	t := Ticket{b: b, gen: b.gen, answers: b.answers.Load(), probe: true}
	b.unlockAndNotify(change)
	return t, nil
}

// Done reports the call's outcome. Call it exactly once per Ticket; use
// [Ignore] when the caller gave up (cancelled context) or the outcome says
// nothing about the dependency. A probe's Ignore frees the probe slot for
// the next caller without closing or reopening the breaker.
//
// A [Hang] counts as a [Failure] and, in closed state, makes the breaker
// half-open at once when no call to the dependency succeeded since this one
// was admitted (Allow): the dependency has been silent for the whole of the
// plugin's own deadline. The next call is then the probe, and every other
// fails fast while it is in flight: if it hangs too the breaker opens for a
// full cool-down, if it is answered (a pooled connection had died, the
// dependency had not) the breaker closes. So a hung dependency costs one
// call its deadline, then one probe, where the consecutive rule would cost
// Failures of them; and one dead connection costs no outage. When something
// did answer meanwhile, the dependency is alive and the hung call counts as
// one failure among others.
func (t Ticket) Done(o Outcome) { t.doneAt(o, time.Time{}) }

// doneAt is Done with the outcome counted at at, on the breaker's clock, or
// at the time now when at is zero.
func (t Ticket) doneAt(o Outcome, at time.Time) {
	b := t.b
	if b == nil {
		return
	}
	if o == Success {
		b.answers.Add(1)
	}
	if !t.probe && o != Success && o != Failure && o != Hang {
		return // an ignored call in closed state changes nothing
	}
	b.mu.Lock()
	if t.gen != b.gen {
		b.mu.Unlock()
		return
	}
	switch b.state {
	case StateClosed:
		now := b.nowAt(at)
		if o == Success {
			b.win.add(now, 1, 0)
			b.consecutive = 0
			b.mu.Unlock()
			b.tick(now)
			return
		}
		b.win.add(now, 1, 1)
		b.consecutive++
		if b.consecutive >= b.failures || b.rateTrippedLocked() {
			c := b.openLocked(now)
			c.Hang = o == Hang
			b.unlockAndNotify(&c)
			b.tick(now)
			return
		}
		if o == Hang && b.answers.Load() == t.answers {
			c := b.transitionLocked(StateHalfOpen, now)
			c.Hang = true
			b.unlockAndNotify(&c)
			b.tick(now)
			return
		}
		b.mu.Unlock()
		b.tick(now)
	case StateHalfOpen:
		if !t.probe {
			b.mu.Unlock()
			return
		}
		now := b.nowAt(at)
		switch o {
		case Success:
			c := b.transitionLocked(StateClosed, now)
			b.unlockAndNotify(&c)
			b.tick(now)
		case Failure, Hang:
			c := b.openLocked(now)
			c.Hang = o == Hang
			b.unlockAndNotify(&c)
			b.tick(now)
		default:
			b.probing = false
			b.gen++
			b.publishLocked()
			b.mu.Unlock()
		}
	default:
		b.mu.Unlock()
	}
}

// TripOnSilence reports a [Hang] that opens the breaker outright when the
// dependency answered no call since this one was admitted: where Done(Hang)
// makes the breaker half-open, so that the next call probes and may pay the
// same deadline again, TripOnSilence opens it for a full cool-down. It suits
// a dependency whose calls in one request follow each other (a cache's
// commands, an upstream's calls, a disk's transfers): the second call of the
// request is then refused at once instead of being the probe. When something
// answered meanwhile it is Done(Hang); a probe's TripOnSilence opens the
// breaker as Done(Hang) does. The policy's loop ends the tickets it holds
// so after an attempt that hung ([Run.Attempts]), and an [Attempter] the
// tickets it takes with [Ticket.DoneAttempt].
func (t Ticket) TripOnSilence() {
	if t.b == nil || t.probe || !t.trip() {
		t.Done(Hang)
	}
}

// DoneAttempt reports the outcome of one attempt of a policy's loop on a
// ticket the [Attempter] took itself (an instance's breaker, in
// [Attempter.Report]): Done, except that a [Hang] is reported by the
// silence rule ([Ticket.TripOnSilence]), as the loop reports the call's.
func (t Ticket) DoneAttempt(o Outcome) {
	if o == Hang {
		t.TripOnSilence()
		return
	}
	t.Done(o)
}

// trip opens the breaker for a hung call, the silence rule in closed state,
// and reports whether it did: it does nothing when the breaker changed
// state since the ticket was taken, or something answered meanwhile.
func (t Ticket) trip() bool {
	b := t.b
	b.mu.Lock()
	if t.gen != b.gen || b.state != StateClosed || b.answers.Load() != t.answers {
		b.mu.Unlock()
		return false
	}
	now := b.now()
	b.win.add(now, 1, 1)
	b.consecutive++
	c := b.openLocked(now)
	c.Hang = true
	b.unlockAndNotify(&c)
	b.tick(now)
	return true
}

// hung applies the silence rule to the ticket of a call still running (the
// policy's loop, after an attempt that hung): a probe's ticket, or one
// whose dependency answered nothing since the call was admitted, opens the
// breaker and is spent; any other stays the call's, for the outcome of its
// last attempt (a hang while the dependency answered others is one failure
// among them). refuses reports whether the breaker now refuses calls (open
// within its cool-down, or half-open with a probe in flight): a retry would
// wait on the silence this call, or another, met.
func (t Ticket) hung() (spent, refuses bool) {
	b := t.b
	if b == nil {
		return false, false
	}
	switch {
	case t.probe:
		t.Done(Hang)
		spent = true
	case t.trip():
		spent = true
	}
	return spent, b.Refuses()
}

// Refuses reports whether Allow would refuse a call now, without taking a
// ticket or moving an open breaker whose cool-down ended to half-open: one
// atomic load, and a clock read while open. A balancer reads it to choose
// among the instances that would take a call.
func (b *Breaker) Refuses() bool {
	v := b.sg.Load()
	switch State(v & sgStateMask) {
	case StateOpen:
		e := b.openErr.Load()
		return e != nil && b.now() < e.until
	case StateHalfOpen:
		return v&sgProbing != 0
	}
	return false
}

// Trip opens the breaker now for a full cool-down, whatever its state, on
// evidence gathered outside any call: a liveness check of the dependency
// that got no answer (the db plugin's watchdog). A probe in flight is
// forgotten (its outcome is stale). It reports whether the breaker changed
// state: an open breaker stays open with its cool-down unchanged.
func (b *Breaker) Trip() bool {
	if b == nil {
		return false
	}
	b.mu.Lock()
	now := b.now()
	if b.state == StateOpen && now < b.until {
		b.mu.Unlock()
		return false
	}
	c := b.openLocked(now)
	c.Hang = true
	b.unlockAndNotify(&c)
	b.tick(now)
	return true
}

// rateTrippedLocked reports whether the failure-rate rule holds.
func (b *Breaker) rateTrippedLocked() bool {
	calls := b.win.a
	if calls < int64(b.minCalls) {
		return false
	}
	// A small tolerance so that, e.g., 3 of 30 meets a rate of 0.1 despite
	// 0.1*30 being 3.0000000000000004 in floating point.
	return float64(b.win.b) >= b.rate*float64(calls)-1e-9
}

func (b *Breaker) openLocked(now time.Duration) StateChange {
	b.until = now + b.coolDown
	b.openErr.Store(&OpenError{Name: b.name, Until: b.origin.Add(b.until), clock: b.clock, until: b.until})
	b.opens++
	return b.transitionLocked(StateOpen, now)
}

// transitionLocked moves to state to, bumps the generation and resets what
// the new state starts without. It returns the change for the hook.
func (b *Breaker) transitionLocked(to State, now time.Duration) StateChange {
	b.win.advance(now)
	c := StateChange{
		Name: b.name, From: b.state, To: to, At: b.origin.Add(now).Round(0), // Round(0): a plain wall time for logs
		Consecutive: b.consecutive, WindowCalls: int(b.win.a), WindowFailures: int(b.win.b),
	}
	b.state = to
	b.gen++
	b.probing = false
	if to != StateHalfOpen {
		b.consecutive = 0
		b.win.reset()
	}
	b.publishLocked()
	return c
}

// unlockAndNotify queues change (if any) for the hook, releases b.mu and
// delivers queued changes. Changes are queued under mu, so they are
// delivered in the order the transitions happened, and the hook never runs
// with mu held: it may call any method of the breaker.
func (b *Breaker) unlockAndNotify(change *StateChange) {
	if change != nil {
		b.recordLocked(*change)
		if b.hook != nil {
			b.pending = append(b.pending, *change)
		}
	}
	queued := len(b.pending) > 0
	b.mu.Unlock()
	if queued {
		b.deliver()
	}
}

// deliver runs the hook for every queued change. Whoever holds hookMu
// delivers; a goroutine that finds it held leaves its change to the holder,
// which looks again after letting go, so no change is left behind.
func (b *Breaker) deliver() {
	for {
		if !b.hookMu.TryLock() {
			return
		}
		b.drain()
		b.mu.Lock()
		more := len(b.pending) > 0
		b.mu.Unlock()
		if !more {
			return
		}
	}
}

func (b *Breaker) drain() {
	defer b.hookMu.Unlock() // a panicking hook must not stop later deliveries
	for {
		b.mu.Lock()
		if len(b.pending) == 0 {
			b.mu.Unlock()
			return
		}
		c := b.pending[0]
		b.pending = append(b.pending[:0], b.pending[1:]...)
		b.mu.Unlock()
		b.hook(c)
	}
}

// Snapshot returns the breaker's state and counts. An open breaker whose
// cool-down has ended is reported (and becomes) half-open.
func (b *Breaker) Snapshot() BreakerSnapshot {
	b.mu.Lock()
	now := b.now()
	var change *StateChange
	if b.state == StateOpen && now >= b.until {
		c := b.transitionLocked(StateHalfOpen, now)
		change = &c
	}
	b.win.advance(now)
	s := BreakerSnapshot{
		Name: b.name, State: b.state, Consecutive: b.consecutive,
		WindowCalls: int(b.win.a), WindowFailures: int(b.win.b), Opens: b.opens,
		Probing: b.probing,
	}
	if b.state == StateOpen {
		s.RetryAfter = b.until - now
	}
	b.unlockAndNotify(change)
	return s
}
