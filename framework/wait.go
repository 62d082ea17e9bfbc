package framework

import (
	"context"
	"sync"
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
