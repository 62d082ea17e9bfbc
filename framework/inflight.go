package framework

import (
	"sync"
	"time"
)

// inflight is the set of requests being served, so that a shutdown out of time
// can say which requests it cut. Each request's exchange is linked into it for
// the request's life: adding and removing are a few pointer moves under a
// mutex, with no allocation.
type inflight struct {
	mu   sync.Mutex
	head *exchange
}

// cutRequest describes a request a shutdown cut.
type cutRequest struct {
	method, path, id string
	running          time.Duration
}

func (f *inflight) add(ex *exchange) {
	f.mu.Lock()
	ex.prev, ex.next = nil, f.head
	if f.head != nil {
		f.head.prev = ex
	}
	f.head = ex
	f.mu.Unlock()
}

func (f *inflight) remove(ex *exchange) {
	f.mu.Lock()
	if ex.prev != nil {
		ex.prev.next = ex.next
	} else {
		f.head = ex.next
	}
	if ex.next != nil {
		ex.next.prev = ex.prev
	}
	ex.prev, ex.next = nil, nil
	f.mu.Unlock()
}

// list returns the requests in flight now, longest running first.
func (f *inflight) list(now time.Time) []cutRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []cutRequest
	for ex := f.head; ex != nil; ex = ex.next {
		out = append(out, cutRequest{method: ex.method, path: ex.path, id: ex.id, running: now.Sub(ex.rec.start)})
	}
	// The list is newest first.
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out
}
