package channels

import (
	"fmt"
	"sync"
)

// The reasons a stream is refused, for the metric.
const (
	refusedProcess = "process_limit"
	refusedClient  = "client_limit"
)

// streamLimits counts the open server-sent events streams of the process,
// over every channel, and per client, against sse_max_streams and
// sse_max_streams_per_client.
type streamLimits struct {
	max, perClient int

	mu       sync.Mutex
	open     int
	byClient map[string]int
}

func newStreamLimits(max, perClient int) *streamLimits {
	return &streamLimits{max: max, perClient: perClient, byClient: make(map[string]int)}
}

// admit counts a stream for client; it returns the release, or why the
// stream is refused.
func (l *streamLimits) admit(client string) (func(), string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.open >= l.max {
		return nil, refusedProcess
	}
	if l.byClient[client] >= l.perClient {
		return nil, refusedClient
	}
	l.open++
	l.byClient[client]++
	var once sync.Once
	return func() {
		once.Do(func() {
			l.mu.Lock()
			defer l.mu.Unlock()
			l.open--
			if n := l.byClient[client] - 1; n > 0 {
				l.byClient[client] = n
			} else {
				delete(l.byClient, client)
			}
		})
	}, ""
}

// openNow is the number of streams counted.
func (l *streamLimits) openNow() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.open
}

// detail is the 503's detail for a refusal.
func (l *streamLimits) detail(reason string) string {
	if reason == refusedClient {
		return fmt.Sprintf("this client has %d event streams open, the most it may (sse_max_streams_per_client)", l.perClient)
	}
	return fmt.Sprintf("this process serves %d event streams, the most it may (sse_max_streams)", l.max)
}
