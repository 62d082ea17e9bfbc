package framework

import (
	"context"
	"errors"
	"math"
	"sync"
	"time"

	"github.com/jfastframework/jfast/framework/resilience"
	"github.com/jfastframework/jfast/problem"
)

// Priority is a route's class in the front door's queue ([app.overload]):
// when requests must wait, a higher class is admitted first, and when the
// queue is full a newcomer takes the place of the oldest waiter of a lower
// class; a critical request is the last to be shed.
type Priority int8

const (
	// PrioritySheddable is work that may wait or fail first (reports,
	// prefetches, batch endpoints).
	PrioritySheddable Priority = iota
	// PriorityNormal is every route's class unless it is given another.
	PriorityNormal
	// PriorityCritical sheds last (checkout, login).
	PriorityCritical
	// PriorityExempt never waits and is never shed or counted: for a route
	// that holds its request for long (a long poll, a tunnel) without
	// calling [StreamContext].
	PriorityExempt

	priorities = 3 // the classes that queue
)

var priorityNames = [...]string{"sheddable", "normal", "critical", "exempt"}

func (p Priority) String() string {
	if p < 0 || int(p) >= len(priorityNames) {
		return "normal"
	}
	return priorityNames[p]
}

// Shed reasons, the reason label of jfast_overload_shed_total.
const (
	// ShedQueueFull: the queue was full of requests of the same or a higher
	// class, or a newcomer of a higher class took the waiter's place.
	ShedQueueFull = "queue_full"
	// ShedQueueTimeout: the request waited queue_timeout (or its own
	// deadline ran out) without a slot coming free.
	ShedQueueTimeout = "queue_timeout"
	// ShedClientGone: the client went away while the request waited. It is
	// answered 499, not 503.
	ShedClientGone = "client_gone"
)

var shedReasons = [...]string{ShedQueueFull, ShedQueueTimeout, ShedClientGone}

// ShedError is the error of a request the front door turned away. It renders
// as a 503 problem with Retry-After ([problem.Renderer]).
type ShedError struct {
	// Reason is one of ShedQueueFull, ShedQueueTimeout, ShedClientGone.
	Reason string
	// RetryAfter is app.overload.retry_after.
	RetryAfter time.Duration
}

func (e *ShedError) Error() string {
	return "the service is over its concurrency limit (" + e.Reason + ")"
}

// detailShed is the body of a shed request: it says the request did no work,
// so a caller knows a retry elsewhere is safe.
const detailShed = "the service is over its concurrency limit; the request was not started"

// Problem implements problem.Renderer.
func (e *ShedError) Problem() *problem.Problem {
	p := problem.ServiceUnavailable("", detailShed, e.RetryAfter)
	p.Err = e
	return p
}

// Limiter is the front door's adaptive concurrency limit ([app.overload]):
// at most Limit requests run at once; more wait in a short queue, newest
// first by class, and are shed when it is full or they have waited
// queue_timeout. The limit follows latency every window: while the window's
// mean latency stays within tolerance × the baseline (the lowest window mean
// of the last baseline_window) and the limit was in use, it grows by its
// square root; above that it shrinks in proportion, by at most half. See
// docs/overload.md for why.
//
// The App builds one (App.Overload) that HTTP and gRPC serving share; it is
// safe for concurrent use.
type Limiter struct {
	cfg   OverloadConfig
	clock resilience.Clock

	mu       sync.Mutex
	limit    float64
	inflight int
	waiting  [priorities][]*waiter // per class, oldest first
	queued   int

	// The current window.
	winStart time.Time
	winSum   time.Duration
	winN     int
	winPeak  int // the most requests in flight during it

	recent   time.Duration // the last closed window's mean latency
	baseline minWindow     // window means over baseline_window

	// cpuWait, when set, returns the p99 wait of runnable goroutines for
	// a CPU since it was last asked (the App gives the Go scheduler's);
	// lastCPUWait is the last window's.
	cpuWait     func() time.Duration
	lastCPUWait time.Duration

	// cpuBusy, when set, reports whether a goroutine waits for a CPU now
	// (the App gives the Go scheduler's run queues; called under mu). With
	// it a request may take one slot over the limit while none waits: the
	// spare slot. edge counts this window's decisions at the limit's edge,
	// edgeBusy those that found a goroutine waiting.
	cpuBusy        func() bool
	edge, edgeBusy int
	spare          uint64 // admissions into the spare slot since start

	// The stale count: requests in flight for longer than staleAfter.
	origin     time.Time
	admitted   [staleBuckets]epochCount
	staleEpoch int64 // every admission of an epoch up to this one is stale
	stale      int

	shed [len(shedReasons)][priorities]uint64
	// onWait, when set, is told how long each request that queued waited.
	onWait func(time.Duration)
}

