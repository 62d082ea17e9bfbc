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
