package framework_test

import (
	"container/heap"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/framework/resilience"
)

// oneCore is a model of the overload benchmark's server (docs/performance.md)
// driving the real Limiter on the test clock: one CPU serving runnable work
// first come first served, each piece to completion (a burn of a few
// milliseconds is not preempted), as the Go scheduler on one P does. A request
// arrives at a constant rate, waits for the CPU, is read and either shed
// (cheap) or admitted: it burns its CPU, waits for its dependency off the
// CPU, then waits for the CPU again to write its answer and free its slot.
// The limiter's CPU-wait signal is the model's p99 wait for the CPU in the
// window, as the Go scheduler's would be.
type oneCore struct {
	read, shed, burn, respond, wait time.Duration
}

// benchCore is the benchmark's handler as the server's CPU meets it: 2 ms
// burnt plus what net/http and the burn's clock reads cost (the chi arm's
// 16 closed loops serve about 280 a second on one core), then 5 ms waiting.
var benchCore = oneCore{read: 15 * time.Microsecond, shed: 30 * time.Microsecond, burn: 3500 * time.Microsecond, respond: 20 * time.Microsecond, wait: 5 * time.Millisecond}

// capacity is the requests a second the core serves, admitting every one.
func (m oneCore) capacity() float64 {
	return float64(time.Second) / float64(m.read+m.burn+m.respond)
}

type modelResult struct {
	admitted, good float64 // a second
	p50, p99       time.Duration
	limits         []float64 // the limit at each tenth of the run's second half
}

type event struct {
	at   time.Duration
	kind int // 0 arrival, 1 wait over
	req  int
	seq  int
}

type events []event

func (e events) Len() int { return len(e) }
func (e events) Less(i, j int) bool {
	if e[i].at != e[j].at {
		return e[i].at < e[j].at
	}
	return e[i].seq < e[j].seq
}
func (e events) Swap(i, j int) { e[i], e[j] = e[j], e[i] }
func (e *events) Push(x any)   { *e = append(*e, x.(event)) }
func (e *events) Pop() any {
	old := *e
	x := old[len(old)-1]
	*e = old[:len(old)-1]
	return x
}

// run offers rate requests a second for d to l on clk and returns what was
// admitted in the second half (the first is the limit finding its level).
func (m oneCore) run(t *testing.T, l *framework.Limiter, clk *resilience.TestClock, rate float64, d time.Duration) modelResult {
	t.Helper()
	origin := clk.Now()
	at := func(ts time.Duration) {
		if now := clk.Now().Sub(origin); ts > now {
			clk.Advance(ts - now)
		}
	}
	var cpuWaits []time.Duration
	framework.SetCPUWait(l, func() time.Duration {
		if len(cpuWaits) == 0 {
			return 0
		}
		slices.Sort(cpuWaits)
		p := cpuWaits[int(math.Ceil(float64(len(cpuWaits))*0.99))-1]
		cpuWaits = cpuWaits[:0]
		return p
	})
	type job struct {
		req     int
		respond bool
		since   time.Duration
	}
	var (
		evs      events
		seq      int
		runq     []job // FIFO; a woken handler goes first (the scheduler's runnext)
		cpuFree  time.Duration
		arrived  []time.Duration
		permits  = map[int]framework.Permit{}
		res      modelResult
		lat      []time.Duration
		half     = d / 2
		interval = time.Duration(float64(time.Second) / rate)
	)
	push := func(e event) { seq++; e.seq = seq; heap.Push(&evs, e) }
	push(event{at: 0, kind: 0})
	nextSample := half
	for {
		// Run the CPU until the next event.
		for len(runq) > 0 && (len(evs) == 0 || cpuFree < evs[0].at) {
			j := runq[0]
			runq = runq[1:]
			start := max(cpuFree, j.since)
			cpuWaits = append(cpuWaits, start-j.since)
			at(start)
			if j.respond {
				cpuFree = start + m.respond
				at(cpuFree)
				permits[j.req].Release()
				delete(permits, j.req)
				if arrived[j.req] >= half {
					took := cpuFree - arrived[j.req]
					lat = append(lat, took)
					res.admitted++
					if took <= 500*time.Millisecond {
						res.good++
					}
				}
				continue
			}
			p, err := l.Acquire(nil, framework.PriorityNormal)
			if err != nil {
				cpuFree = start + m.read + m.shed
				continue
			}
			permits[j.req] = p
			cpuFree = start + m.read + m.burn
			push(event{at: cpuFree + m.wait, kind: 1, req: j.req})
		}
		if len(evs) == 0 {
			break
		}
		e := heap.Pop(&evs).(event)
		for nextSample <= e.at && nextSample < d {
			res.limits = append(res.limits, framework.LimitOf(l))
			nextSample += d / 20
		}
		switch e.kind {
		case 0:
			if e.at >= d {
				continue
			}
			e.req = len(arrived)
			arrived = append(arrived, e.at)
			runq = append(runq, job{req: e.req, since: e.at})
			push(event{at: e.at + interval, kind: 0})
		case 1:
			runq = append([]job{{req: e.req, respond: true, since: e.at}}, runq...)
		}
		if cpuFree < e.at {
			cpuFree = e.at
		}
	}
	res.admitted /= (d - half).Seconds()
	res.good /= (d - half).Seconds()
	res.p50 = percentile(lat, 50)
	res.p99 = percentile(lat, 99)
	return res
}

// On the model of the benchmark's one core, offered 2× and 4× what it
// serves, the limit settles where the core is nearly full without a queue in
// front of it: at least 85 % of the capacity answered, the admitted p99 within
// 5 × the unloaded one. A limit that cannot go below 4 (or moves by whole
// requests) admits every request here and the queue before the front door
// grows without bound.
func TestLimitFindsTheCoreOnAOneCoreModel(t *testing.T) {
	t.Parallel()
	m := benchCore
	c := m.capacity()
	run := func(level float64) modelResult {
		l, clk, _ := limiterSetup(t, func(cfg *framework.OverloadConfig) {
			*cfg = framework.DefaultOverloadConfig()
			cfg.Queue = 0 // the model has no queue: over the limit is shed
		})
		return m.run(t, l, clk, level*c, 20*time.Second)
	}
	unloaded := run(0.25)
	for _, level := range []float64{2, 4} {
		r := run(level)
		t.Logf("%.0f× (C %.0f/s): admitted %.0f/s (%.0f %%), p50 %v, p99 %v (unloaded %v)", level, c, r.good, 100*r.good/c, r.p50, r.p99, unloaded.p99)
		if r.good < 0.85*c || r.p99 > 5*unloaded.p99 {
			t.Errorf("%.0f×: %.0f/s answered in time (want ≥ %.0f), p99 %v (want ≤ %v); limits %v", level, r.good, 0.85*c, r.p99, 5*unloaded.p99, r.limits)
		}
	}
}

func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[max(int(math.Ceil(float64(len(s))*p/100))-1, 0)]
}