// cpuWaitStep is the most a window's wait for a CPU shrinks the limit by.
const cpuWaitStep = 0.75

// windowMinSamples is how many requests a window needs before the limit
// moves on it: a mean of fewer is noise. At low traffic a window lasts until
// it has them.
const windowMinSamples = 10

// waiter is a request in the queue. Its state is the Limiter's mutex's.
type waiter struct {
	ch    chan struct{} // signalled once when granted or evicted
	state waitState
	since time.Time
	epoch int64 // the admission's, when granted
}

type waitState int8

const (
	waiting waitState = iota
	granted
	evicted
)

var waiterPool = sync.Pool{New: func() any { return &waiter{ch: make(chan struct{}, 1)} }}

// NewLimiter returns a Limiter with cfg's bounds on clock (nil: the real
// clock). cfg must be valid (OverloadConfig.validate).
func NewLimiter(cfg OverloadConfig, clock resilience.Clock) *Limiter {
	if clock == nil {
		clock = resilience.RealClock()
	}
	slots := int(cfg.BaselineWindow/cfg.Window) + 2
	return &Limiter{
		cfg:      cfg,
		clock:    clock,
		limit:    float64(cfg.InitialLimit),
		winStart: clock.Now(),
		origin:   clock.Now(),
		// No epoch is stale yet (the first is 0).
		staleEpoch: -1,
		baseline:   minWindow{entries: make([]windowMean, 0, min(slots, 4096))},
	}
}

// Permit is a slot a request holds while it runs. Release it exactly once.
type Permit struct {
	l     *Limiter
	start time.Time
	epoch int64 // the window of its admission, for the stale count
}

// Release frees the slot and gives the request's latency to the limit.
func (p Permit) Release() {
	if p.l != nil {
		p.l.release(p, true)
	}
}

// Abandon frees the slot without a latency sample: the request streamed,
// or its client went away, so its time says nothing about the service.
func (p Permit) Abandon() {
	if p.l != nil {
		p.l.release(p, false)
	}
}

// Acquire returns a Permit once the request may run: at once while fewer
// than the limit are in flight, else after waiting in the queue. It returns
// a *ShedError when the request is shed; its Reason is ShedClientGone when
// ctx was cancelled while it waited. A PriorityExempt request always gets a
// Permit that does nothing.
func (l *Limiter) Acquire(ctx context.Context, class Priority) (Permit, error) {
	if class == PriorityExempt {
		return Permit{}, nil
	}
	if class < 0 || class >= priorities {
		class = PriorityNormal
	}
	now := l.clock.Now()
	l.mu.Lock()
	l.staleLocked(now)
	if l.freeLocked() {
		e := l.admitLocked(now)
		l.mu.Unlock()
		return Permit{l: l, start: now, epoch: e}, nil
	}
	if l.queued >= l.cfg.Queue {
		victim := l.victimLocked(class)
		if victim == nil {
			l.shed[0][class]++
			l.mu.Unlock()
			return Permit{}, &ShedError{Reason: ShedQueueFull, RetryAfter: l.cfg.RetryAfter}
		}
		victim.state = evicted
		victim.ch <- struct{}{}
	}
	w := waiterPool.Get().(*waiter)
	w.state, w.since = waiting, now
	l.waiting[class] = append(l.waiting[class], w)
	l.queued++
	deadline := now.Add(l.cfg.QueueTimeout)
	staleTimer := l.staleTimerLocked(now, deadline)
	l.mu.Unlock()

	timer := l.clock.NewTimer(l.cfg.QueueTimeout)
	var done <-chan struct{}
	if ctx != nil {
		done = ctx.Done()
	}
	signalled := false
wait:
	for {
		var staleC <-chan time.Time
		if staleTimer != nil {
			staleC = staleTimer.C()
		}
		select {
		case <-w.ch:
			signalled = true
			break wait
		case <-timer.C():
			break wait
		case <-done:
			break wait
		case <-staleC:
			// Requests in flight turned stale: their slots are free now,
			// not at the next arrival or release.
			now := l.clock.Now()
			l.mu.Lock()
			staleTimer = nil
			if w.state == waiting {
				l.staleLocked(now)
				l.grantLocked()
				if w.state == waiting {
					staleTimer = l.staleTimerLocked(now, deadline)
				}
			}
			answered := w.state != waiting
			l.mu.Unlock()
			if answered {
				break wait // its signal is taken below
			}
		}
	}
	timer.Stop()
	if staleTimer != nil {
		staleTimer.Stop()
	}
	end := l.clock.Now()

	l.mu.Lock()
	state := w.state
	reason := -1
	epoch := w.epoch
	switch state {
	case granted:
	case evicted:
		reason = 0
		l.shed[reason][class]++
	default:
		l.removeLocked(class, w)
		reason = 1
		if ctx != nil && ctx.Err() != nil && !errors.Is(ctx.Err(), context.DeadlineExceeded) {
			reason = 2
		}
		l.shed[reason][class]++
	}
	onWait := l.onWait
	l.mu.Unlock()
	if state != waiting && !signalled {
		<-w.ch // the one signal, sent under the lock: the pooled channel is left empty
	}
	waiterPool.Put(w)
	if onWait != nil {
		onWait(end.Sub(now))
	}
	if reason >= 0 {
		return Permit{}, &ShedError{Reason: shedReasons[reason], RetryAfter: l.cfg.RetryAfter}
	}
	return Permit{l: l, start: end, epoch: epoch}, nil
}

