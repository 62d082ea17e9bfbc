package http

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/jfastframework/jfast/internal/deadline"
)

// The transport derives a context from every request's, which is an
// attempt's over the call's: one derived so registers with the call's
// context (attemptCtx.AfterFunc) instead of being watched by a goroutine of
// its own.
func TestAttemptContextDerivedWithoutGoroutines(t *testing.T) {
	ctx, cancel := deadline.NewTimer().WithDeadline(context.Background(), time.Now().Add(time.Hour))
	defer cancel()
	attemptCtx := &attemptCtx{Context: ctx}
	before := runtime.NumGoroutine()
	var cancels []context.CancelFunc
	for range 100 {
		_, c := context.WithCancel(attemptCtx)
		cancels = append(cancels, c)
	}
	if n := runtime.NumGoroutine(); n > before+10 {
		t.Fatalf("%d goroutines after deriving 100 contexts, %d before", n, before)
	}
	for _, c := range cancels {
		c()
	}
}
