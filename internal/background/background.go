// Package background runs the goroutines jfast's components start for their
// lifetime (an upstream's name resolutions and health checks, the gateway's
// drain watch): a Task's goroutine runs under a context that Stop cancels,
// and Stop waits for it to return.
package background

import (
	"context"
	"sync"
	"time"

	"github.com/jfastframework/jfast/framework/resilience"
)

// Task is one such goroutine. The zero value is ready to start; it is safe
// for concurrent use.
type Task struct {
	mu     sync.Mutex
	cancel context.CancelFunc
	done   chan struct{}
}

// Go runs f in a goroutine and returns its context, which ends when Stop is
// called or f returns. It returns nil, starting nothing, when t is started
// already (and not stopped since).
func (t *Task) Go(f func(ctx context.Context)) context.Context {
	ctx, cancel, done := t.begin()
	if ctx == nil {
		return nil
	}
	go t.run(ctx, cancel, done, f)
	return ctx
}

// Every runs round once before it returns, then in a goroutine every period
// of clock until Stop. It reports false, running nothing, when t is started
// already (and not stopped since).
func (t *Task) Every(clock resilience.Clock, every time.Duration, round func(ctx context.Context)) bool {
	ctx, cancel, done := t.begin()
	if ctx == nil {
		return false
	}
	round(ctx)
	go t.run(ctx, cancel, done, func(ctx context.Context) {
		for {
			timer := clock.NewTimer(every)
			select {
			case <-timer.C():
			case <-ctx.Done():
				timer.Stop()
				return
			}
			round(ctx)
		}
	})
	return true
}

// Stop cancels the task's context and waits for its goroutine to return;
// the task can then start again. It does nothing on a task not started.
func (t *Task) Stop() {
	t.mu.Lock()
	cancel, done := t.cancel, t.done
	t.mu.Unlock()
	if cancel == nil {
		return
	}
	cancel()
	<-done
	t.mu.Lock()
	if t.done == done {
		t.cancel, t.done = nil, nil
	}
	t.mu.Unlock()
}

// begin makes the task's context, or returns a nil one when t is started.
func (t *Task) begin() (context.Context, context.CancelFunc, chan struct{}) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.cancel != nil {
		return nil, nil, nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.cancel, t.done = cancel, make(chan struct{})
	return ctx, cancel, t.done
}

func (t *Task) run(ctx context.Context, cancel context.CancelFunc, done chan struct{}, f func(context.Context)) {
	defer close(done)
	defer cancel()
	f(ctx)
}