// limitLocked is the limit as a whole number of requests.
func (l *Limiter) limitLocked() int { return int(l.limit) }

// freeLocked reports whether a request may start: fewer than max_limit
// hold a slot in all, and fewer than the limit not counting the stale ones;
// or exactly the limit, while no goroutine waits for a CPU (the spare
// slot: a full limit meeting an idle CPU). Each decision at the limit's
// edge is counted for adaptLocked, which holds the limit while most of them
// find the CPU busy: on a core that two requests leave nearly idle and three
// saturate, that keeps the limit at two instead of stepping to three, the
// core tipping over, and every goroutine (the shedding, /ready) waiting.
func (l *Limiter) freeLocked() bool {
	if l.inflight >= l.cfg.MaxLimit {
		return false
	}
	n, limit := l.inflight-l.stale, l.limitLocked()
	if n < limit {
		return true
	}
	if n > limit || l.cpuBusy == nil {
		return false
	}
	l.edge++
	if l.cpuBusy() {
		l.edgeBusy++
		return false
	}
	l.spare++ // every true is an admission (Acquire, grantLocked)
	return true
}

// admitLocked gives a request a slot and returns the epoch it is counted in.
func (l *Limiter) admitLocked(now time.Time) int64 {
	l.inflight++
	l.winPeak = max(l.winPeak, l.inflight-l.stale)
	e := l.epochOf(now)
	b := &l.admitted[e%staleBuckets]
	if b.epoch != e {
		b.epoch, b.n = e, 0 // its permits, if any are left, are stale already
	}
	b.n++
	return e
}

// A request still in flight staleAfter after it started stops counting
// against the limit: it waits on something (a dependency that hangs until
// its deadline), and holding every slot with such requests would shed the
// routes that do not touch it. It still counts against max_limit, and its
// latency is taken when it ends. Admissions are counted per window
// (epoch), in a ring, so the stale count moves in O(1).
const staleBuckets = 1024

// staleMin and staleFactor make staleAfter: 20 × the baseline, at least 1s.
const (
	staleMin    = time.Second
	staleFactor = 20
)

type epochCount struct {
	epoch int64
	n     int
}

// epochOf is the window t falls in; -1 before the first (division truncates
// toward zero, and a time just before origin is not in epoch 0).
func (l *Limiter) epochOf(t time.Time) int64 {
	if t.Before(l.origin) {
		return -1
	}
	return int64(t.Sub(l.origin) / l.cfg.Window)
}

// staleAfter is how long a request runs before it stops counting.
func (l *Limiter) staleAfter() time.Duration {
	d := max(staleMin, staleFactor*l.baseline.min())
	return min(d, (staleBuckets-2)*l.cfg.Window)
}

