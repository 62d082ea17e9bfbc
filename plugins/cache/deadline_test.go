package cache

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jfastframework/jfast/framework/resilience"
	"github.com/jfastframework/jfast/problem"
)

// Whose deadline ended the command decides what the breaker learns
// (docs/resilience.md, "Whose deadline was it?"). Against a paused private
// redis-server: commands whose caller's deadline (50 ms) is sooner than
// command_timeout (300 ms) fail with the usual UnavailableError, a 503 naming
// the cache, but the breaker counts none of them, however many; commands cut by
// command_timeout with the caller still waiting count as a hang: the first one
// opens it (nothing answered meanwhile), whatever breaker_failures says, and
// the next command is refused at once.
func TestCallerDeadlineIsNoEvidence(t *testing.T) {
	t.Parallel()
	srv := startRedis(t)
	b := setup(t, setupOpts{url: srv.url(), toml: "command_timeout = \"300ms\"\nbreaker_failures = 5\n"})
	c := b.cache
	if err := c.Set(context.Background(), "k", []byte("v"), time.Hour); err != nil {
		t.Fatal(err)
	}
	before := c.Breaker().Snapshot() // the SET: one success in the window
	srv.pause(t)
	defer srv.resume(t)

	get := func(callerDeadline time.Duration) error {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), callerDeadline)
		defer cancel()
		_, _, err := c.Get(ctx, "k")
		p, ok := problem.As(err)
		if !errors.Is(err, ErrUnavailable) || !ok || p.Status != 503 || p.Extensions["dependency"] != "cache" {
			t.Fatalf("GET on a paused Redis under a %s deadline: %v (%T), problem %+v; want an UnavailableError, 503 naming the cache", callerDeadline, err, err, p)
		}
		return err
	}
	for range 5 {
		err := get(50 * time.Millisecond)
		var ue *UnavailableError
		if !errors.As(err, &ue) || ue.Timeout != 0 || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("cut by the caller's deadline: %v; want no command_timeout in it, and errors.Is DeadlineExceeded", err)
		}
	}
	if s := c.Breaker().Snapshot(); s.State != resilience.StateClosed || s.Consecutive != 0 || s.WindowCalls != before.WindowCalls || s.WindowFailures != 0 {
		t.Fatalf("after 5 commands cut by the caller's deadline: %+v, want closed with nothing counted", s)
	}
	var ue *UnavailableError
	if err := get(time.Minute); !errors.As(err, &ue) || ue.Timeout != commandTimeout {
		t.Fatalf("cut by command_timeout: %v; want it to say command_timeout", err)
	}
	if s := c.Breaker().Snapshot(); s.State != resilience.StateOpen || s.Opens != 1 {
		t.Fatalf("after a command cut by command_timeout with nothing answered meanwhile: %+v, want open", s)
	}
	if err := get(time.Minute); !errors.Is(err, resilience.ErrOpen) {
		t.Fatalf("the next command: %v; want the open breaker's refusal", err)
	}
}
