package resilience

import (
	"context"
	"slices"
	"testing"
	"time"
)

func TestTestClockSleepAndAdvance(t *testing.T) {
	t.Parallel()
	c := NewTestClock(epoch)
	done := make(chan error, 2)
	go func() { done <- c.Sleep(context.Background(), 2*time.Second) }()
	go func() { done <- c.Sleep(context.Background(), time.Second) }()
	c.BlockUntil(2)
	c.Advance(time.Second)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
		t.Fatal("2 s sleeper woke after 1 s")
	default:
	}
	c.Advance(time.Second)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	got := c.Sleeps()
	slices.Sort(got)
	if !slices.Equal(got, []time.Duration{time.Second, 2 * time.Second}) {
		t.Fatalf("Sleeps = %v", got)
	}
	if !c.Now().Equal(epoch.Add(2 * time.Second)) {
		t.Fatalf("Now = %v", c.Now())
	}
}

func TestTestClockSleepHonoursContext(t *testing.T) {
	t.Parallel()
	c := NewTestClock(epoch)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Sleep(ctx, time.Hour) }()
	c.BlockUntil(1)
	cancel()
	if err := <-done; err != context.Canceled {
		t.Fatalf("Sleep = %v, want context.Canceled", err)
	}
	if c.Waiters() != 0 {
		t.Fatalf("Waiters = %d after cancel", c.Waiters())
	}
	if err := c.Sleep(ctx, time.Second); err != context.Canceled {
		t.Fatalf("Sleep on done ctx = %v", err)
	}
	bctx, bcancel := context.WithCancel(context.Background())
	bcancel()
	if err := c.BlockUntilContext(bctx, 5); err != context.Canceled {
		t.Fatalf("BlockUntilContext = %v", err)
	}
}

func TestTestClockAutoAdvance(t *testing.T) {
	t.Parallel()
	c := NewTestClock(epoch)
	c.SetAutoAdvance(true)
	timer := c.NewTimer(150 * time.Millisecond)
	for _, d := range []time.Duration{100 * time.Millisecond, 200 * time.Millisecond} {
		if err := c.Sleep(context.Background(), d); err != nil {
			t.Fatal(err)
		}
	}
	if got := c.Now().Sub(epoch); got != 300*time.Millisecond {
		t.Fatalf("clock moved %v, want 300ms", got)
	}
	select {
	case at := <-timer.C():
		if !at.Equal(epoch.Add(150 * time.Millisecond)) {
			t.Fatalf("timer fired with %v", at)
		}
	default:
		t.Fatal("timer due at 150ms did not fire")
	}
	if timer.Stop() {
		t.Fatal("Stop of a fired timer = true")
	}
}

func TestTestClockTimerStopAndZero(t *testing.T) {
	t.Parallel()
	c := NewTestClock(epoch)
	tm := c.NewTimer(time.Second)
	if !tm.Stop() || tm.Stop() {
		t.Fatal("Stop = want true then false")
	}
	c.Advance(time.Hour)
	select {
	case <-tm.C():
		t.Fatal("stopped timer fired")
	default:
	}
	select {
	case <-c.NewTimer(0).C():
	default:
		t.Fatal("zero timer did not fire at once")
	}
}

func TestRealClock(t *testing.T) {
	t.Parallel()
	c := RealClock()
	start := time.Now()
	if err := c.Sleep(context.Background(), time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if time.Since(start) < time.Millisecond {
		t.Fatal("real Sleep returned early")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := c.Sleep(ctx, time.Hour); err != context.Canceled {
		t.Fatalf("Sleep = %v", err)
	}
	if err := c.Sleep(context.Background(), 0); err != nil {
		t.Fatalf("Sleep(0) = %v", err)
	}
	tm := c.NewTimer(time.Hour)
	if !tm.Stop() {
		t.Fatal("Stop = false")
	}
	if c.Now().Before(start) {
		t.Fatal("Now went back")
	}
}
