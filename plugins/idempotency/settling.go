package idempotency

import "sync"

// settling holds the keys whose first request, in this process, has sent
// its response and is writing it to the store (or releasing the key). A
// client that got that response and repeats the request at once can reach
// the store before the write does; it then finds the key still running,
// and rather than a 409 it waits for the write and asks the store again.
// A repeat that reaches another instance of the service gets the 409, and
// the stored response when it retries after Retry-After.
type settling struct {
	mu   sync.Mutex
	keys map[string]*settle
}

// settle is one key's writes in flight: a first request whose lease ran out
// and the one that took its key over may be writing at once.
type settle struct {
	writes int
	done   chan struct{} // closed when the last write ends
}

// begin marks key as settling until the returned end is called. It is
// called before the response goes to the client, so a repeat the client
// sends after it finds the mark.
func (s *settling) begin(key string) (end func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.keys == nil {
		s.keys = map[string]*settle{}
	}
	e := s.keys[key]
	if e == nil {
		e = &settle{done: make(chan struct{})}
		s.keys[key] = e
	}
	e.writes++
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if e.writes--; e.writes == 0 {
			delete(s.keys, key)
			close(e.done)
		}
	}
}

// of returns the channel closed when key's writes end, or nil when no first
// request here is settling it. A repeat looks before it asks the store: a
// write that ends between the store's answer and the look is then still
// waited for, not taken for one that never began.
func (s *settling) of(key string) <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e := s.keys[key]; e != nil {
		return e.done
	}
	return nil
}
