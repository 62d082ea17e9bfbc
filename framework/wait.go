package framework

import (
	"context"
	"sync"
	"time"
)

// Wait waits for wg, or for ctx to end first: then it returns ctx.Err() and
// the goroutines wg counts are left running. A plugin's Stop uses it to wait
// for its background work within the stop deadline it was given.
func Wait(ctx context.Context, wg *sync.WaitGroup) error {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// CheckPart is ctx for the part of a readiness check that may not answer in
// time (a probe of a hung server, a count of a slow queue): it ends a third
// of the check's remaining time early, 267 ms of the default
// readiness_timeout of 800 ms. The check stops waiting for that part then and
// still answers, naming the cause, before the readiness aggregator stops
// waiting for the check; the third left is slack for a busy machine, where
// the check and the aggregator are scheduled late. Without a deadline on ctx
// it only adds a cancel.
func CheckPart(ctx context.Context) (context.Context, context.CancelFunc) {
	dl, ok := ctx.Deadline()
	if !ok {
		return context.WithCancel(ctx)
	}
	return context.WithDeadline(ctx, dl.Add(-time.Until(dl)/3))
}