// staleLocked moves the stale count up to now.
func (l *Limiter) staleLocked(now time.Time) {
	target := l.epochOf(now.Add(-l.staleAfter()))
	if target <= l.staleEpoch {
		return
	}
	if target-l.staleEpoch > staleBuckets {
		// Quiet for longer than the ring: every bucket not yet counted
		// and old enough is.
		for _, b := range l.admitted {
			if b.epoch > l.staleEpoch && b.epoch <= target {
				l.stale += b.n
			}
		}
		l.staleEpoch = target
		return
	}
	for l.staleEpoch < target {
		l.staleEpoch++
		if b := l.admitted[l.staleEpoch%staleBuckets]; b.epoch == l.staleEpoch {
			l.stale += b.n
		}
	}
}

// staleTimerLocked returns a timer that fires when the oldest request still
// counted against the limit turns stale, if that is before deadline (the
// waiter's queue_timeout), or nil. A waiter waits on it too: a slot freed
// by the stale rule is nobody's release, and without it the queue would
// wait for the next arrival or release to notice, or time out with every
// slot held by requests that no longer count. The scan covers the windows
// between the last one already stale and the last that can turn stale by
// deadline: about queue_timeout / window of them, at most the ring.
func (l *Limiter) staleTimerLocked(now, deadline time.Time) resilience.Timer {
	after := l.staleAfter()
	last := min(l.epochOf(deadline.Add(-after)), l.staleEpoch+staleBuckets)
	for e := l.staleEpoch + 1; e <= last; e++ {
		if b := l.admitted[e%staleBuckets]; b.epoch == e && b.n > 0 {
			// staleLocked counts epoch e once epochOf(t - after) reaches it.
			at := l.origin.Add(time.Duration(e)*l.cfg.Window + after)
			return l.clock.NewTimer(at.Sub(now))
		}
	}
	return nil
}

// victimLocked takes from the queue the oldest waiter of the lowest class
// not above class, or returns nil when every waiter outranks the newcomer.
// Newest-first means the oldest waiter is the one least likely to be served
// and most likely to have a client about to give up.
func (l *Limiter) victimLocked(class Priority) *waiter {
	for c := Priority(0); c <= class; c++ {
		if q := l.waiting[c]; len(q) > 0 {
			w := q[0]
			l.waiting[c] = append(q[:0], q[1:]...)
			l.queued--
			return w
		}
	}
	return nil
}

func (l *Limiter) removeLocked(class Priority, w *waiter) {
	q := l.waiting[class]
	for i, x := range q {
		if x == w {
			l.waiting[class] = append(q[:i], q[i+1:]...)
			l.queued--
			return
		}
	}
}

// grantLocked hands free slots to waiters: the highest class first, the
// newest of it first.
func (l *Limiter) grantLocked() {
	now := l.clock.Now()
	for l.queued > 0 && l.freeLocked() {
		for c := priorities - 1; c >= 0; c-- {
			q := l.waiting[c]
			if len(q) == 0 {
				continue
			}
			w := q[len(q)-1]
			l.waiting[c] = q[:len(q)-1]
			l.queued--
			w.epoch = l.admitLocked(now)
			w.state = granted
			w.ch <- struct{}{}
			break
		}
	}
}

func (l *Limiter) release(p Permit, sample bool) {
	start := p.start
	now := l.clock.Now()
	l.mu.Lock()
	l.inflight--
	if p.epoch <= l.staleEpoch {
		l.stale--
	} else if b := &l.admitted[p.epoch%staleBuckets]; b.epoch == p.epoch {
		b.n--
	}
	l.staleLocked(now)
	// The window opened with its first sample and closes at the first
	// release a window's time after it: its mean is of what it held.
	if l.winN >= windowMinSamples && now.Sub(l.winStart) >= l.cfg.Window {
		l.adaptLocked(now)
	}
	if sample {
		if l.winN == 0 {
			l.winStart = now
		}
		l.winSum += now.Sub(start)
		l.winN++
	}
	l.grantLocked()
	l.mu.Unlock()
}

