package framework

import (
	"math"
	"runtime/metrics"
	"sync"
	"time"
)

// schedWait reads how long goroutines waited for a CPU: the Go scheduler's
// /sched/latencies:seconds, the time from runnable to running. A request's
// goroutine waits there before net/http hands the request to the framework
// (reading it, then serving it), so it is the one part of the queue before
// the front door that the process can measure: when the CPUs are busier
// than they can be, it grows while the handlers' own latency may not.
type schedWait struct {
	mu     sync.Mutex
	sample []metrics.Sample
	prev   []uint64
}

const schedLatencies = "/sched/latencies:seconds"

func newSchedWait() *schedWait {
	s := &schedWait{sample: []metrics.Sample{{Name: schedLatencies}}}
	metrics.Read(s.sample)
	if s.sample[0].Value.Kind() != metrics.KindFloat64Histogram {
		return nil
	}
	s.prev = append([]uint64(nil), s.sample[0].Value.Float64Histogram().Counts...)
	return s
}

// p99 returns the 99th percentile of the waits since the last call, or 0
// when there were none.
func (s *schedWait) p99() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	metrics.Read(s.sample)
	h := s.sample[0].Value.Float64Histogram()
	var total uint64
	delta := make([]uint64, len(h.Counts))
	for i, c := range h.Counts {
		if i < len(s.prev) {
			delta[i] = c - s.prev[i]
		} else {
			delta[i] = c
		}
		total += delta[i]
	}
	s.prev = append(s.prev[:0], h.Counts...)
	if total == 0 {
		return 0
	}
	rank := uint64(math.Ceil(float64(total) * 0.99))
	var seen uint64
	for i, d := range delta {
		seen += d
		if seen >= rank {
			upper := h.Buckets[i+1]
			if math.IsInf(upper, 1) {
				upper = h.Buckets[i]
			}
			return time.Duration(upper * float64(time.Second))
		}
	}
	return 0
}

// runQueue reads whether a goroutine waits for a CPU now while every P
// runs one: the Go scheduler's /sched/goroutines/runnable and
// /sched/goroutines/running, read together under the scheduler's lock
// with GOMAXPROCS (about 100 ns). A runnable goroutine beside an idle P is about to be
// taken by it, not waiting. Not safe for concurrent use: the Limiter calls
// it under its mutex.
type runQueue struct {
	sample []metrics.Sample
}

const (
	schedRunnable = "/sched/goroutines/runnable:goroutines"
	schedRunning  = "/sched/goroutines/running:goroutines"
	schedProcs    = "/sched/gomaxprocs:threads"
)

func newRunQueue() *runQueue {
	q := &runQueue{sample: []metrics.Sample{{Name: schedRunnable}, {Name: schedRunning}, {Name: schedProcs}}}
	metrics.Read(q.sample)
	for _, s := range q.sample {
		if s.Value.Kind() != metrics.KindUint64 {
			return nil
		}
	}
	return q
}

// busy reports whether a runnable goroutine waits while every P runs one.
func (q *runQueue) busy() bool {
	metrics.Read(q.sample)
	return q.sample[0].Value.Uint64() > 0 && q.sample[1].Value.Uint64() >= q.sample[2].Value.Uint64()
}
