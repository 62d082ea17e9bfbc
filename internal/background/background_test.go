package background

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jfastframework/jfast/framework/resilience"
)

func TestEveryRunsARoundAtOnceThenEachPeriodUntilStop(t *testing.T) {
	clock := resilience.NewTestClock(time.Unix(0, 0))
	var rounds atomic.Int32
	var task Task
	if !task.Every(clock, time.Second, func(context.Context) { rounds.Add(1) }) {
		t.Fatal("Every on a new task = false")
	}
	if n := rounds.Load(); n != 1 {
		t.Fatalf("rounds after Every = %d, want 1 (the first before it returns)", n)
	}
	if task.Every(clock, time.Second, func(context.Context) { t.Error("a second Every ran") }) {
		t.Fatal("Every on a started task = true")
	}
	clock.BlockUntil(1)
	clock.Advance(time.Second)
	clock.BlockUntil(1) // the second round ran, the loop waits again
	if n := rounds.Load(); n != 2 {
		t.Fatalf("rounds after one period = %d, want 2", n)
	}
	task.Stop()
	clock.Advance(time.Hour)
	if n := rounds.Load(); n != 2 {
		t.Fatalf("rounds after Stop = %d, want 2", n)
	}
}

func TestGoContextEndsWhenFReturnsOrOnStop(t *testing.T) {
	var task Task
	release := make(chan struct{})
	ctx := task.Go(func(context.Context) { <-release })
	if task.Go(func(context.Context) {}) != nil {
		t.Fatal("Go on a started task returned a context")
	}
	close(release)
	<-ctx.Done() // f returned
	task.Stop()

	var returned atomic.Bool
	ctx = task.Go(func(ctx context.Context) { <-ctx.Done(); returned.Store(true) })
	if ctx == nil {
		t.Fatal("Go after Stop returned nil: the task does not start again")
	}
	task.Stop()
	if ctx.Err() == nil {
		t.Fatal("Stop left the context running")
	}
	if !returned.Load() {
		t.Fatal("Stop returned before f did")
	}
	var never Task
	never.Stop() // nothing started: returns at once
}