// adaptLocked closes the window and moves the limit.
func (l *Limiter) adaptLocked(now time.Time) {
	mean := l.winSum / time.Duration(l.winN)
	used := l.winPeak*2 >= l.limitLocked()
	// The CPU is what bounds the requests when most of those that found
	// the limit full also found a goroutine waiting for a CPU: another slot
	// would only lengthen that wait.
	cpuBound := l.edgeBusy*2 > l.edge
	peak := l.winPeak
	l.winSum, l.winN, l.winPeak = 0, 0, l.inflight-l.stale
	l.edge, l.edgeBusy = 0, 0
	l.recent = mean
	l.baseline.add(now, mean, l.cfg.BaselineWindow)
	base := l.baseline.min()
	if mean <= 0 || base <= 0 {
		return
	}
	gradient := l.cfg.Tolerance * float64(base) / float64(mean)
	if l.cpuWait != nil {
		// Requests that wait for a CPU before the front door sees them are
		// queueing all the same: past max_cpu_wait, the limit shrinks as it
		// does for latency.
		l.lastCPUWait = l.cpuWait()
		if l.lastCPUWait > l.cfg.MaxCPUWait {
			// Gently (at most a quarter a window): a host that starves
			// the process of CPU makes the wait long whatever the limit.
			gradient = min(gradient, max(float64(l.cfg.MaxCPUWait)/float64(l.lastCPUWait), cpuWaitStep))
		}
	}
	limit := l.limit
	if l.cpuWait != nil && l.lastCPUWait > l.cfg.MaxCPUWait {
		// Goroutines waited for a CPU past its bound with at most peak
		// requests in flight: what the limit allowed above that was
		// never shown to fit (a limit that grew, or stayed at
		// initial_limit, while the service was not full). The shrink
		// starts from what ran, so a load that arrives all at once meets
		// a limit the CPU can take a window sooner.
		limit = min(limit, float64(max(peak, l.cfg.MinLimit)))
	}
	switch {
	case gradient < 1:
		limit *= max(gradient, 0.5)
	case used && !cpuBound && (l.cpuWait == nil || l.lastCPUWait <= l.cfg.MaxCPUWait/2):
		// Past half of max_cpu_wait the CPU is nearly full, and when the
		// limit's edge mostly finds goroutines waiting for a CPU the CPU
		// bounds the requests: the limit holds, so that it does not tip
		// the CPU over and shrink back in waves (the long tail the
		// benchmark showed).
		limit += math.Sqrt(limit)
	}
	l.limit = min(max(limit, float64(l.cfg.MinLimit)), float64(l.cfg.MaxLimit))
}

// Limit is the limit now, as a whole number of requests.
func (l *Limiter) Limit() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.limitLocked()
}

// LimiterState is what the Limiter reads now, for metrics and the status page.
type LimiterState struct {
	Limit    int
	InFlight int
	Queued   int
	// Baseline is the lowest window mean latency of the last
	// baseline_window; Recent the last window's. Zero before the first
	// window closes.
	Baseline, Recent time.Duration
	// CPUWait is the last window's p99 wait of goroutines for a CPU (zero
	// without that signal).
	CPUWait time.Duration
	// Spare counts the requests admitted into the spare slot since start
	// (one over the limit, while no goroutine waited for a CPU).
	Spare uint64
	// Shed counts the requests shed since start, by reason and class.
	Shed map[string]map[string]uint64
}

// State returns the Limiter's readings.
func (l *Limiter) State() LimiterState {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := LimiterState{Limit: l.limitLocked(), InFlight: l.inflight, Queued: l.queued, Baseline: l.baseline.min(), Recent: l.recent, CPUWait: l.lastCPUWait, Spare: l.spare, Shed: map[string]map[string]uint64{}}
	for r, byClass := range l.shed {
		m := map[string]uint64{}
		for c, n := range byClass {
			m[Priority(c).String()] = n
		}
		s.Shed[shedReasons[r]] = m
	}
	return s
}

// minWindow is the lowest of the window means of a trailing span of time: a
// monotonic queue, so adding is amortised O(1) and its size is bounded by
// the windows the span holds.
type minWindow struct {
	entries []windowMean // increasing in mean, oldest first
}

type windowMean struct {
	at   time.Time
	mean time.Duration
}

func (m *minWindow) add(now time.Time, mean time.Duration, span time.Duration) {
	e := m.entries
	for len(e) > 0 && e[len(e)-1].mean >= mean {
		e = e[:len(e)-1]
	}
	e = append(e, windowMean{now, mean})
	drop := 0
	for drop < len(e)-1 && now.Sub(e[drop].at) > span {
		drop++
	}
	if drop > 0 {
		e = append(e[:0], e[drop:]...)
	}
	m.entries = e
}

func (m *minWindow) min() time.Duration {
	if len(m.entries) == 0 {
		return 0
	}
	return m.entries[0].mean
}
