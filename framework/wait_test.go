package framework_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/jfastframework/jfast/framework"
)

func TestWaitReturnsWhenTheGroupIsDone(t *testing.T) {
	var wg sync.WaitGroup
	release := make(chan struct{})
	wg.Go(func() { <-release })
	close(release)
	if err := framework.Wait(context.Background(), &wg); err != nil {
		t.Fatalf("err = %v, want nil", err)
	}
}

func TestWaitReturnsTheContextsErrorFirst(t *testing.T) {
	var wg sync.WaitGroup
	release := make(chan struct{})
	wg.Go(func() { <-release })
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := framework.Wait(ctx, &wg); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	close(release) // the group's goroutine, and Wait's, end
	wg.Wait()
}
